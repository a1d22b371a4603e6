"""Server-rendered SVG geometry: line charts and histograms (the templates draw them)."""

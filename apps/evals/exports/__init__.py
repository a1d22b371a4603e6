"""Every file that leaves: downloads, report files, OTLP traces."""

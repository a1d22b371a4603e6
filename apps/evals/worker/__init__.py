"""Everything off the request path: sweeps, re-deliveries and indexing run here on a clock, so a
page or an API read only reads (Langfuse's ``worker/``; issue 24 §3)."""

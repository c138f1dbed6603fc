"""spmdcheck rules for `lightning` (only what the checker models)."""

"""spmdcheck rules for `pytorch_lightning` (only what the checker models)."""

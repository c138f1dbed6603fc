"""spmdcheck rules for `lightning.pytorch` (only what the checker models)."""

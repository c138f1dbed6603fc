"""spmdcheck rules for `lightning.fabric` (only what the checker models)."""

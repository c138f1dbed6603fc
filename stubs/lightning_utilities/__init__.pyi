"""spmdcheck rules for lightning_utilities (read by spmdcheck, never imported)."""

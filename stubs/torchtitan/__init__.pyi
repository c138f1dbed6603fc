"""spmdcheck rules for torchtitan 0.3.0 (read with libcst, never imported)."""

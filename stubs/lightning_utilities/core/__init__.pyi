"""spmdcheck rules for `lightning_utilities.core`."""

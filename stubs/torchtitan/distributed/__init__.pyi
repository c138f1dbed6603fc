"""spmdcheck rules for `torchtitan.distributed`."""

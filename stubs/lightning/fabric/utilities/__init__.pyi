"""spmdcheck rules for `lightning.fabric.utilities`: its re-export of `rank_zero_only`."""

from lightning_utilities.core.rank_zero import rank_zero_only as rank_zero_only

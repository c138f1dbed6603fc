"""spmdcheck model of `lightning_utilities.core.rank_zero`, the home of Lightning's `rank_zero_only`
(re-exported by `lightning.pytorch.utilities`, `lightning.fabric.utilities` and `pytorch_lightning`)."""

import torch.distributed as dist

from spmdcheck.annotations import model


@model
def rank_zero_only(fn, default=None):
    """The decorated function runs on global rank 0 only (Lightning reads the rank from the launcher's
    environment once; it is the process's global rank): a collective inside it is reached on rank 0
    alone."""

    def wrapped_fn(*args, **kwargs):
        if dist.get_rank() == 0:
            return fn(*args, **kwargs)
        return default

    return wrapped_fn

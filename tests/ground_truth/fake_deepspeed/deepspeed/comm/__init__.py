"""Test-only `deepspeed.comm`: torch.distributed's functions (DeepSpeed's wrap them, same signatures)."""
from __future__ import annotations

from torch.distributed import (  # noqa: F401
    ReduceOp,
    all_gather,
    all_reduce,
    barrier,
    broadcast,
    get_rank,
    get_world_size,
    is_initialized,
    new_group,
)

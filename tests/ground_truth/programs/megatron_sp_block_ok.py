# spmdcheck: mesh = ["tp"]
# EXPECT: match
"""Sequence-parallel block: all-gather the sequence (bwd reduce-scatter), column- and row-parallel
linears, reduce-scatter back to the sequence shard (bwd all-gather)."""
from typing import Annotated

import torch
import torch.nn.functional as F
from megatron.core.tensor_parallel import (
    gather_from_sequence_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
)
from spmd_types import S

GLOBAL_SHAPES = {"x": (8, 16), "w1": (32, 16), "w2": (16, 32)}


def step(
    x: Annotated[torch.Tensor, {"tp": S(0)}],
    w1: Annotated[torch.Tensor, {"tp": S(0)}],
    w2: Annotated[torch.Tensor, {"tp": S(1)}],
) -> Annotated[torch.Tensor, {"tp": S(0)}]:
    full = gather_from_sequence_parallel_region(x)
    h = F.gelu(F.linear(full, w1))
    return reduce_scatter_to_sequence_parallel_region(F.linear(h, w2))

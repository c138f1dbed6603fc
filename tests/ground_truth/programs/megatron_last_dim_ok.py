# spmdcheck: mesh = ["tp"]
# EXPECT: match
"""The last-dim mappings: scatter/gather_..._tensor_model_parallel_region (split / all-gather, no
reduction) and all_gather_last_dim / reduce_scatter_last_dim (with a reduce-scatter backward / forward)."""
from typing import Annotated

import torch
import torch.nn.functional as F
from megatron.core.tensor_parallel import (
    all_gather_last_dim_from_tensor_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_scatter_last_dim_to_tensor_parallel_region,
    scatter_to_tensor_model_parallel_region,
)
from spmd_types import I, S

GLOBAL_SHAPES = {"x": (4, 16), "h": (4, 16), "w1": (32, 16), "w2": (16, 32)}


def step(
    x: Annotated[torch.Tensor, {"tp": I}],
    h: Annotated[torch.Tensor, {"tp": S(1)}],
    w1: Annotated[torch.Tensor, {"tp": S(0)}],
    w2: Annotated[torch.Tensor, {"tp": S(1)}],
) -> tuple[Annotated[torch.Tensor, {"tp": I}], Annotated[torch.Tensor, {"tp": S(1)}]]:
    s = torch.tanh(scatter_to_tensor_model_parallel_region(x) * 2.0 + 1.0)
    a = gather_from_tensor_model_parallel_region(s)
    full = all_gather_last_dim_from_tensor_parallel_region(h)
    y = F.linear(F.gelu(F.linear(full, w1)), w2)
    return a, reduce_scatter_last_dim_to_tensor_parallel_region(y)

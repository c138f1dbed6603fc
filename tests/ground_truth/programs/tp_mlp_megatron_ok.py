# spmdcheck: mesh = ["tp"]
# EXPECT: match
from typing import Annotated

import torch
from megatron.core.tensor_parallel import copy_to_tensor_model_parallel_region, reduce_from_tensor_model_parallel_region
from spmd_types import I, S

GLOBAL_SHAPES = {"x": (4, 8), "w1": (16, 8), "w2": (8, 16)}


def step(
    x: Annotated[torch.Tensor, {"tp": I}],
    w1: Annotated[torch.Tensor, {"tp": S(0)}],
    w2: Annotated[torch.Tensor, {"tp": S(1)}],
) -> Annotated[torch.Tensor, {"tp": I}]:
    x = copy_to_tensor_model_parallel_region(x)
    h = torch.nn.functional.gelu(x @ w1.T)
    return reduce_from_tensor_model_parallel_region(h @ w2.T)

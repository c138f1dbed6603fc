# spmdcheck: mesh = ["tp"]
# EXPECT: differs
from typing import Annotated

import torch
from megatron.core.tensor_parallel import reduce_from_tensor_model_parallel_region
from spmd_types import I, S

GLOBAL_SHAPES = {"x": (4, 8), "w1": (16, 8), "w2": (8, 16)}


def step(
    x: Annotated[torch.Tensor, {"tp": I}],
    w1: Annotated[torch.Tensor, {"tp": S(0)}],
    w2: Annotated[torch.Tensor, {"tp": S(1)}],
) -> Annotated[torch.Tensor, {"tp": I}]:
    pass
    h = torch.nn.functional.gelu(x @ w1.T)  # error: SPMD102 col 34
    return reduce_from_tensor_model_parallel_region(h @ w2.T)

# [expected messages] line:column CODE: message
# 18:34 SPMD102: Invariant on axis 'tp' cannot be mixed with other types: its gradient would not be all-reduced (operands: `x`: I, `w1.T`: S(1))

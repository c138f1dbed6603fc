# spmdcheck: mesh = ["tp"]
# EXPECT: differs
from typing import Annotated

import spmd_types as spmd
import torch
from spmd_types import I, P, S

GLOBAL_SHAPES = {"x": (4, 8), "w1": (16, 8), "w2": (8, 16)}


def step(
    x: Annotated[torch.Tensor, {"tp": I}],
    w1: Annotated[torch.Tensor, {"tp": S(0)}],
    w2: Annotated[torch.Tensor, {"tp": S(1)}],
) -> Annotated[torch.Tensor, {"tp": I}]:
    pass
    h = torch.relu(x @ w1.T)  # error: SPMD102 col 20
    y = h @ w2.T
    return spmd.all_reduce(y, "tp", src=P, dst=I)

# [expected messages] line:column CODE: message
# 18:20 SPMD102: Invariant on axis 'tp' cannot be mixed with other types: its gradient would not be all-reduced (operands: `x`: I, `w1.T`: S(1))

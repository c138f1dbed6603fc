# spmdcheck: mesh = ["tp"]
# EXPECT: differs
from typing import Annotated

import spmd_types as spmd
import torch
from spmd_types import I, P, R, S

GLOBAL_SHAPES = {"x": (4, 8), "w1": (16, 8), "w2": (8, 16)}


def step(
    x: Annotated[torch.Tensor, {"tp": I}],
    w1: Annotated[torch.Tensor, {"tp": S(0)}],
    w2: Annotated[torch.Tensor, {"tp": S(1)}],
) -> Annotated[torch.Tensor, {"tp": I}]:
    x = spmd.convert(x, "tp", src=I, dst=R)
    h = torch.relu(x @ w1.T)
    y = torch.relu(h @ w2.T)  # warning: SPMD201 col 9
    return spmd.all_reduce(y, "tp", src=P, dst=I)

# [expected messages] line:column CODE: message
# 19:9 SPMD201: `h @ w2.T` is a per-rank partial sum on axis 'tp' (from the sharded contraction at line 19) and goes through non-linear `torch.relu` before it is reduced

# spmdcheck: mesh = ["tp"]
# EXPECT: hang
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
    y = h @ w2.T
    if torch.distributed.get_rank() == 0:
        y = spmd.all_reduce(y, "tp", src=P, dst=R)  # error: SPMD501 col 13
    return spmd.all_reduce(y, "tp", src=P, dst=I)  # error: SPMD302 col 12

# [expected messages] line:column CODE: message
# 21:13 SPMD501: `all_reduce` on axis 'tp' runs only on the ranks where the rank-dependent condition at line 20 is true: the other ranks never join it (or join another collective), and the program hangs
# 22:12 SPMD302: `all_reduce` expects a Partial on axis 'tp' but `y` is R: it is already reduced (by the reduction at line 21), and reducing again multiplies it by the axis size (when the `if` at line 20 takes the if branch)

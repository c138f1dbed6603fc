# spmdcheck: mesh = ["dp", "tp"]
# EXPECT: match
from typing import Annotated

import spmd_types as spmd
import torch
from spmd_types import P, R, S

GLOBAL_SHAPES = {"x": (8, 8), "w1": (16, 8), "w2": (8, 16)}


def step(
    x: Annotated[torch.Tensor, {"dp": S(0), "tp": R}],
    w1: Annotated[torch.Tensor, {"dp": R, "tp": S(0)}],
    w2: Annotated[torch.Tensor, {"dp": R, "tp": S(1)}],
) -> Annotated[torch.Tensor, {"dp": S(0), "tp": R}]:
    h = torch.tanh(x @ w1.T)
    y = h @ w2.T
    return spmd.all_reduce(y, "tp", src=P, dst=R)

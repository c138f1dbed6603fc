# spmdcheck: mesh = ["tp"]
# EXPECT: match
"""A raw torch.distributed.all_reduce with group=None (the default world group) on a detached copy."""
from typing import Annotated

import torch
import torch.distributed as dist
from spmd_types import P, R

GLOBAL_SHAPES = {"x": (4, 8)}


def step(x: Annotated[torch.Tensor, {"tp": P}]) -> Annotated[torch.Tensor, {"tp": R}]:
    y = x.detach().clone()
    dist.all_reduce(y)
    return y

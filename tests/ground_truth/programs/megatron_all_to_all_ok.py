# spmdcheck: mesh = ["tp"]
# EXPECT: match
"""all_to_all_sp2hp / all_to_all_hp2sp: [tokens/TP, H] -> [tokens, H/TP] -> back, with an element-wise
op in between."""
from typing import Annotated

import torch
from megatron.core.tensor_parallel import all_to_all_hp2sp, all_to_all_sp2hp
from spmd_types import S

GLOBAL_SHAPES = {"x": (8, 16)}


def step(x: Annotated[torch.Tensor, {"tp": S(0)}]) -> Annotated[torch.Tensor, {"tp": S(0)}]:
    hp = all_to_all_sp2hp(x)
    return all_to_all_hp2sp(torch.sin(hp) * hp)

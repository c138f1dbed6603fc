# spmdcheck: mesh = ["tp"]
# EXPECT: match
"""gather_from_sequence_parallel_region(tensor_parallel_output_grad=False): all-gather forward, split
backward, so the gathered value is Invariant and feeds duplicated work; scatter_to_sequence_parallel_region
splits an Invariant value (bwd all-gather)."""
from typing import Annotated

import torch
from megatron.core.tensor_parallel import gather_from_sequence_parallel_region, scatter_to_sequence_parallel_region
from spmd_types import I, S

GLOBAL_SHAPES = {"x": (8, 16), "y": (8, 16)}


def step(
    x: Annotated[torch.Tensor, {"tp": S(0)}],
    y: Annotated[torch.Tensor, {"tp": I}],
) -> Annotated[torch.Tensor, {"tp": S(0)}]:
    full = gather_from_sequence_parallel_region(x, tensor_parallel_output_grad=False)
    z = torch.tanh(full) * y
    return scatter_to_sequence_parallel_region(z) * 3.0

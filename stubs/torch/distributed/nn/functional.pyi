"""spmdcheck rules for `torch.distributed.nn.functional` (never imported).

The differentiable wrappers of torch.distributed (autograd Functions that
copy the input, run the in-place collective, and define a backward).
`group` defaults to the world group; when it is not passed the axis is the
one spmdcheck associates with the default group.
"""

from typing import Any

from torch import Tensor

from spmdcheck.annotations import maps_to, opaque, raw_collective

# Forward: a copy of `tensor` summed over the group; backward: all_reduce of
# the gradient. That is spmd_types' all_reduce(P -> R) (self-dual backward).
@maps_to("all_reduce", axis=None, src="P", dst="R", group="group", tensor="tensor")
def all_reduce(tensor: Tensor, op: Any = ..., group: Any = None) -> Tensor: ...

# Forward: all_to_all into `output` (returned); backward: all_to_all back.
@maps_to("all_to_all", axis=None, src="V", dst="V", group="group", tensor="input")
def all_to_all_single(
    output: Tensor,
    input: Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: Any = None,
) -> Tensor: ...

# Forward: every rank gets `src`'s data; backward: gradients summed onto
# `src` (zero elsewhere), which is the correct gradient for any input type.
@raw_collective(src="*", dst="R", input="tensor", output=None, mutates=False, differentiable=True)
def broadcast(tensor: Tensor, src: int, group: Any = None) -> Tensor: ...

# Forward: the sum lands on rank `dst` only (other ranks: partial data), so
# the result is V; backward: broadcast from `dst`.
@raw_collective(src="P", dst="V", input="tensor", output=None, mutates=False, differentiable=True)
def reduce(tensor: Tensor, dst: int, op: Any = ..., group: Any = None) -> Tensor: ...

# Returns a tuple with one tensor per rank (each R across the group, backward
# reduce-scatter); a tuple result has no mapping in the vocabulary: opaque.
@opaque
def all_gather(tensor: Tensor, group: Any = None) -> tuple[Tensor, ...]: ...

# The input is a list (one tensor per rank): no mapping in the vocabulary.
@opaque
def reduce_scatter(output: Tensor, input_list: list[Tensor], op: Any = ..., group: Any = None) -> Tensor: ...
@opaque
def all_to_all(
    output_tensor_list: list[Tensor], input_tensor_list: list[Tensor], group: Any = None
) -> tuple[Tensor, ...]: ...

"""spmdcheck rules for `torch.distributed._functional_collectives` (never imported).

Functional collectives return a new tensor and leave the input alone
(`output=None, mutates=False`: the returned tensor gets `dst`).

In torch 2.13 the base ops (`_c10d_functional::all_reduce`,
`all_gather_into_tensor`, `reduce_scatter_tensor`, `all_to_all_single`) have
registered autograd formulas (`torch.library.register_autograd` in
`_functional_collectives.py`; the `*_autograd` variants now just call the
base ones), so every entry below except `broadcast` is `differentiable=True`.
Their backwards are sum-collectives: all_reduce <-> all_reduce,
all_gather <-> reduce_scatter, all_to_all <-> all_to_all. That matches the
spmd_types pairs only for dst=R, so the gathers and the all-reduce type
their result R (not I).
`group` is a ProcessGroup, a DeviceMesh, a (DeviceMesh, dim) pair or a rank
list.
"""

from typing import Any

from torch import Tensor

from spmdcheck.annotations import dims, linear, raw_collective

@linear
@dims("keep")
def wait_tensor(tensor: Tensor) -> Tensor: ...
@raw_collective(src="P", dst="R", input="self", output=None, mutates=False, differentiable=True)
def all_reduce(self: Tensor, reduceOp: str, group: Any, tag: str = "") -> Tensor: ...
@raw_collective(src="V", dst="R", input="self", output=None, mutates=False, differentiable=True)
def all_gather_single(self: Tensor, gather_dim: int, group: Any, tag: str = "") -> Tensor: ...
@raw_collective(src="V", dst="R", input="self", output=None, mutates=False, differentiable=True)
def all_gather_single_autograd(self: Tensor, gather_dim: int, group: Any, tag: str = "") -> Tensor: ...
@raw_collective(src="V", dst="R", input="self", output=None, mutates=False, differentiable=True)
def all_gather_tensor(self: Tensor, gather_dim: int, group: Any, tag: str = "") -> Tensor: ...
@raw_collective(src="V", dst="R", input="self", output=None, mutates=False, differentiable=True)
def all_gather_tensor_autograd(self: Tensor, gather_dim: int, group: Any, tag: str = "") -> Tensor: ...
@raw_collective(src="P", dst="V", input="self", output=None, mutates=False, differentiable=True)
def reduce_scatter_single(self: Tensor, reduceOp: str, scatter_dim: int, group: Any, tag: str = "") -> Tensor: ...
@raw_collective(src="P", dst="V", input="self", output=None, mutates=False, differentiable=True)
def reduce_scatter_single_autograd(
    self: Tensor, reduceOp: str, scatter_dim: int, group: Any, tag: str = ""
) -> Tensor: ...
@raw_collective(src="P", dst="V", input="self", output=None, mutates=False, differentiable=True)
def reduce_scatter_tensor(self: Tensor, reduceOp: str, scatter_dim: int, group: Any, tag: str = "") -> Tensor: ...
@raw_collective(src="P", dst="V", input="self", output=None, mutates=False, differentiable=True)
def reduce_scatter_tensor_autograd(
    self: Tensor, reduceOp: str, scatter_dim: int, group: Any, tag: str = ""
) -> Tensor: ...
@raw_collective(src="V", dst="V", input="self", output=None, mutates=False, differentiable=True)
def all_to_all_single(
    self: Tensor, output_split_sizes: list[int] | None, input_split_sizes: list[int] | None, group: Any, tag: str = ""
) -> Tensor: ...
@raw_collective(src="V", dst="V", input="self", output=None, mutates=False, differentiable=True)
def all_to_all_single_autograd(
    self: Tensor, output_split_sizes: list[int] | None, input_split_sizes: list[int] | None, group: Any, tag: str = ""
) -> Tensor: ...

# No autograd formula is registered for `_c10d_functional::broadcast`.
@raw_collective(src="*", dst="R", input="self", output=None, mutates=False)
def broadcast(self: Tensor, src: int, group: Any, tag: str = "") -> Tensor: ...

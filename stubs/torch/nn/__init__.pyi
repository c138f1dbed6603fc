"""spmdcheck rules for `torch.nn` (read with libcst, never imported; docs/stubs.md)."""

from typing import Any

from torch import Tensor

from spmdcheck.annotations import container, grad, linear, sequential

from . import functional as functional

# `nn.Parameter(t)` wraps `t` without changing its value: linear, and it
# receives gradients; it is a leaf of the autograd graph (no upstream history).
# Written as a function so that the call is typed.
@linear
@grad("leaf")
def Parameter(data: Tensor, requires_grad: bool = True) -> Tensor: ...

# Containers of modules: what is inside them is what the analysis follows. Written as functions so
# that the call is typed.
@container("modules")
def ModuleList(modules: Any = None) -> Any: ...
@sequential("args")
def Sequential(*args: Any) -> Any: ...

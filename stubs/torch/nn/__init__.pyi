"""spmdcheck rules for `torch.nn` (read with libcst, never imported; docs/stubs.md)."""

from typing import Any

from torch import Tensor

from spmdcheck.annotations import container, grad, linear, sequential, untyped_is_unknown

from . import functional as functional

# `nn.Parameter(t)` wraps `t` without changing its value: linear, and it
# receives gradients; it is a leaf of the autograd graph (no upstream history).
# Made of untyped data (`torch.empty(...)`), its layout is the one the module's
# parallelization gives it later (a contract, an assert): unknown until then.
# Written as a function so that the call is typed.
@linear
@grad("leaf")
@untyped_is_unknown
def Parameter(data: Tensor, requires_grad: bool = True) -> Tensor: ...

# Containers of modules: what is inside them is what the analysis follows. Written as functions so
# that the call is typed.
@container("modules")
def ModuleList(modules: Any = None) -> Any: ...
@container("modules")
def ModuleDict(modules: Any = None) -> Any: ...
# ... and of parameters: `nn.ParameterDict({"w": p})["w"]` is `p`.
@container("values")
def ParameterList(values: Any = None) -> Any: ...
@container("parameters")
def ParameterDict(parameters: Any = None) -> Any: ...
@sequential("args")
def Sequential(*args: Any) -> Any: ...

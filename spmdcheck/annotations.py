"""What users import to write spmdcheck annotations, and the vocabulary of stub files.

This module is deliberately tiny and dependency-free (no torch, no libcst): it
is imported by user code at run time, where every name here is a no-op.
spmdcheck never imports it while checking; it reads the *spelling* of these
names in source and stub files.

A tensor's local SPMD type in a signature, spelled so that mypy, pyright and
ruff accept it unchanged::

    from typing import Annotated

    from torch import Tensor

    from spmdcheck.annotations import Local

    def row_parallel(
        h: Annotated[Tensor, Local("tp: S(1)")], w: Annotated[Tensor, Local("tp: S(1), dp: R")]
    ) -> Annotated[Tensor, Local("tp: I")]:
        ...

The spec string lists ``axis: TYPE`` pairs separated by commas, ``TYPE`` one
of R, I, V, P, S(d) (or the long names Replicate, Invariant, Varying,
Partial, Shard(d)). ``Annotated[Tensor, {"tp": V}]`` (a dict, as in
``spmd_types.assert_type``) and ``Annotated[Tensor, "tp: V"]`` mean the same.
The older short spelling ``Local["tp: V"]`` (``Annotated[Any, "tp: V"]`` at
run time) is still read, but other type checkers reject it: a string inside
a subscript is a forward reference to them.

``reveal_spmd_type(x)`` asks spmdcheck to report, at its line, what it
inferred for ``x`` on every mesh axis and what its gradient will be.

Stub vocabulary: the decorators below are how ``stubs/**/*.pyi`` (and users'
own stub directories) describe the SPMD rule of a function. Each decorator
takes only literals; spmdcheck reads them statically. See docs/stubs.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

__all__ = [
    "Local",
    "reveal_spmd_type",
    "linear",
    "multilinear",
    "nonlinear",
    "divisor",
    "contraction",
    "affine",
    "factory",
    "passthrough",
    "opaque",
    "rank_dependent",
    "rank_of",
    "shape_of",
    "untyped_is_unknown",
    "parallel_loss",
    "grad",
    "dims",
    "inplace",
    "collective",
    "conversion",
    "raw_collective",
    "maps_to",
    "process_group",
    "mesh_factory",
    "mesh_group",
    "dtensor_api",
    "spmd_api",
    "context",
    "group_members",
    "container",
    "sequential",
    "model",
    "constant_test",
    "is_known",
    "unknown",
    "LocalType",
    "LocalSpec",
]

_F = TypeVar("_F", bound=Callable[..., Any])


class LocalSpec:
    """What ``Local("tp: V")`` evaluates to: the spec string, kept as ``Annotated`` metadata."""

    __slots__ = ("spec",)

    def __init__(self, spec: str) -> None:
        self.spec = spec

    def __repr__(self) -> str:
        return f"Local({self.spec!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalSpec) and other.spec == self.spec

    def __hash__(self) -> int:
        return hash(("spmdcheck.Local", self.spec))


class _LocalSpelling:
    """``Local("tp: V")`` is ``Annotated`` metadata; the older ``Local["tp: V"]`` is ``Annotated[Any, "tp: V"]``.

    ``Annotated[Tensor, Local("tp: V")]`` is the spelling mypy, pyright and ruff accept: a call in
    ``Annotated`` metadata is a value, where a string inside a subscript is read as a forward reference.
    """

    def __call__(self, spec: str) -> LocalSpec:
        return LocalSpec(spec)

    def __getitem__(self, spec: str) -> Any:
        return Annotated[Any, spec]


Local = _LocalSpelling()


class _LocalTypeSpelling:
    """``LocalType["R"]``: the annotation of a type constant in a stub."""

    def __getitem__(self, name: str) -> Any:
        return Annotated[Any, name]


LocalType = _LocalTypeSpelling()


_T = TypeVar("_T")


def reveal_spmd_type(value: _T) -> _T:
    """Ask spmdcheck for the inferred SPMD type of `value` (and its gradient's) at this line.

    spmdcheck reports it as a note (SPMD901), like mypy's ``reveal_type``.
    At run time this returns `value` unchanged and does nothing else.
    """
    return value


def _identity(fn: _F) -> _F:
    return fn


def _factory(*_args: Any, **_kwargs: Any) -> Callable[[_F], _F]:
    return _identity


# Linearity classes of an op (reference type_system.md section 2.1).
linear = _identity
multilinear = _identity
nonlinear = _identity
passthrough = _identity
opaque = _identity


def rank_dependent(*args: Any, **_kwargs: Any) -> Any:
    """`@rank_dependent` or `@rank_dependent(axis="tp")` / `(group="group")`: a no-op at run time."""
    if len(args) == 1 and callable(args[0]) and not _kwargs:
        return args[0]
    return _identity


rank_of = _identity
shape_of = _identity
untyped_is_unknown = _identity
parallel_loss = _identity

# Parametrised stub decorators: all are no-ops at run time.
divisor = _factory
contraction = _factory
affine = _factory
factory = _factory
grad = _factory
dims = _factory
inplace = _factory
collective = _factory
conversion = _factory
raw_collective = _factory
maps_to = _factory
process_group = _factory
group_size = _factory  # returns the size of the group of one mesh axis: a number (dividing by it averages)
group_members = _factory
# A class or function whose body is a model of a library's behaviour, interpreted by spmdcheck like
# checked code (Megatron's ColumnParallelLinear: which collectives its forward runs, for which keywords).
model = _identity
container = _factory  # returns the sequence of modules it is given (nn.ModuleList)
sequential = _factory  # calling the result applies its modules in order (nn.Sequential)
constant_test = _identity  # the call answers whether its argument is a constant the checker knows
mesh_factory = _factory
mesh_group = _factory
spmd_api = _factory
dtensor_api = _factory  # a DTensor API with its own handler (`from_local`, `to_local`, `placement`, ...)
context = _factory
# The call returns this constant in the configuration spmdcheck checks (`get_spmd_backend()` is "spmd_types"):
# a branch on it is judged even in a function checked on its own.
assume_returns = _factory
# On a class: what `isinstance(t, cls)` is for a tensor spmdcheck types, a local tensor (DTensor: False).
instance_test = _factory
# On a class: its objects are a per-axis SPMD type (`layout(types="axis_types", partition_spec=...)`).
layout = _factory
# On a class: its objects declare a module's sharding contract; the keywords name its fields.
module_contract = _factory


def is_known(value: Any) -> bool:
    """In a @model body: whether the checker knows `value` as a constant (a keyword it can read).

    At run time it is always True: models are never run, but a model file must stay importable.
    """
    return True


def unknown() -> Any:
    """In a @model body: a value the checker does not know (what a layer returns for keywords it cannot read)."""
    return None

"""Abstract values the interpreter tracks for Python expressions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from spmdcheck.lattice import AxisType, GradState, SpmdType


class Value:
    """Base class. Anything the analysis cannot model is UNKNOWN."""


@dataclass(frozen=True)
class Unknown(Value):
    pass


UNKNOWN = Unknown()


@dataclass(frozen=True)
class Literal(Value):
    """A Python constant: number, str, bool, None, Ellipsis."""

    value: Any


NONE = Literal(None)


@dataclass(frozen=True)
class PyNumber(Value):
    """A Python number whose value is not known statically (x.size(0), dist.get_world_size())."""


NUMBER = PyNumber()


@dataclass(frozen=True)
class RankValue(Value):
    """A Python value that differs across ranks (dist.get_rank(), and anything computed from it)."""


RANK = RankValue()


@dataclass(frozen=True)
class TensorValue(Value):
    type: SpmdType = field(default_factory=SpmdType)  # only the axes we know
    grad: GradState = GradState.UNKNOWN
    rank: int | None = None
    # True: a tensor whose type could not be known (it met a value we cannot model, or an op that failed).
    # It behaves like an unknown value: never an error, and what it touches becomes opaque too. False with
    # no axes: a tensor known to carry no type (randn, no_typecheck results), which strict mode reports.
    opaque: bool = False
    # A lower bound on the rank when the rank is unknown (a matmul/linear output is at least a matrix):
    # enough to tell S(-1) from S(0). Provenance, like reduced_at: not part of equality.
    min_rank: int = field(default=0, compare=False, hash=False)
    # (axis, site) of the reduction that made this value R/I there: named when it is reduced again.
    # Provenance only: it does not take part in equality, so it never splits a join.
    reduced_at: tuple[tuple[str, int], ...] = field(default=(), compare=False, hash=False)
    # A leaf of the autograd graph (a factory's result, an nn.Parameter): it has no upstream history, so
    # a raw collective writing into it (a receive buffer) cuts nothing. Provenance: not part of equality.
    leaf: bool = field(default=False, compare=False, hash=False)

    @property
    def typed(self) -> bool:
        return len(self.type) > 0


@dataclass(frozen=True)
class Branch:
    """Which way an `if` went, to name it in messages."""

    ref: int  # site reference of the If node
    arm: str  # "if" or "else"


@dataclass(frozen=True)
class Alternatives(Value):
    """A variable whose type depends on an earlier branch: each option with its path."""

    options: tuple[tuple[TensorValue, tuple[Branch, ...]], ...]


@dataclass(frozen=True)
class ScalarValue(Value):
    """spmd_types.Scalar(v, {axis: T}): a rank-dependent number with a type."""

    type: SpmdType


@dataclass(frozen=True)
class TypeValue(Value):
    """A type constant R/I/V/P or S(d)."""

    type: AxisType


@dataclass(frozen=True)
class Seq(Value):
    """A tuple or list with known items."""

    items: tuple[Value, ...]
    is_list: bool = False


@dataclass(frozen=True)
class Homogeneous(Value):
    """A sequence of unknown length whose items share one value (split, chunk)."""

    item: Value


@dataclass(frozen=True)
class DictValue(Value):
    items: tuple[tuple[Value, Value, cst.CSTNode], ...]  # key, value, key node


@dataclass(frozen=True)
class EnumClass(Value):
    """A class of the file whose members are string constants (`class MeshAxisName(StrEnum): DP = "dp"`)."""

    name: str
    members: tuple[tuple[str, str], ...]

    def member(self, attr: str) -> Value:
        return next((Literal(v) for k, v in self.members if k == attr), UNKNOWN)


@dataclass(frozen=True)
class ModuleRef(Value):
    """A name bound to a module or a module attribute: its qualified name."""

    qualname: str


@dataclass(frozen=True)
class GroupValue(Value):
    """A process group: the mesh axis it spans."""

    axis: str


@dataclass(frozen=True)
class MeshValue(Value):
    axes: tuple[str, ...]


@dataclass(frozen=True)
class BoundMethod(Value):
    receiver: Value
    qualname: str


@dataclass(frozen=True)
class FunctionValue(Value):
    """A function defined in the file being checked."""

    node: cst.FunctionDef
    qualname: str


@dataclass(frozen=True)
class ContextValue(Value):
    """The result of calling a context-manager rule (torch.no_grad(), set_current_mesh(m))."""

    kind: str
    payload: Value = UNKNOWN


def join(a: Value, b: Value, branch_ref: int | None = None) -> Value:
    """Values of one variable after the two arms of an `if`."""
    if a == b:
        return a
    if branch_ref is not None and _tensorish(a) and _tensorish(b):
        opts = _options(a, Branch(branch_ref, "if")) + _options(b, Branch(branch_ref, "else"))
        merged: list[tuple[TensorValue, tuple[Branch, ...]]] = []
        for t, path in opts:
            if not any(t == m for m, _ in merged):
                merged.append((t, path))
        if len(merged) == 1:
            return merged[0][0]
        if len(merged) <= MAX_ALTERNATIVES:
            return Alternatives(tuple(merged))
        return _widen([t for t, _ in merged])
    if isinstance(a, Seq) and isinstance(b, Seq) and len(a.items) == len(b.items):
        return Seq(tuple(join(x, y, branch_ref) for x, y in zip(a.items, b.items)), a.is_list)
    return UNKNOWN


MAX_ALTERNATIVES = 4


def _tensorish(v: Value) -> bool:
    return isinstance(v, (TensorValue, Alternatives))


def _options(v: Value, branch: Branch) -> tuple[tuple[TensorValue, tuple[Branch, ...]], ...]:
    if isinstance(v, TensorValue):
        return ((v, (branch,)),)
    assert isinstance(v, Alternatives)
    return tuple((t, (branch, *path)) for t, path in v.options)


def _widen(values: list[TensorValue]) -> TensorValue:
    """Too many alternatives: keep only what all agree on."""
    first = values[0]
    axes = {a: t for a, t in first.type.items() if all(v.type.get(a) == t for v in values)}
    grads = {v.grad for v in values}
    ranks = {v.rank for v in values}
    return TensorValue(
        SpmdType(axes),
        grads.pop() if len(grads) == 1 else GradState.UNKNOWN,
        ranks.pop() if len(ranks) == 1 else None,
    )

"""The local SPMD type lattice: per-axis types, tensor types and per-axis inference.

Pure: no libcst, no I/O. Reference: shared/reference/type_system.md section 2.1
(inference), 2.3 (no-grad relaxation), 5.3 (fix-suggestion search).

Per mesh axis a tensor is one of R (replicate), I (invariant), V (varying) or
P (partial: a pending sum). V may carry two refinements that spmd_types does
not track in local mode:

* ``shard``: the tensor dim along which the global tensor is the
  concatenation of the local blocks (S(d));
* ``pending``: the site of a contraction over a sharded label whose result is
  a per-rank partial sum (``Vp``, einsum_rules.md section 4.1). Its primary
  type stays V; the shadow rules of :func:`shadow_partial_check` report a
  misuse as a warning.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace


class Kind(enum.Enum):
    R = "R"
    I = "I"  # noqa: E741 - the type system's own name
    V = "V"
    P = "P"

    def __str__(self) -> str:
        return self.value


R, I, V, P = Kind.R, Kind.I, Kind.V, Kind.P  # noqa: E741

LONG_NAMES = {R: "Replicate", I: "Invariant", V: "Varying", P: "Partial"}


class Linearity(enum.Enum):
    NONLINEAR = "nonlinear"
    LINEAR = "linear"
    MULTILINEAR = "multilinear"


class GradState(enum.Enum):
    """Whether a tensor may receive a gradient (tri-state, for section 2.3)."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"

    @staticmethod
    def join(states: Iterable[GradState]) -> GradState:
        states = list(states)
        if any(s is GradState.YES for s in states):
            return GradState.YES
        if all(s is GradState.NO for s in states):
            return GradState.NO
        return GradState.UNKNOWN


@dataclass(frozen=True)
class Site:
    """Where something happened in source: an opaque reference the caller resolves."""

    ref: int
    what: str = ""


@dataclass(frozen=True)
class AxisType:
    kind: Kind
    shard: int | None = None  # only with V: S(shard)
    pending: Site | None = None  # only with V: a pending sum from this contraction
    # only with V and no shard: S(d) for a dim the checker could not compute (`S(x.dim() - 1)` on a tensor
    # of unknown rank): the value is sharded, on an unknown dim.
    some_dim: bool = False

    def __post_init__(self) -> None:
        if self.kind is not V and (self.shard is not None or self.pending is not None or self.some_dim):
            raise ValueError("only V carries a shard dim or a pending sum")
        if self.some_dim and self.shard is not None:
            raise ValueError("a shard dim is either known or unknown")

    def __str__(self) -> str:
        if self.kind is V and self.shard is not None:
            return f"S({self.shard})"
        if self.some_dim:
            return "S(?)"
        return self.kind.value

    @property
    def is_shard(self) -> bool:
        """S(d), with d known or not."""
        return self.shard is not None or self.some_dim

    @property
    def is_pending(self) -> bool:
        return self.pending is not None

    def plain(self) -> AxisType:
        return AxisType(self.kind)


def S(dim: int) -> AxisType:  # noqa: N802 - mirrors spmd_types.S
    return AxisType(V, shard=dim)


S_UNKNOWN_DIM = AxisType(V, some_dim=True)  # S(d) with d not computable statically


AR, AI, AV, AP = AxisType(R), AxisType(I), AxisType(V), AxisType(P)


def backward_kind(kind: Kind) -> Kind:
    """The gradient's type: R <-> P, I and V fixed."""
    return {R: P, P: R, I: I, V: V}[kind]


def gradient_axis_type(t: AxisType) -> AxisType:
    """What the backward pass carries on one axis for a value of type `t` (type_system.md 1.2, 3.6).

    The duality R <-> P, I <-> I, V <-> V: a replicated value's gradient is a
    per-rank partial sum (summed where the value became R: `convert(I, R)`'s
    backward all-reduces it), a partial value's gradient is the same on every
    rank, and an invariant or varying value's gradient has its own type. The
    gradient of an S(d) value is sharded on the same dim. A pending sum (Vp)
    is V in the local view, so its gradient is plain V.
    """
    if t.kind is V:
        return AxisType(V, shard=t.shard)
    return AxisType(backward_kind(t.kind))


def gradient_type(t: SpmdType) -> SpmdType:
    """The gradient's local type on every axis the value is typed on."""
    return SpmdType({axis: gradient_axis_type(axis_type) for axis, axis_type in t.items()})


class SpmdType(Mapping[str, AxisType]):
    """A tensor's local type: mesh axis name -> per-axis type. Immutable."""

    __slots__ = ("_axes", "_hash")

    def __init__(self, axes: Mapping[str, AxisType] | Iterable[tuple[str, AxisType]] = ()) -> None:
        self._axes: dict[str, AxisType] = dict(sorted(dict(axes).items()))
        self._hash: int | None = None

    def __getitem__(self, axis: str) -> AxisType:
        return self._axes[axis]

    def __iter__(self) -> Iterator[str]:
        return iter(self._axes)

    def __len__(self) -> int:
        return len(self._axes)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self._axes.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SpmdType):
            return self._axes == other._axes
        return NotImplemented

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{a}: {t}" for a, t in self._axes.items()) + "}"

    def with_axis(self, axis: str, t: AxisType) -> SpmdType:
        axes = dict(self._axes)
        axes[axis] = t
        return SpmdType(axes)

    def without_refinements(self) -> SpmdType:
        return SpmdType({a: t.plain() for a, t in self._axes.items()})


SCALAR = "scalar"  # the weak Python-number marker in an operand list


@dataclass(frozen=True)
class Operand:
    """One operand's view on one axis: a type (or the scalar marker), and grad-ness."""

    kind: Kind | str  # Kind, or SCALAR
    grad: GradState = GradState.UNKNOWN
    divisor: bool = False  # sits in a position where a P is an error of its own


class Rule(enum.Enum):
    """Which per-axis rule failed (type_system.md 5.2 headlines)."""

    INVARIANT_MIX = "invariant-mix"
    PARTIAL_WITH_VARYING = "partial-with-varying"
    PARTIAL_NONLINEAR = "partial-nonlinear"
    PARTIAL_AFFINE = "partial-affine"
    PARTIAL_SEVERAL_FACTORS = "partial-several-factors"
    PARTIAL_DIVISOR = "partial-divisor"


@dataclass(frozen=True)
class AxisError:
    rule: Rule
    found: tuple[str, ...]  # the operand kinds as printed, in operand order


def _relax_no_grad(ops: Sequence[Operand]) -> list[Kind | str]:
    """Section 2.3: an R/I operand that cannot receive a gradient may be read as the other."""
    kinds = [o.kind for o in ops]
    if I not in kinds or all(k in (I, SCALAR) for k in kinds):
        return kinds
    gradded = {o.kind for o in ops if o.kind in (R, I) and o.grad is not GradState.NO}
    if len(gradded) > 1:
        return kinds
    target = I if gradded == {I} else R
    return [target if (o.kind in (R, I) and o.grad is GradState.NO) else o.kind for o in ops]


def infer_axis(ops: Sequence[Operand], linearity: Linearity, relax: bool = True) -> Kind | AxisError:
    """The per-axis inference of type_system.md section 2.1. Scalars are weak."""
    found = tuple(str(o.kind) if o.kind != SCALAR else "Scalar" for o in ops)
    if any(o.divisor and o.kind is P for o in ops):
        return AxisError(Rule.PARTIAL_DIVISOR, found)
    kinds = _relax_no_grad(ops) if relax else [o.kind for o in ops]
    present = set(kinds)
    if present <= {R, SCALAR}:
        return R
    if present <= {I, SCALAR}:
        return I
    if present <= {R, V, SCALAR}:
        return V
    if I in present:
        return AxisError(Rule.INVARIANT_MIX, found)
    if P in present:
        if V in present:
            return AxisError(Rule.PARTIAL_WITH_VARYING, found)
        if linearity is Linearity.NONLINEAR:
            return AxisError(Rule.PARTIAL_NONLINEAR, found)
        if linearity is Linearity.LINEAR:
            if R in present or SCALAR in present:
                return AxisError(Rule.PARTIAL_AFFINE, found)
            return P
        if sum(1 for k in kinds if k is P) > 1:
            return AxisError(Rule.PARTIAL_SEVERAL_FACTORS, found)
        return P
    raise AssertionError(f"unreachable operand kinds {kinds}")  # pragma: no cover


@dataclass(frozen=True)
class FixCandidate:
    """A conversion the suggestion engine may offer (type_system.md 5.3)."""

    src: Kind
    dst: Kind
    api: str  # "convert" or "all_reduce"
    forward: str
    backward: str


FIX_CANDIDATES: tuple[FixCandidate, ...] = (
    FixCandidate(I, R, "convert", "no-op", "all-reduce"),
    FixCandidate(I, P, "convert", "zero on non-rank-0", "no-op"),
    FixCandidate(P, R, "all_reduce", "all-reduce", "all-reduce"),
    FixCandidate(P, I, "all_reduce", "all-reduce", "no-op"),
    FixCandidate(R, P, "convert", "zero on non-rank-0", "zero on non-rank-0"),
)


@dataclass(frozen=True)
class Fix:
    operand: int  # index into the operand list
    candidate: FixCandidate


def suggest_fixes(ops: Sequence[Operand], linearity: Linearity) -> list[Fix]:
    """Candidate conversions that repair a failing axis, in spmd_types' order and filter.

    A candidate applies to the first operand whose kind equals its source. It
    is kept if the op then infers (strict R/I, no relaxation) and, when the
    other operands alone infer, the repaired result equals theirs.
    """
    fixes: list[Fix] = []
    for cand in FIX_CANDIDATES:
        idx = next((i for i, o in enumerate(ops) if o.kind is cand.src), None)
        if idx is None:
            continue
        repaired = list(ops)
        repaired[idx] = replace(ops[idx], kind=cand.dst)
        result = infer_axis(repaired, linearity, relax=False)
        if isinstance(result, AxisError):
            continue
        others = [o for i, o in enumerate(ops) if i != idx and o.kind != SCALAR]
        if others:
            natural = infer_axis(others, linearity, relax=False)
            if not isinstance(natural, AxisError) and natural is not result:
                continue
        fixes.append(Fix(idx, cand))
    return fixes


def shadow_partial_check(ops: Sequence[Operand], pending: Sequence[bool], linearity: Linearity) -> Kind | AxisError:
    """Apply the P rules to operands that hold a pending sum (Vp read as P).

    Returns P when the pending sum legitimately survives the op, V when no
    operand is pending, or the AxisError a Partial would have raised.
    """
    if not any(pending):
        return V
    shadow = [replace(o, kind=P) if p else o for o, p in zip(ops, pending)]
    return infer_axis(shadow, linearity, relax=True)

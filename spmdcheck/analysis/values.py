"""Abstract values the interpreter tracks for Python expressions."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
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


class CarriesTypes(Value):
    """Base of values defined in their own module that hold SPMD information a callee could misuse (a
    DTensor: analysis/dtensor/): `carries_types` is true of them, so a call given one is checked with it."""


@dataclass(frozen=True)
class Literal(Value):
    """A Python constant: number, str, bool, None, Ellipsis."""

    value: Any


NONE = Literal(None)


@dataclass(frozen=True)
class Assumed(Literal):
    """A constant the checker assumes because a stub declares it: the configuration it checks under
    (`get_spmd_backend()` is "spmd_types", `is_type_checking()` is True, a local tensor is no DTensor).
    Unlike a module constant, it picks its branch even in a function checked on its own."""


@dataclass(frozen=True)
class PyNumber(Value):
    """A Python number whose value is not known statically (x.size(0), dist.get_world_size())."""


NUMBER = PyNumber()


@dataclass(frozen=True)
class DimSize(PyNumber):
    """`x.shape[i]`, `x.size(i)`: the size of dim `index` of one tensor value (a view whose sizes are its own
    input's, the same object, keeps those dims and their shards). A number like any other elsewhere; equal to
    another by content, so memoised calls and loops settle as they did with plain numbers."""

    tensor: TensorValue | None = None
    index: int = 0
    rank: int | None = None  # the tensor's rank, when the sizes were unpacked (`b, s, d = x.shape`: 3)


@dataclass(frozen=True)
class ShapeValue(Value):
    """`x.shape`, `x.size()`: the sizes of one tensor value's dims (indexed, sliced or unpacked: DimSizes)."""

    tensor: TensorValue

    def slice(self, lower: int | None, upper: int | None) -> Value:
        """`x.shape[lower:upper]` with constant bounds: the dims it names, when they can be counted."""
        rank = self.tensor.rank
        if rank is not None:
            return Seq(tuple(DimSize(self.tensor, i) for i in range(rank)[lower:upper]))
        if (lower is None or lower >= 0) and upper is not None and upper >= 0:
            return Seq(tuple(DimSize(self.tensor, i) for i in range(lower or 0, upper)))
        if lower is not None and lower < 0 and upper is None:
            return Seq(tuple(DimSize(self.tensor, i) for i in range(lower, 0)))
        return UNKNOWN


# The axis of a collective over a process group the checker cannot name (`dist.new_group(ranks)`): no rank
# condition is known to split it, so a condition around it is never reported.
UNNAMED_GROUP = "<unnamed group>"


@dataclass(frozen=True)
class RankValue(Value):
    """A Python value that differs across ranks (dist.get_rank(), and anything computed from it).

    `varies`: the mesh axes along which it differs (None: along every axis, like the global rank).
    `invariant`: axes along which it is known to be the same (`rank in ranks_of(group)` is the same
    on every member of the group). A collective on axis `a` under a condition on this value runs on
    only some ranks of its group when `diverges_along(a)`.
    """

    varies: frozenset[str] | None = None
    invariant: frozenset[str] = frozenset()

    @property
    def unknown_relation(self) -> bool:
        """A rank condition whose relation to any group is unknown (membership in a list): never divergent."""
        return self.varies == frozenset() and not self.invariant

    def diverges_along(self, axis: str | None) -> bool:
        if axis == UNNAMED_GROUP or (axis is not None and axis in self.invariant):
            return False
        if self.varies is None:
            return axis is not None or not self.invariant
        return axis is not None and axis in self.varies

    def combine(self, other: Value) -> RankValue:
        """A value computed from this one and `other` (arithmetic, comparison, and/or)."""
        if not isinstance(other, RankValue):
            return self
        if self.unknown_relation or other.unknown_relation:
            return RankValue(frozenset())  # `rank in some_ranks and ...`: the relation to groups stays unknown
        varies = None if self.varies is None or other.varies is None else self.varies | other.varies
        return RankValue(varies, self.invariant & other.invariant)


RANK = RankValue()


@dataclass(frozen=True)
class MembersValue(Value):
    """The ranks of a group (`dist.get_process_group_ranks(g)`): membership is the same on all of them."""

    axis: str | None


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
    # (axis, site, api, fixed grad placements) of the DTensor boundary (`to_local()`, `full_tensor()`) that made
    # this value Invariant on `axis` (a Replicate placement with a Replicate gradient placement): named, with
    # the DTensor spelling of the fix, when it is mixed (analysis/dtensor/). Provenance: not part of equality.
    boundary: tuple[tuple[str, int, str, str], ...] = field(default=(), compare=False, hash=False)

    @property
    def typed(self) -> bool:
        return len(self.type) > 0


@dataclass(frozen=True)
class Branch:
    """Which way an `if` went, to name it in messages."""

    ref: int  # site reference of the If node
    arm: str  # "if" or "else"
    # (what the condition tests, its truth on this arm): two arms of one condition (the same flag tested by
    # two `if`s) are never on one path (interp/branches.py `condition_key`). Not part of equality: it
    # only prunes combinations, the message names the `if` by `ref`.
    condition: tuple[object, bool] | None = field(default=None, compare=False, hash=False)


def consistent(path: tuple[Branch, ...], taken: Sequence[tuple[object, bool]] = ()) -> bool:
    """Whether one run can take every branch of `path` (inside the `if` arms `taken`): no condition is both
    true and false on it."""
    truth: dict[object, bool] = dict(taken)
    for branch in path:
        if branch.condition is not None:
            key, value = branch.condition
            if truth.setdefault(key, value) != value:
                return False
    return True


def _add_option(merged: list[tuple[TensorValue, tuple[Branch, ...]]], t: TensorValue, path: tuple[Branch, ...]) -> None:
    """Keep one option per value; a value several paths give keeps only the conditions they share."""
    for i, (m, kept) in enumerate(merged):
        if t == m:
            if kept != path or any(a.condition != b.condition for a, b in zip(kept, path)):
                shared = {b.condition for b in path}
                merged[i] = (m, tuple(b if b.condition in shared else Branch(b.ref, b.arm) for b in kept))
            return
    merged.append((t, path))


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
class Chain(Value):
    """Modules applied in order when called (`nn.Sequential(a, b)(x)` is `b(a(x))`)."""

    items: tuple[Value, ...]


@dataclass(frozen=True)
class Homogeneous(Value):
    """A sequence of unknown length whose items share one value (split, chunk)."""

    item: Value


@dataclass(frozen=True)
class Pieces(Homogeneous):
    """The pieces a tensor is cut into along one of its dims (`x.chunk(n, dim)`, `x.split(size, dim)`,
    `x.unbind(dim)`): items of one type but different values, so the piece at a rank index differs across
    the ranks of that index's axis (analysis/subscripts.py). `dim`: the dim cut (None: not a constant);
    `count`: the number of pieces asked for (None: not given as a count)."""

    dim: int | None = None
    count: Value | None = None


@dataclass(frozen=True)
class AxisSize(PyNumber):
    """The number of ranks along one mesh axis (`mesh["tp"].size()`): a number like any other elsewhere;
    `x.chunk(mesh["tp"].size(), dim)[mesh["tp"].get_local_rank()]` is then this rank's S(dim) block."""

    axis: str = ""


@dataclass(frozen=True)
class DictValue(Value):
    items: tuple[tuple[Value, Value, cst.CSTNode], ...]  # key, value, key node


@dataclass(frozen=True)
class LocalMapValue(Value):
    """`spmd.local_map(in_types=..., out_types=...)`, then that applied to a function: a typed boundary."""

    in_types: Value
    out_types: Value
    applied: bool = False  # True once it wraps a function: the next call runs the boundary


@dataclass(frozen=True)
class LayoutValue(Value):
    """A per-axis SPMD type built by a @layout class (`SpmdLayout({DP: R, TP: S(0)})`): its type parts."""

    parts: tuple[Value, ...]  # an axis -> type dict, and a PartitionSpec read as {axis: S(i)}
    node: Any = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class LayoutChoice(Value):
    """One of several layouts, chosen by a condition the checker cannot decide
    (`dense_sequence_parallel_placement() if output_sp else dense_activation_placement(tp=I)`)."""

    options: tuple[LayoutValue, ...]


@dataclass(frozen=True)
class ContractValue(Value):
    """A @module_contract object (`ShardingConfig(...)`): its fields by role, where it is written."""

    rule: Any  # the ContractRule
    fields: tuple[tuple[str, Value, Any], ...]  # (role, value, node of the argument)
    node: Any = field(default=None, compare=False, hash=False)

    def get(self, role: str) -> tuple[Value, Any] | None:
        return next(((v, n) for r, v, n in self.fields if r == role), None)


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
    """A function defined in a checked file."""

    node: cst.FunctionDef
    qualname: str
    scope: Any = field(default=None, compare=False, hash=False)  # the Scope it was defined in
    owner: Any = field(default=None, compare=False, hash=False)  # the ClassValue of a method
    # a function defined in another: the enclosing function's names as they were when its `def` ran (a
    # decorators.Closure); part of its calls' memo key, not of equality
    closure: Any = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class PendingImport(Value):
    """`name` imported at a module's top level from a checked module whose top level has not run, in a
    selective run (incremental.py): the module runs when the name is first read, and gives the same value
    it would have given then (its top level reads no module that is still running: not an import cycle)."""

    module: str
    name: str


@dataclass(frozen=True)
class LazyImport(Value):
    """`name` imported from a library module of the program, not loaded yet."""

    module: str
    name: str


@dataclass(frozen=True)
class ModuleValue(Value):
    """A checked module of the program (its top-level names are known)."""

    name: str


@dataclass(eq=False)
class ClassValue(Value):
    """A class defined in a checked file. Identity is the class: two evaluations are one class."""

    name: str
    node: cst.ClassDef
    scope: Any
    bases: tuple[Value, ...]
    namespace: dict[str, Value]
    declared: dict[str, Any]  # attribute -> declared SPMD axes (class-level annotations)
    outer: Any = None  # the class whose body defines this one (a module's nested `Config`)
    # the mro, made once for these bases: every attribute lookup and `super()` reads it, and made again
    # each time it cost a hierarchy n deep n^3 (a 300-deep chain of `super().forward` ran for minutes)
    _mro: tuple[tuple[Value, ...], list[ClassValue]] | None = field(default=None, init=False, repr=False)

    def mro(self) -> list[ClassValue]:
        memo = self._mro
        if memo is None or memo[0] is not self.bases:
            out, seen = [self], {id(self)}
            for base in self.bases:
                if isinstance(base, ClassValue):
                    for cls in base.mro():
                        if id(cls) not in seen:
                            seen.add(id(cls))
                            out.append(cls)
            self._mro = memo = (self.bases, out)
        return list(memo[1])

    def lookup(self, name: str, after: ClassValue | None = None) -> Value | None:
        chain = self.mro()
        if after is not None and after in chain:
            chain = chain[chain.index(after) + 1 :]
        for cls in chain:
            if name in cls.namespace:
                return cls.namespace[name]
        return None

    def declared_type(self, name: str) -> Any:
        for cls in self.mro():
            if name in cls.declared:
                return cls.declared[name]
        return None


class _Generation(threading.local):
    """Which check of a program is running: -1 - i while the top level of the program's i-th file runs, then
    one positive number per function checked on its own. An object records the check that made it: one made
    before the running check is shared with other checks, and what that check writes to it is undone when
    it ends (interp/modules.py `check_functions`); 0 marks an object a memoised summary or a built module
    keeps. One per thread: analyses may run side by side."""

    current = 0


Generation = _Generation()
_made = itertools.count(1)


def made_mark() -> int:
    """A number below that of every object made after this call (`InstanceValue.made`)."""
    return next(_made)


@dataclass(eq=False)
class InstanceValue(Value):
    """An object of a checked class: its attributes as the analysis has seen them assigned."""

    cls: ClassValue
    attrs: dict[str, Value] = field(default_factory=dict)
    born: int = field(default_factory=lambda: Generation.current, repr=False)
    made: int = field(default_factory=lambda: next(_made), repr=False)  # objects made later have larger numbers

    def snapshot(self) -> tuple:
        """The object's state as a memo key: its class and attributes (copies of one object share it)."""
        return (id(self.cls), tuple(sorted(self.attrs.items(), key=lambda kv: kv[0])))


def library_base(cls: ClassValue) -> str | None:
    """The torch class a program class derives from (through the program's own classes), if any."""
    for klass in cls.mro():
        for base in klass.bases:
            if isinstance(base, ModuleRef) and base.qualname.startswith("torch"):
                return base.qualname
            if isinstance(base, LazyImport) and base.module.startswith("torch"):
                return f"{base.module}.{base.name}"
    return None


@dataclass(frozen=True)
class MethodValue(Value):
    """`obj.method`: a checked function with its receiver."""

    func: FunctionValue
    receiver: Value


@dataclass(frozen=True)
class TrustedForward(Value):
    """`Cls.apply` inside an autograd Function's `typecheck_forward`: its `forward` run as spmd_types runs it,
    unchecked (its backward is its own), only to see what it returns."""

    method: MethodValue


@dataclass(frozen=True)
class SuperValue(Value):
    """`super()` inside a method of `cls`."""

    cls: ClassValue
    receiver: Value


@dataclass(frozen=True)
class BuiltinValue(Value):
    """A builtin the analysis models (`super`, `isinstance`)."""

    name: str


@dataclass(frozen=True)
class ContextValue(Value):
    """The result of calling a context-manager rule (torch.no_grad(), set_current_mesh(m))."""

    kind: str
    payload: Value = UNKNOWN


def join(a: Value, b: Value, branch_ref: int | None = None, condition: tuple[object, bool] | None = None) -> Value:
    """Values of one variable after the two arms of an `if` (`condition`: what it tests, its truth in the
    `if` arm)."""
    if a == b:
        return a
    if branch_ref is not None and _tensorish(a) and _tensorish(b):
        on_else = (condition[0], not condition[1]) if condition is not None else None
        opts = _options(a, Branch(branch_ref, "if", condition)) + _options(b, Branch(branch_ref, "else", on_else))
        merged: list[tuple[TensorValue, tuple[Branch, ...]]] = []
        for t, path in opts:
            if consistent(path):  # an arm that tests again a condition an earlier `if` decided the other way
                _add_option(merged, t, path)
        if not merged:
            return UNKNOWN
        if len(merged) == 1:
            return merged[0][0]
        if len(merged) <= MAX_ALTERNATIVES:
            return Alternatives(tuple(merged))
        return widen([t for t, _ in merged])
    if isinstance(a, Seq) and isinstance(b, Seq) and len(a.items) == len(b.items):
        return Seq(tuple(join(x, y, branch_ref, condition) for x, y in zip(a.items, b.items)), a.is_list)
    if isinstance(a, (Seq, Homogeneous)) and isinstance(b, (Seq, Homogeneous)):
        # a list of different lengths on the two paths (one grown by `.append` in a loop): of unknown length,
        # its items joined
        items = [*(a.items if isinstance(a, Seq) else (a.item,)), *(b.items if isinstance(b, Seq) else (b.item,))]
        item = items[0]
        for other in items[1:]:
            item = join(item, other, branch_ref, condition)
        return Homogeneous(item) if item is not UNKNOWN else UNKNOWN
    if isinstance(a, PyNumber) and isinstance(b, PyNumber):
        return NUMBER  # two sizes (or numbers) the checker does not know: still a number
    if isinstance(a, (LayoutValue, LayoutChoice)) and isinstance(b, (LayoutValue, LayoutChoice)):
        options: list[LayoutValue] = []
        for layout in (*layout_options(a), *layout_options(b)):
            if layout not in options:
                options.append(layout)
        return LayoutChoice(tuple(options)) if len(options) <= MAX_ALTERNATIVES else UNKNOWN
    return UNKNOWN


def layout_options(value: Value) -> tuple[Value, ...]:
    """The layouts a value may be: the options of a LayoutChoice, else the value itself."""
    return value.options if isinstance(value, LayoutChoice) else (value,)


MAX_ALTERNATIVES = 4


def alternatives_of(values: list[tuple[Value, tuple[Branch, ...]]]) -> Value:
    """One value per branch path -> a single value, Alternatives, or UNKNOWN when they are not tensors."""
    merged: list[tuple[TensorValue, tuple[Branch, ...]]] = []
    for value, path in values:
        if isinstance(value, Alternatives):
            options = [(t, (*path, *p)) for t, p in value.options]
        elif isinstance(value, TensorValue):
            options = [(value, path)]
        else:
            first = values[0][0]
            return first if all(v == first for v, _ in values) else UNKNOWN
        for t, p in options:
            _add_option(merged, t, p)
    if len(merged) == 1:
        return merged[0][0]
    if len(merged) <= MAX_ALTERNATIVES:
        return Alternatives(tuple(merged))
    return widen([t for t, _ in merged])


def _tensorish(v: Value) -> bool:
    return isinstance(v, (TensorValue, Alternatives))


def _options(v: Value, branch: Branch) -> tuple[tuple[TensorValue, tuple[Branch, ...]], ...]:
    if isinstance(v, TensorValue):
        return ((v, (branch,)),)
    assert isinstance(v, Alternatives)
    # a loop's passes join the same back edge again: a path names each way once
    return tuple((t, path if branch in path else (branch, *path)) for t, path in v.options)


def widen(values: list[TensorValue]) -> TensorValue:
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


def carries_types(value: Value | None, depth: int = 3) -> bool:
    """Whether a value holds SPMD information a callee could misuse (a typed or grad-carrying tensor)."""
    if value is None or depth < 0:
        return False
    if isinstance(value, TensorValue):
        return value.typed or value.grad is GradState.YES
    if isinstance(value, Alternatives):
        return True
    if isinstance(value, Seq):
        return any(carries_types(item, depth - 1) for item in value.items)
    if isinstance(value, Homogeneous):
        return carries_types(value.item, depth - 1)
    if isinstance(value, DictValue):
        return any(carries_types(item, depth - 1) for _, item, _ in value.items)
    if isinstance(value, InstanceValue):
        return any(carries_types(item, depth - 1) for item in value.attrs.values())
    return isinstance(value, (ScalarValue, GroupValue, MeshValue, CarriesTypes))


def share_objects(value: Value, depth: int = 0, seen: set[int] | None = None) -> None:
    """Mark the objects a value holds as shared (`born` 0, as if the top level made them): a value a call
    summary or a built module keeps is seen by later checks, and what the check that made it writes to it
    afterwards is undone when that check ends, like any other check's writes (interp/modules.py)."""
    if Generation.current <= 0:
        return  # the top level: what it makes is already made before every check
    seen = set() if seen is None else seen
    if depth > 8 or id(value) in seen:
        return
    kind = type(value)
    if kind is InstanceValue:
        seen.add(id(value))
        value.born = 0  # type: ignore[attr-defined]
        for inner in list(value.attrs.values()):  # type: ignore[attr-defined]
            share_objects(inner, depth + 1, seen)
    elif kind is Seq or kind is Chain:
        for inner in value.items:  # type: ignore[attr-defined]
            share_objects(inner, depth + 1, seen)
    elif kind is Homogeneous:
        share_objects(value.item, depth + 1, seen)  # type: ignore[attr-defined]
    elif kind is DictValue:
        for _, inner, _ in value.items:  # type: ignore[attr-defined]
            share_objects(inner, depth + 1, seen)
    elif kind is MethodValue or kind is BoundMethod:
        share_objects(value.receiver, depth + 1, seen)  # type: ignore[attr-defined]


def is_tensor(value: Value) -> bool:
    """A tensor, or a tensor that differs by branch."""
    return isinstance(value, (TensorValue, Alternatives))


def element_of(value: Value) -> Value:
    """An element of an iterable value (the loop variable of `for x in value`), when every element agrees."""
    if isinstance(value, Homogeneous):
        return value.item
    if isinstance(value, Seq) and value.items:
        first = value.items[0]
        return first if all(item == first for item in value.items) else UNKNOWN
    if isinstance(value, DictValue):  # iterating a dict gives its keys
        return element_of(Seq(tuple(k for k, _, _ in value.items)))
    return UNKNOWN


def unpack(value: Value, n: int, star: int | None = None) -> list[Value]:
    """`n` targets from one value; `star`: the position of a starred target (which gets what is left)."""
    if isinstance(value, ShapeValue):
        # `b, s, _ = x.shape`: dims counted from the front before a starred name, from the end after it
        cut = n if star is None else star
        rank = n if star is None else None
        return [DimSize(value.tensor, i if i < cut else i - n, rank) for i in range(n)]
    if isinstance(value, Seq) and len(value.items) == n:
        return list(value.items)
    if isinstance(value, Homogeneous):
        return [value.item] * n
    return [UNKNOWN] * n

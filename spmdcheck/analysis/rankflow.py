"""Rank dependence carried by sequences: a rank's stride of a list (`indices[rank::world_size]`, the
sampler idiom) holds a number of items that differs across ranks unless the list was cut or padded to a
multiple of the stride first. That length flows through what Python does with the list: kept on `self`,
`len()` of it (and a class's `__len__`), iteration (and a class's `__iter__`), a generator that yields
inside a loop over it. A loop over such a sequence runs a rank-dependent number of times (interp/loops.py
reports the collectives in it, SPMD501)."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.memo import NodeMemo
from spmdcheck.analysis.values import (
    UNKNOWN,
    FunctionValue,
    Homogeneous,
    InstanceValue,
    RankValue,
    Seq,
    Unknown,
    Value,
    element_of,
)


@dataclass(frozen=True)
class RankSized(RankValue):
    """A sequence whose length differs across ranks as the rank value it was cut with does; `item` is the
    value its items share (UNKNOWN when they differ). A rank value itself: a condition on it (`if items:`),
    a loop over it and numbers computed from it all depend on the rank."""

    item: Value = UNKNOWN


@dataclass(frozen=True)
class Trimmed(Unknown):
    """A list the program cut to a computed length (`indices[:total_size]`, padding `indices[:pad]`): its
    length may be a multiple of the ranks' stride, so a rank's stride of it is not known to differ."""


TRIMMED = Trimmed()

# builtins whose result this module knows for sequences of rank-dependent length (dispatch.py)
BUILTINS = frozenset({"len", "enumerate"})


def sliced(base: Value, lower: Value | None, upper: Value | None, step: Value | None) -> Value | None:
    """`base[lower:upper:step]` of a Python sequence (not a tensor); None: not a slice this module types."""
    if isinstance(lower, RankValue) and step is not None and not isinstance(step, RankValue) and upper is None:
        # `indices[rank::world]`: a stride starting at the rank, to the end of a list of any length
        if isinstance(base, Trimmed):
            return UNKNOWN
        if type(base) is Unknown or isinstance(base, (Seq, Homogeneous, RankSized)):
            item = base.item if isinstance(base, RankSized) else element_of(base)
            return RankSized(lower.varies, lower.invariant, item)
        return None
    # a list of a known length counts too: cut to a computed length, it is no longer known
    cut_list = type(base) in (Unknown, Trimmed) or isinstance(base, Homogeneous)
    cut_list = cut_list or (isinstance(base, Seq) and base.is_list)
    if cut_list and upper is not None and not isinstance(upper, RankValue):
        if not isinstance(lower, RankValue) and not isinstance(step, RankValue):
            return TRIMMED
    return None


def joined_lengths(left: Value, right: Value) -> Value | None:
    """`a + b`, `a += b`, `[pad] * n` of lists: padding gives a list of a computed length (`indices +
    indices[:pad]`, `indices + [-1] * (-len(indices) % world)`), like a cut."""
    if _list_like(left) or _list_like(right):
        return TRIMMED
    return None


def _list_like(value: Value) -> bool:
    return isinstance(value, (Trimmed, Homogeneous, RankSized)) or (isinstance(value, Seq) and value.is_list)


def iterated(interp: Engine, iterable: Value, node: cst.CSTNode) -> Value:
    """What a `for` loop iterates: an object of a checked class iterates what its `__iter__` returns."""
    if isinstance(iterable, InstanceValue):
        method = iterable.cls.lookup("__iter__")
        if isinstance(method, FunctionValue):
            return interp.call(method, [], node, receiver=iterable)
    return iterable


def item_of(iterable: Value) -> Value:
    """The loop variable of `for x in iterable` when its value is known to be the same on every pass."""
    if isinstance(iterable, RankSized):
        return iterable.item
    return iterable if isinstance(iterable, RankValue) else element_of(iterable)


def call_builtin(interp: Engine, name: str, args: list[Arg], node: cst.CSTNode) -> Value:
    """`len(x)` (a rank-dependent number for a rank-sized sequence; an object's `__len__`) and
    `enumerate(x)` of a rank-sized sequence (as long as it)."""
    if len(args) != 1 or args[0][0] is not None:
        return UNKNOWN
    value = args[0][1]
    if name == "len":
        if isinstance(value, RankSized):
            return RankValue(value.varies, value.invariant)
        if isinstance(value, InstanceValue):
            method = value.cls.lookup("__len__")
            if isinstance(method, FunctionValue):
                return interp.call(method, [], node, receiver=value)
        return UNKNOWN
    if name == "enumerate" and isinstance(value, RankSized):
        return RankSized(value.varies, value.invariant, Seq((UNKNOWN, value.item)))
    return UNKNOWN


# ---------------------------------------------------------------- generators


@dataclass
class YieldLog:
    """What a function's body yielded while it ran (inline.py): a body that yielded is a generator's. Each
    value with the rank-dependent loops and early exits it was yielded under (only those entered within
    the generator: from `depth` on). `exact`: the items in order when each yield ran exactly once on the
    one path the body took (`arms`: the `if` arms and loop passes being joined when the body started), so
    `a, b = pairs((x, y))` keeps each item's own value; None once a yield may not have run, or run again."""

    depth: int
    arms: int = 0
    items: list[tuple[Value, list[RankValue]]] = field(default_factory=list)
    exact: list[Value] | None = field(default_factory=list)


def yielded(interp: Engine, value: Value, whole: bool, node: cst.CSTNode) -> None:
    """A `yield value` (`whole`: `yield from value`, its items) ran in the current frame."""
    log = interp.frame.yields
    if log is None:
        return
    if whole:
        value = iterated(interp, value, node)  # `yield from samples`: what its `__iter__` yields
    conditions = [condition for condition, _ in interp.divergent[log.depth :]]
    exact = log.exact
    if exact is not None:
        # joined arms or loop passes (attr_logs) run a yield that may run zero or many times
        if conditions or len(interp.attr_logs) != log.arms or not _straight(interp.frame.function):
            log.exact = None
        elif not whole:
            exact.append(value)
        elif isinstance(value, Seq):
            exact.extend(value.items)
        else:
            log.exact = None
    if whole:
        if isinstance(value, RankValue):  # a rank-sized list, `range(n)` of a rank-dependent `n`
            conditions.append(value)
        value = item_of(value)
    log.items.append((value, conditions))


def generated(log: YieldLog) -> Value:
    """What calling a generator gives, as the loop over it sees it: its items in order when each ran once
    (`exact`); else the value they share, a rank-sized sequence when some were yielded under a
    rank-dependent loop or exit."""
    if not log.items:
        return UNKNOWN
    if log.exact:
        return Seq(tuple(log.exact))
    first = log.items[0][0]
    item = first if all(v == first for v, _ in log.items) else UNKNOWN
    conditions = [c for _, cs in log.items for c in cs]
    if not conditions:
        return Homogeneous(item)
    rank = conditions[0]
    for other in conditions[1:]:
        rank = rank.combine(other)
    return RankSized(rank.varies, rank.invariant, item)


class _Uncertain(cst.CSTVisitor):
    """Finds what makes a generator's yields depend on more than the path the interpreter ran: a yield in a
    `while`, `try` or `match` (or in a conditional expression), a `return` or `raise` inside a block (the
    yields after it may not run)."""

    def __init__(self) -> None:
        self.blocks: list[cst.CSTNode] = []
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        if self.found or kind in (cst.FunctionDef, cst.ClassDef, cst.Lambda) and self.blocks:
            return False
        if kind is cst.Yield:
            self.found = any(type(b) in _UNCERTAIN for b in self.blocks)
        elif kind in (cst.Return, cst.Raise):
            self.found = len(self.blocks) > 1  # inside a block of the body (the body itself is one)
        if kind in _BLOCKS or kind in _UNCERTAIN:
            self.blocks.append(node)
        return not self.found

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if self.blocks and self.blocks[-1] is original_node:
            self.blocks.pop()


_BLOCKS = (cst.FunctionDef, cst.If, cst.For, cst.With)
_UNCERTAIN = (cst.While, cst.Try, cst.TryStar, cst.Match, cst.IfExp, cst.BooleanOperation)


def _straight(fn: cst.FunctionDef | None) -> bool:
    """Whether the generator `fn` runs each yield once per pass of the path the interpreter follows (the
    `if`s and `for`s around it are run as they are taken: unrolled, or joined and then not exact)."""
    return fn is not None and _straight_bodies(fn)


def _has_no_uncertain_block(fn: cst.FunctionDef) -> bool:
    visitor = _Uncertain()
    fn.visit(visitor)
    return not visitor.found


_straight_bodies: NodeMemo[cst.FunctionDef, bool] = NodeMemo(_has_no_uncertain_block)

"""Containers and registries: values kept in dicts, lists and comprehensions read back with the precision of
the direct form, and a registry looked up with a key the checker cannot read (`LOSSES[name]`,
`MODEL_REGISTRY.get(cfg.arch)`) standing for every entry it holds.

- A known key picks its entry; an unknown key (or an unknown index into a list) gives one of the entries:
  tensors become `Alternatives` (each entry with the lookup that picks it, named in messages), functions,
  classes and objects become `Candidates`, which a call runs once per candidate (a finding inside any one
  is a finding) and whose results are joined the same way.
- A dict written with `d[k] = v` and a list grown with `.append`/`.extend`/`+` keep their entries; a dict a
  program-defined `@register(...)` decorator fills (registries.py) holds what it registered.
- `sum(xs)`, `d.get(k)`, `.items()`/`.values()`/`.keys()`, iteration and membership in a constant tuple.

This module never imports dispatch.py (which imports it): dispatching a call is passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import libcst as cst

from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.values import (
    NONE,
    NUMBER,
    UNKNOWN,
    Alternatives,
    Branch,
    Chain,
    ClassValue,
    DictValue,
    FunctionValue,
    Homogeneous,
    InstanceValue,
    Literal,
    MethodValue,
    PyNumber,
    Seq,
    TensorValue,
    Value,
    alternatives_of,
    element_of,
    join,
)

# A registry with more entries than this, looked up with an unknown key, is not expanded (the cost of
# checking a call once per candidate): the lookup stays unknown, and unknown is silent.
MAX_CANDIDATES = 12
# A comprehension over a known sequence of at most this many items is evaluated once per item.
MAX_UNROLLED = 16

DICT_METHODS = frozenset({"values", "items", "keys", "get", "setdefault", "update"})
LIST_METHODS = frozenset({"append", "extend", "insert"})

Dispatch = Callable[[Engine, Value, list[Arg], cst.Call], Value]


@dataclass(frozen=True)
class Candidates(Value):
    """One of several functions, classes or objects, picked by a key the checker cannot read: each with the
    lookup and entry that picks it (a Branch whose ref is the lookup's site and whose arm names the entry)."""

    options: tuple[tuple[Value, Branch], ...]


_CALLABLE = (FunctionValue, ClassValue, InstanceValue, MethodValue, Chain, Candidates)


# ---------------------------------------------------------------- entries
def entries(interp: Engine, d: DictValue) -> tuple[tuple[Value, Value, cst.CSTNode], ...]:
    """A dict's entries: written in its literal, and registered into it since (registries.py)."""
    registered = interp.run.registered.get(id(d))
    if registered is None or registered[0] is not d:
        return d.items
    return d.items + tuple(registered[1])


def register(interp: Engine, d: DictValue, key: Value, value: Value, where: cst.CSTNode) -> None:
    """A module's top level writes an entry into a dict (a registry filled by a decorator or by `d[k] = v`):
    the dict itself holds it, for every module that imported it, as a Python dict would."""
    interp.run.registered.setdefault(id(d), (d, []))[1].append((key, value, where))
    if interp.log is not None:
        # the dict may be another module's: a selective run then runs every top level (incremental.py)
        interp.log.top_wrote()


def _label(key: Value) -> str:
    if isinstance(key, Literal):
        return f"entry {key.value!r}"
    return "entry under a key it cannot read"


def choose(interp: Engine, options: list[tuple[Value, str]], node: cst.CSTNode) -> Value:
    """One of `options` (value, label), picked at `node` by something the checker cannot read."""
    distinct: list[tuple[Value, str]] = []
    for value, label in options:
        if not any(value == seen for seen, _ in distinct):
            distinct.append((value, label))
    if not distinct:
        return UNKNOWN
    if len(distinct) == 1:
        return distinct[0][0]
    if len(distinct) > MAX_CANDIDATES:
        return UNKNOWN
    ref = interp.ctx.site(node)
    return join_picked([(v, (Branch(ref, label),)) for v, label in distinct])


def join_picked(picked: list[tuple[Value, tuple[Branch, ...]]]) -> Value:
    """Values each picked on a path: tensors are Alternatives, callables Candidates, tuples joined item by item."""
    values = [v for v, _ in picked]
    first = values[0]
    if all(v == first for v in values):
        return first
    if all(isinstance(v, (TensorValue, Alternatives)) for v in values):
        return alternatives_of(picked)
    if all(isinstance(v, _CALLABLE) for v in values):
        options: list[tuple[Value, Branch]] = []
        for value, path in picked:
            inner = value.options if isinstance(value, Candidates) else ((value, path[0]),)
            for option in inner:
                if not any(option[0] == o[0] for o in options):
                    options.append(option)
        return Candidates(tuple(options)) if len(options) <= MAX_CANDIDATES else UNKNOWN
    if all(isinstance(v, Seq) and len(v.items) == len(first.items) for v in values):  # type: ignore[attr-defined]
        return Seq(
            tuple(join_picked([(v.items[i], p) for v, p in picked]) for i in range(len(first.items))),  # type: ignore[attr-defined]
            first.is_list,  # type: ignore[attr-defined]
        )
    if all(isinstance(v, PyNumber) or (isinstance(v, Literal) and type(v.value) in (int, float)) for v in values):
        return NUMBER
    return UNKNOWN


# ---------------------------------------------------------------- reads
def getitem(interp: Engine, base: Value, index: Value, node: cst.CSTNode) -> Value | None:
    """`d[k]` of a dict and `xs[i]` of a list whose index the checker cannot read (None: not a container
    read this module answers)."""
    if isinstance(base, DictValue):
        return lookup(interp, base, index, node, default=None)
    if isinstance(base, Seq) and base.items and not isinstance(index, Literal):
        return choose(interp, [(item, f"item {i}") for i, item in enumerate(base.items)], node)
    return None


def lookup(interp: Engine, d: DictValue, key: Value, node: cst.CSTNode, default: Value | None) -> Value:
    """The entry of `key`: the one written under it, else any entry written under a key the checker cannot
    read (and `default`, for `.get`)."""
    items = entries(interp, d)
    if isinstance(key, Literal):
        for k, v, _ in reversed(items):
            if k == key:
                return v
        options = [(v, _label(k)) for k, v, _ in items if not isinstance(k, Literal)]
    else:
        options = [(v, _label(k)) for k, v, _ in items]
    if not options:
        return default if default is not None else UNKNOWN
    if default is not None and default != NONE:
        options.append((default, "default"))
    return choose(interp, options, node)


def is_container(value: Value) -> bool:
    return isinstance(value, (DictValue, Seq, Homogeneous))


def view(interp: Engine, d: DictValue, name: str) -> Value:
    """`d.values()`, `d.items()`, `d.keys()`: its entries in order; of unknown length when one was written
    under a key the checker cannot read."""
    items = entries(interp, d)
    if name == "values":
        out = tuple(v for _, v, _ in items)
    elif name == "keys":
        out = tuple(k for k, _, _ in items)
    else:
        out = tuple(Seq((k, v)) for k, v, _ in items)
    if all(isinstance(k, Literal) for k, _, _ in items):
        return Seq(out)
    return _homogeneous(out)


def _homogeneous(items: tuple[Value, ...]) -> Value:
    """A sequence of unknown length holding these items: one value standing for all of them."""
    if not items:
        return UNKNOWN
    joined = items[0]
    for item in items[1:]:
        joined = join(joined, item)
    return Homogeneous(joined) if joined is not UNKNOWN else UNKNOWN


def keys_of(interp: Engine, d: DictValue) -> Value:
    """What iterating a dict gives: its keys."""
    return view(interp, d, "keys")


def membership(left: Value, right: Value) -> Value:
    """`name in ("a", "b")`: a constant tested against constants (a class-level tuple, a dict's keys)."""
    if not isinstance(left, Literal):
        return UNKNOWN
    if isinstance(right, Seq):
        keys = right.items
    elif isinstance(right, DictValue):
        keys = tuple(k for k, _, _ in right.items)
    else:
        return UNKNOWN
    if not all(isinstance(k, Literal) for k in keys):
        return UNKNOWN
    try:
        return Literal(any(k.value == left.value for k in keys))  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - an odd comparison: unknown
        return UNKNOWN


# ---------------------------------------------------------------- writes
def with_entry(interp: Engine, d: DictValue, key: Value, value: Value, key_node: cst.CSTNode) -> DictValue:
    """The dict after `d[key] = value`."""
    items = [e for e in entries(interp, d) if not (isinstance(key, Literal) and e[0] == key)]
    items.append((key, value, key_node))
    return DictValue(tuple(items))


def setitem(interp: Engine, target: cst.Subscript, base: Value, index: Value, value: Value) -> bool:
    """`d[k] = v` / `xs[i] = v`: the container named by the target now holds `v` there (True: handled)."""
    if isinstance(base, DictValue):
        key_node = target.slice[0].slice.value if isinstance(target.slice[0].slice, cst.Index) else target
        if interp.frame.function is None and not interp.inline_stack:
            # a module's top level filling a registry: the dict itself holds the entry, for every importer
            register(interp, base, index, value, key_node)
        elif isinstance(index, Literal):
            interp.rebind(target.value, with_entry(interp, base, index, value, key_node))
        # (under a key the checker cannot read, in a function: most often a loop filling a table, whose every
        # pass would then change the dict; it keeps the entries it had, as before)
        return True
    if isinstance(base, Seq) and isinstance(index, Literal) and type(index.value) is int:
        i = index.value
        if -len(base.items) <= i < len(base.items):
            items = list(base.items)
            items[i] = value
            interp.rebind(target.value, Seq(tuple(items), base.is_list))
        return True
    if isinstance(base, Homogeneous):
        interp.rebind(target.value, _homogeneous((base.item, value)))
        return True
    return False


def concatenate(left: Value, right: Value) -> Value | None:
    """`xs + ys` of two lists or tuples (None: not sequences)."""
    if isinstance(left, Seq) and isinstance(right, Seq):
        return Seq(left.items + right.items, left.is_list)
    if isinstance(left, (Seq, Homogeneous)) and isinstance(right, (Seq, Homogeneous)):
        return _homogeneous((*_items(left), *_items(right)))
    return None


def _items(value: Value) -> tuple[Value, ...]:
    if isinstance(value, Seq):
        return value.items
    if isinstance(value, Homogeneous):
        return (value.item,)
    return ()


def call_method(interp: Engine, receiver: Value, name: str, args: list[Arg], node: cst.Call) -> Value:
    """A method of a dict or list the checker holds: a view, a lookup, or a write to the named container."""
    positional = [v for k, v, _ in args if k is None]
    if isinstance(receiver, DictValue):
        if name in ("values", "items", "keys"):
            return view(interp, receiver, name)
        if name == "get" and positional:
            default = positional[1] if len(positional) > 1 else NONE
            return lookup(interp, receiver, positional[0], node, default)
        if name == "setdefault" and positional:
            return lookup(interp, receiver, positional[0], node, positional[1] if len(positional) > 1 else NONE)
        if name == "update" and positional and isinstance(positional[0], DictValue):
            merged = receiver
            for key, value, key_node in entries(interp, positional[0]):
                merged = with_entry(interp, merged, key, value, key_node)
            _rebind_receiver(interp, node, merged)
        return UNKNOWN
    grown: Value | None = None
    if name == "append" and len(positional) == 1:
        grown = concatenate(receiver, Seq((positional[0],), True))
    elif name == "extend" and len(positional) == 1:
        grown = concatenate(receiver, positional[0]) or UNKNOWN
    elif name == "insert" and len(positional) == 2:
        grown = _homogeneous((*_items(receiver), positional[1])) if isinstance(receiver, (Seq, Homogeneous)) else None
    if grown is not None:
        _rebind_receiver(interp, node, grown)
    return NONE


def _rebind_receiver(interp: Engine, node: cst.Call, value: Value) -> None:
    func = node.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, (cst.Name, cst.Attribute)):
        interp.rebind(func.value, value)


# ---------------------------------------------------------------- sum
def total(interp: Engine, args: list[Arg], node: cst.Call, add: Callable[[Value, Value, Arg], Value]) -> Value:
    """`sum(xs)` / `sum(xs, start)`: the items added in order (`add(left, right, right_arg)`). Python starts
    from 0, and 0 + x is x: only a start given explicitly is added."""
    positional = [(v, n) for k, v, n in args if k is None]
    if not positional:
        return UNKNOWN
    iterable, where = positional[0]
    if isinstance(iterable, Seq):
        items = list(iterable.items)
    elif isinstance(iterable, Homogeneous):
        items = [iterable.item, iterable.item]  # two items of the kind: what adding them gives
    else:
        return UNKNOWN
    start = positional[1][0] if len(positional) > 1 else None
    if start is not None and not (isinstance(start, Literal) and start.value == 0):
        items.insert(0, start)
    if not items:
        return start if start is not None else Literal(0)
    result = items[0]
    for item in items[1:]:
        result = add(result, item, (None, item, where))
    return result


# ---------------------------------------------------------------- calls of candidates
def call_candidates(
    interp: Engine, candidates: Candidates, args: list[Arg], node: cst.Call, dispatch: Dispatch
) -> Value:
    """A call of one of several callables: typed once per candidate, each with its own findings (a finding in
    only some names the entry that gives it), writes to variables joined, results joined."""
    results: list[tuple[Value, tuple[Branch, ...]]] = []
    captured: list[list[Finding]] = []
    writes: list[tuple[list, tuple]] = []
    outer_effects = interp.effects
    for callee, branch in candidates.options:
        mark = interp.ctx.program.checkpoint()
        interp.effects = []
        try:
            result = dispatch(interp, callee, args, node)
        finally:
            writes.append((interp.effects, (branch,)))
            interp.effects = outer_effects
        captured.append(interp.ctx.program.withdraw(mark))
        results.append((result, (branch,)))
    _report_per_candidate(interp, captured, [b for _, b in candidates.options])
    interp.join_effects(writes)
    return join_picked(results)


def _report_per_candidate(interp: Engine, captured: list[list[Finding]], branches: list[Branch]) -> None:
    """A finding every candidate gives is unconditional; one only some give names the first that does."""
    where: dict[tuple, list[int]] = {}
    first: dict[tuple, Finding] = {}
    for i, findings in enumerate(captured):
        for f in findings:
            key = f.key()
            where.setdefault(key, []).append(i)
            first.setdefault(key, f)
    for key, found_in in where.items():
        f = first[key]
        if len(set(found_in)) < len(captured) and branches[found_in[0]] not in f.branches:
            f.branches = (branches[found_in[0]], *f.branches)
        interp.ctx.report(f)


def attribute(candidates: Candidates, attr: str, read: Callable[[Value, str], Value]) -> Value:
    """`model.forward`, `loss_fn.reduction` of one of several objects: the attribute of each."""
    picked = [(read(value, attr), (branch,)) for value, branch in candidates.options]
    if any(v is UNKNOWN for v, _ in picked):
        return UNKNOWN
    return join_picked(picked)


# ---------------------------------------------------------------- comprehensions
class _Evaluator(Protocol):
    engine: Any

    def eval(self, node: cst.BaseExpression) -> Value: ...


def comprehension(ev: _Evaluator, node: cst.ListComp | cst.GeneratorExp | cst.SetComp | cst.DictComp) -> Value:
    """A comprehension's elements. Over one known sequence of distinct items, the element is evaluated once
    per item (a list keeps each item's value, a dict each key's entry); otherwise once, its loop variables
    bound to what every item agrees on: a sequence of unknown length of that element."""
    clause = node.for_in
    iterable = ev.eval(clause.iter)
    if (
        clause.inner_for_in is None
        and isinstance(iterable, Seq)
        and 1 < len(iterable.items) <= MAX_UNROLLED
        and any(item != iterable.items[0] for item in iterable.items)
    ):
        produced: list[tuple[Value, Value, cst.CSTNode]] = []
        exact = True
        for item in iterable.items:
            ev.engine.assign(clause.target, item, None)
            tests = [ev.eval(cond.test) for cond in clause.ifs]
            if any(isinstance(t, Literal) and not t.value for t in tests):
                continue
            exact = exact and all(isinstance(t, Literal) for t in tests)
            produced.append(_element(ev, node))
        return _collect(node, produced, exact)
    item: Value = element_of(iterable)
    while True:
        ev.engine.assign(clause.target, item, None)
        for cond in clause.ifs:
            ev.eval(cond.test)
        if clause.inner_for_in is None:
            break
        clause = clause.inner_for_in
        item = element_of(ev.eval(clause.iter))
    return _collect(node, [_element(ev, node)], exact=False)


def _element(ev: _Evaluator, node: cst.CSTNode) -> tuple[Value, Value, cst.CSTNode]:
    if type(node) is cst.DictComp:
        return ev.eval(node.key), ev.eval(node.value), node.key
    return NONE, ev.eval(node.elt), node  # type: ignore[attr-defined]


def _collect(node: cst.CSTNode, produced: list[tuple[Value, Value, cst.CSTNode]], exact: bool) -> Value:
    kind = type(node)
    if kind is cst.DictComp:
        if not exact:
            # entries that may be missing, or repeated under keys the checker cannot read
            produced = [(k, v, n) if exact or isinstance(k, Literal) else (UNKNOWN, v, n) for k, v, n in produced]
        return dict_of(produced)
    values = tuple(v for _, v, _ in produced)
    if exact and kind is not cst.SetComp:
        return Seq(values, is_list=kind is cst.ListComp)
    if not values:
        return UNKNOWN
    joined = _homogeneous(values)
    return joined if joined is not UNKNOWN or len(values) > 1 else Homogeneous(values[0])


def dict_of(produced: list[tuple[Value, Value, cst.CSTNode]]) -> DictValue:
    """A dict built entry by entry: a later entry under the same constant key replaces the earlier one."""
    items: list[tuple[Value, Value, cst.CSTNode]] = []
    for key, value, key_node in produced:
        if isinstance(key, Literal):
            items = [e for e in items if e[0] != key]
        items.append((key, value, key_node))
    return DictValue(tuple(items))

"""The names one pass of a loop body may read before it writes them (its *exposed* reads).

The interpreter runs a loop body to a fixed point (interp/loops.py). After a pass whose writes
changed only names the body always writes before it reads them, another pass would read exactly what
this one read, compute the same values and end in the same state: the loop has converged. This module
answers which names those are, from the syntax alone, as the interpreter runs a body:

- statements run in order; a name is *defined* once a statement that always runs has assigned it;
- both arms of an `if` run (one of them, for a constant test): a name is defined after the `if` when
  both arms define it; a loop body, a `try` body, an exception handler or a `match` case may not run to
  its end, so what they define is not counted after them;
- an attribute chain (`self.x`) is a name of its own (the interpreter keeps `self.x` as a variable when
  `self` is not an object it models): reading `a.b.c` reads `a`, `a.b` and `a.b.c`;
- every name written inside a nested function, class, lambda or comprehension counts as read where it
  stands (they run later, or in a scope of their own);
- `global`, `nonlocal` and `del` make the answer unknown (None): the loop then runs as before;
- `xs.append(y)` (`.extend`, `.insert`) reads what it adds, not `xs`: a list joined with what it held holds
  the same again after another pass (analysis/containers.py).

The answer over-approximates: a name counted as read when it is not only costs a pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import libcst as cst

# Fields of a libcst node that hold only punctuation and whitespace: never a name.
_LAYOUT_FIELDS = (
    "whitespace",
    "lpar",
    "rpar",
    "comma",
    "semicolon",
    "leading_lines",
    "lines_after_decorators",
    "header",
    "footer",
    "colon",
    "equal",
    "dot",
    "operator",
    "lbracket",
    "rbracket",
    "lbrace",
    "rbrace",
    "asynchronous",
    "newline",
    "trailing_whitespace",
    "first_line",
    "empty_lines",
    "indent",
    "prefix",
    "suffix",
)
_fields_of: dict[type, tuple[str, ...]] = {}
_GROWING = frozenset({"append", "extend", "insert"})  # list methods that only add items


class _Unknown(Exception):
    """The body rebinds names in a way this module does not follow."""


def exposed_reads(loop: cst.For | cst.While) -> frozenset[str] | None:
    """The names (and attribute chains) one pass of the loop's body may read before writing them; the
    target of a `for` is written first. None: unknown (the body uses `global`, `nonlocal` or `del`)."""
    exposed: set[str] = set()
    defined: set[str] = set()
    if isinstance(loop, cst.For):
        _define(loop.target, defined, exposed)
    try:
        _block(_statements(loop.body), defined, exposed)
    except _Unknown:
        return None
    return frozenset(exposed)


def _statements(block: cst.CSTNode) -> Sequence[cst.CSTNode]:
    body = getattr(block, "body", ())
    return body if isinstance(body, (list, tuple)) else ()


def _block(statements: Iterable[cst.CSTNode], defined: set[str], exposed: set[str]) -> None:
    for stmt in statements:
        kind = type(stmt)
        if kind is cst.SimpleStatementLine:
            for small in stmt.body:  # type: ignore[attr-defined]
                _small(small, defined, exposed)
        elif kind is cst.If:
            _if(stmt, defined, exposed)  # type: ignore[arg-type]
        elif kind is cst.For:
            _read(stmt.iter, defined, exposed)  # type: ignore[attr-defined]
            inner = set(defined)
            _define(stmt.target, inner, exposed)  # type: ignore[attr-defined]
            _block(_statements(stmt.body), inner, exposed)  # type: ignore[attr-defined]
            _else(stmt.orelse, defined, exposed)  # type: ignore[attr-defined]
        elif kind is cst.While:
            _read(stmt.test, defined, exposed)  # type: ignore[attr-defined]
            _block(_statements(stmt.body), set(defined), exposed)  # type: ignore[attr-defined]
            _else(stmt.orelse, defined, exposed)  # type: ignore[attr-defined]
        elif kind is cst.With:
            for item in stmt.items:  # type: ignore[attr-defined]
                _read(item.item, defined, exposed)
                if item.asname is not None:
                    _define(item.asname.name, defined, exposed)
            _block(_statements(stmt.body), defined, exposed)  # type: ignore[attr-defined]  # always runs
        elif kind in (cst.Try, cst.TryStar):
            body = set(defined)
            _block(_statements(stmt.body), body, exposed)  # type: ignore[attr-defined]
            for handler in stmt.handlers:  # type: ignore[attr-defined]
                _read(handler.type, defined, exposed)
                _block(_statements(handler.body), set(defined), exposed)
            if stmt.orelse is not None:  # type: ignore[attr-defined]
                _block(_statements(stmt.orelse.body), body, exposed)  # type: ignore[attr-defined]
            if stmt.finalbody is not None:  # type: ignore[attr-defined]
                _block(_statements(stmt.finalbody.body), set(defined), exposed)  # type: ignore[attr-defined]
        elif kind is cst.FunctionDef or kind is cst.ClassDef:
            for part in _definition_parts(stmt):  # decorators, defaults, bases, and what the body reads later
                _read(part, defined, exposed)
            defined.add(stmt.name.value)  # type: ignore[attr-defined]
        else:  # match, and whatever else: everything in it is read, nothing counts as written
            _read(stmt, defined, exposed)


def _definition_parts(stmt: cst.CSTNode) -> list[cst.CSTNode]:
    """A function's or class's parts other than its name."""
    fields = _fields_of.get(type(stmt))
    if fields is None:
        fields = _fields_of[type(stmt)] = _node_fields(type(stmt))
    parts: list[cst.CSTNode] = []
    for name in fields:
        value = getattr(stmt, name)
        if name != "name" and isinstance(value, cst.CSTNode):
            parts.append(value)
        elif type(value) is list or type(value) is tuple:
            parts.extend(value)
    return parts


def _if(stmt: cst.If, defined: set[str], exposed: set[str]) -> None:
    _read(stmt.test, defined, exposed)
    taken = set(defined)
    _block(_statements(stmt.body), taken, exposed)
    orelse = stmt.orelse
    other = set(defined)
    if isinstance(orelse, cst.If):
        _if(orelse, other, exposed)
    elif orelse is not None:
        _block(_statements(orelse.body), other, exposed)
    defined |= taken & other


def _else(orelse: cst.Else | None, defined: set[str], exposed: set[str]) -> None:
    if orelse is not None:
        _block(_statements(orelse.body), set(defined), exposed)


def _small(stmt: cst.CSTNode, defined: set[str], exposed: set[str]) -> None:
    kind = type(stmt)
    if kind is cst.Assign:
        _read(stmt.value, defined, exposed)  # type: ignore[attr-defined]
        for target in stmt.targets:  # type: ignore[attr-defined]
            _define(target.target, defined, exposed)
    elif kind is cst.AnnAssign:
        _read(stmt.annotation, defined, exposed)  # type: ignore[attr-defined]
        if stmt.value is not None:  # type: ignore[attr-defined]
            _read(stmt.value, defined, exposed)  # type: ignore[attr-defined]
            _define(stmt.target, defined, exposed)  # type: ignore[attr-defined]
    elif kind is cst.AugAssign:
        _read(stmt.target, defined, exposed)  # type: ignore[attr-defined]
        _read(stmt.value, defined, exposed)  # type: ignore[attr-defined]
        _define(stmt.target, defined, exposed)  # type: ignore[attr-defined]
    elif kind in (cst.Global, cst.Nonlocal, cst.Del):
        raise _Unknown
    else:
        _read(stmt, defined, exposed)


def _define(target: cst.CSTNode, defined: set[str], exposed: set[str]) -> None:
    """An assignment to `target`: what it reads to find the place, then the names it binds."""
    kind = type(target)
    if kind is cst.Name:
        defined.add(target.value)  # type: ignore[attr-defined]
    elif kind is cst.Tuple or kind is cst.List:
        for element in target.elements:  # type: ignore[attr-defined]
            _define(element.value, defined, exposed)
    elif kind is cst.StarredElement:
        _define(target.value, defined, exposed)  # type: ignore[attr-defined]
    elif kind is cst.Attribute:
        _read(target.value, defined, exposed)  # type: ignore[attr-defined]
        path = attr_path(target)
        if path is not None:
            defined.add(path)
    else:  # a subscript: its value and index are read
        _read(target, defined, exposed)


def _read(node: cst.CSTNode | None, defined: set[str], exposed: set[str]) -> None:
    """Every name and attribute chain in `node` is read (those not yet defined are exposed)."""
    if node is None:
        return
    todo: list = [node]
    while todo:
        item = todo.pop()
        kind = type(item)
        if kind is cst.Name:
            if item.value not in defined:
                exposed.add(item.value)
            continue
        if kind is cst.Call and type(item.func) is cst.Attribute and item.func.attr.value in _GROWING:
            if attr_path(item.func.value) is not None:
                # `outputs.append(y)`: the list only grows, and joined with what it held (containers.py) it
                # holds the same again in another pass: what that pass reads is the argument
                todo.extend(item.args)
                continue
        if kind is cst.Attribute:
            path = attr_path(item)
            if path is not None:
                parts = path.split(".")
                for end in range(1, len(parts) + 1):
                    prefix = ".".join(parts[:end])
                    if prefix not in defined:
                        exposed.add(prefix)
                continue
            todo.append(item.value)
            continue
        fields = _fields_of.get(kind)
        if fields is None:
            fields = _fields_of[kind] = _node_fields(kind)
        for name in fields:
            value = getattr(item, name)
            node = NODE_KINDS.get(type(value))
            if node is None:
                node = is_node_kind(type(value))
            if node:
                todo.append(value)
            elif type(value) is list or type(value) is tuple:
                todo.extend(value)


NODE_KINDS: dict[type, bool] = {}  # per type: whether it is a libcst node (read inline in the walks below)


def is_node_kind(kind: type) -> bool:
    """Whether `kind` is a libcst node class, memoised in NODE_KINDS: `isinstance(v, cst.CSTNode)` goes through
    the ABC machinery on every call, and the walks ask it of every field of every node."""
    found = NODE_KINDS[kind] = isinstance(kind, type) and issubclass(kind, cst.CSTNode)
    return found


def layout_free_fields(kind: type) -> tuple[str, ...]:
    """The fields of a libcst node class that may hold names (not punctuation nor whitespace), memoised."""
    fields = _fields_of.get(kind)
    if fields is None:
        fields = _fields_of[kind] = _node_fields(kind)
    return fields


def names_in(node: cst.CSTNode) -> frozenset[str]:
    """Every name in `node` (nested definitions included), by a walk that builds no node (a libcst visitor
    rebuilds each node it leaves: ten times the cost)."""
    found: set[str] = set()
    todo: list = [node]
    while todo:
        item = todo.pop()
        kind = type(item)
        if kind is cst.Name:
            found.add(item.value)
            continue
        for name in layout_free_fields(kind):
            value = getattr(item, name)
            node = NODE_KINDS.get(type(value))
            if node is None:
                node = is_node_kind(type(value))
            if node:
                todo.append(value)
            elif type(value) is list or type(value) is tuple:
                todo.extend(value)
    return frozenset(found)


def _node_fields(kind: type) -> tuple[str, ...]:
    if not dataclasses.is_dataclass(kind):
        return ()
    return tuple(f.name for f in dataclasses.fields(kind) if not f.name.startswith(_LAYOUT_FIELDS))


def attr_path(node: cst.CSTNode) -> str | None:
    """`a.b.c` for an attribute chain on a name, else None: the interpreter keeps such chains as variables
    (`self.weight` when `self` is no object it models)."""
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)  # type: ignore[attr-defined]
    return ".".join(reversed(parts))

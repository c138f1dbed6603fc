"""Loops over a few known items: the one policy for when a `for` loop runs its body once per item instead of to
its fixed point (loops.py), and that run.

A loop is unrolled when its iterable is a short sequence of known items (`for fn in LOSSES.values()`,
`for k, v in d.items()`, `for i in range(2)`, `for m in (self.a, self.b)`; at most `MAX_ITEMS`), in one of
two cases:

- **different items**: at least two items that differ in more than constants, or in constants a test of the
  body reads (`if name in SP_PARAMS:`), and a body that cannot leave a pass early (`break`, `continue`,
  `return`, `raise`, `yield` of its own). Items differing only in constants no test reads (`for key in
  ("param", "exp_avg")`) run as one joined item: the same types, at a fraction of the cost.
- **in a call with known arguments**: any items the checker knows (none unknown), a body without `break`,
  `continue` (in nested loops too) or `return`, and no `else` (a `yield` stays: a generator yields once per
  item). A function checked on its own keeps
  the fixed point: there a constant may change, as for `if`.

Each pass runs on what the previous one computed, in order, as Python runs it. What a loop body holds is read
from the syntax once per loop (`_facts`, memoised): the interpreter asks again every time the loop runs.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import libcst as cst

from spmdcheck.analysis.frames import Frame
from spmdcheck.analysis.interp.loopreads import NODE_KINDS, is_node_kind, layout_free_fields, names_in
from spmdcheck.analysis.interp.syntax import block_body
from spmdcheck.analysis.memo import NodeMemo
from spmdcheck.analysis.values import UNKNOWN, Literal, Seq, Value

MAX_ITEMS = 8  # a loop over more known items than this runs to its fixed point


class _Runner(Protocol):
    frame: Frame
    inline_stack: list[cst.FunctionDef]

    def assign(self, target: cst.BaseExpression, value: Value, value_node: cst.CSTNode | None) -> None: ...

    def exec_block(self, body: object) -> None: ...


def run_unrolled(interp: _Runner, node: cst.For, iterable: Value) -> bool:
    """Run `node` once per item of `iterable` when the policy says so (True: the loop ran)."""
    items = items_to_unroll(node, iterable, in_call=bool(interp.inline_stack))
    if items is None:
        return False
    body = block_body(node)
    for item in items:
        interp.assign(node.target, item, None)
        interp.exec_block(body)
        if interp.frame.ended():  # a `raise` on every path: the later items are not reached
            break
    if node.orelse is not None:
        interp.exec_block(block_body(node.orelse))
    return True


def items_to_unroll(node: cst.For, iterable: Value, in_call: bool) -> tuple[Value, ...] | None:
    """The items `node` runs its body on one by one, or None: the loop runs to its fixed point."""
    if not isinstance(iterable, Seq):
        return None
    items = iterable.items  # type: ignore[attr-defined]
    if not 0 < len(items) <= MAX_ITEMS:
        return None
    facts = _facts(node)
    if len(items) > 1 and not facts.may_leave and any(item != items[0] for item in items):
        first = _shape(items[0])
        if any(_shape(item) != first for item in items) or facts.tests_target:
            return items
    if in_call and node.orelse is None and not facts.leaves_early and all(item is not UNKNOWN for item in items):
        return items
    return None


def _shape(value: Value) -> object:
    """A value with its constants left out: what a loop's items must share to be run as one joined item."""
    if isinstance(value, Literal):
        return Literal
    if isinstance(value, Seq):
        return tuple(_shape(item) for item in value.items)
    return value


# ---------------------------------------------------------------- what a loop body holds


@dataclasses.dataclass(frozen=True)
class _BodyFacts:
    may_leave: bool  # a break/continue of its own, or a return, raise or yield (not in nested definitions)
    leaves_early: bool  # a break/continue (nested loops' too) or return (not in nested functions)
    tests_target: bool  # a condition or comparison of the body reads a name the loop's target binds


def _read_facts(node: cst.For) -> _BodyFacts:
    walk = _BodyWalk()
    for stmt in block_body(node):
        walk.statement(stmt)
    target = names_in(node.target)
    return _BodyFacts(
        may_leave=walk.own_jump or walk.exits,
        leaves_early=walk.own_jump or walk.nested_jump or walk.returns or walk.lambda_yield,
        tests_target=not target.isdisjoint(walk.tested),
    )


_facts: NodeMemo[cst.For, _BodyFacts] = NodeMemo(_read_facts)


class _BodyWalk:
    """One walk of a loop body (not into nested functions and classes)."""

    def __init__(self) -> None:
        self.own_jump = False  # break/continue of this loop
        self.nested_jump = False  # break/continue of a loop nested in the body
        self.exits = False  # return, raise or yield outside lambdas
        self.returns = False  # return outside lambdas (a yield does not leave the loop: a generator yields per item)
        self.lambda_yield = False  # yield inside a lambda
        self.tested: set[str] = set()  # names read by the body's conditions and comparisons

    def statement(self, root: cst.CSTNode) -> None:
        todo: list[tuple[cst.CSTNode, bool, bool]] = [(root, False, False)]  # node, in a nested loop, in a lambda
        while todo:
            item, in_loop, in_lambda = todo.pop()
            kind = type(item)
            if kind is cst.Break or kind is cst.Continue:
                if in_loop:
                    self.nested_jump = True
                else:
                    self.own_jump = True
                continue
            if kind is cst.Return or kind is cst.Yield or kind is cst.Raise:
                if in_lambda:
                    self.lambda_yield = self.lambda_yield or kind is cst.Yield
                else:
                    self.exits = True
                    self.returns = self.returns or kind is cst.Return
            if kind is cst.FunctionDef or kind is cst.ClassDef:
                continue
            if not in_lambda:  # the conditions the body tests (a lambda's are its own)
                if kind is cst.Comparison or kind is cst.Match:
                    self.tested |= names_in(item)
                elif kind is cst.If or kind is cst.IfExp or kind is cst.While:
                    self.tested |= names_in(item.test)  # type: ignore[attr-defined]
            nested = in_loop or kind is cst.For or kind is cst.While
            inside = in_lambda or kind is cst.Lambda
            for name in layout_free_fields(kind):
                value = getattr(item, name)
                node = NODE_KINDS.get(type(value))
                if node is None:
                    node = is_node_kind(type(value))
                if node:
                    todo.append((value, nested, inside))
                elif type(value) is list or type(value) is tuple:
                    todo.extend((child, nested, inside) for child in value)

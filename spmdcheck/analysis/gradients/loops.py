"""Counted loops of the gradient walk: `for i in range(n)`, a loop over `x.chunk(n)` (and `zip` / `enumerate` /
`list` of them), whatever `n` is.

* **Known count.** `range(k)` and `x.chunk(k)` with a constant `k` (at most `MAX_COUNT`) are walked iteration
  by iteration, as any list the walk follows (`Counted.items`), `i` bound to 0, 1, ... k - 1.
* **Unknown count.** `n` the walk cannot evaluate (a parameter, `config.num_microbatches`, `len(batches)`) is
  a `Count`, named by the code it was read from. A loop over it whose body calls `backward()` is a micro-batch
  loop: its gradients accumulate iteration after iteration, so it is walked as three iterations (`POSITIONS`):
  the first (`i == 0`), one standing for every iteration between, and the last (`i == n - 1`) - a loop
  written to accumulate gradients runs for several micro-batches (one micro-batch, where a sync on every
  iteration would be right, is not modelled). `i` is a `LoopIndex` whose comparisons with constants and with
  `n` (by its code: `i == n - 1`, `i + 1 < n`) are decided where that position decides them. Any other loop
  over an unknown count (no backward(), or an optimizer step in it: a training loop, whose iterations the
  walk cannot tell are separated by a `zero_grad()`) is walked as before: once, joined with not running.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import libcst as cst

MAX_COUNT = 64  # a constant count walked iteration by iteration (more: as an unknown count)
POSITIONS = ("first", "middle", "last")
MIN_COUNT = len(POSITIONS)  # the fewest iterations an unknown count stands for (first, middle and last apart)


@dataclass(frozen=True)
class Count:
    """A number of iterations the walk does not know, named by the code it was read from (`n`,
    `len(batches)`), plus `offset` (`n - 1`)."""

    key: str
    offset: int = 0


@dataclass(frozen=True)
class LoopIndex:
    """The index of an iteration of a loop over an unknown count `count`: its `position` (first, one in the
    middle, last), plus `offset` (`i + 1`)."""

    position: str
    count: str
    offset: int = 0


@dataclass(eq=False)
class Counted:
    """A sequence of `count` elements (an int, or a `Count`): `element(i)` the one at index `i`."""

    count: int | Count
    element: Callable[[Any], Any]

    def items(self) -> list[Any] | None:
        """The elements one by one; None for an unknown count."""
        if isinstance(self.count, int):
            return [self.element(i) for i in range(self.count)]
        return None

    def indices(self) -> list[Any]:
        """The indices a loop over an unknown count is walked for (`POSITIONS`)."""
        assert isinstance(self.count, Count)
        return [LoopIndex(position, self.count.key) for position in POSITIONS]


def count_of(value: Any, text: str) -> int | Count | None:
    """The count `value` (the expression `text`) gives: a constant, a `Count` carried over, or a new `Count`
    named `text` for a value the walk does not know (None: not a count, e.g. a negative or a huge number)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= MAX_COUNT else Count(text)
    if isinstance(value, Count):
        return value
    return Count(text) if text else None


def _constant(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def counted_range(values: list[Any], texts: list[str]) -> Counted | None:
    """`range(n)`, `range(0, n)`, `range(a, b, step)` of constants: its indices; None for a range of an unknown
    count that does not start at 0 by one (`range(1, n)`)."""
    if all(_constant(v) for v in values):
        indices = range(*values)
        if 0 <= len(indices) <= MAX_COUNT:
            return Counted(len(indices), lambda i: indices[i] if isinstance(i, int) else i)
    if len(values) > 2 or (len(values) == 2 and values[0] != 0) or (_constant(values[-1]) and values[-1] < 0):
        return None
    count = count_of(values[-1], texts[-1])
    return None if count is None else Counted(count, lambda i: i)


def combined(values: list[Any], build: Callable[[list[Any]], Any]) -> Counted | None:
    """`zip(...)` of sequences of the same count (at least one of them counted): `build` of their elements."""
    counts = {v.count for v in values if isinstance(v, Counted)}
    if len(counts) != 1 or not all(isinstance(v, Counted) for v in values):
        return None
    parts = [v for v in values if isinstance(v, Counted)]
    return Counted(counts.pop(), lambda i: build([p.element(i) for p in parts]))


def length(value: Counted) -> int | Count:
    return value.count


def binary(kind: str, left: Any, right: Any) -> Any:
    """`i + 1`, `n - 1` with a constant: the index or count moved; None: not such an operation."""
    if kind not in ("Add", "Subtract"):
        return None
    if isinstance(right, int) and not isinstance(right, bool) and isinstance(left, (LoopIndex, Count)):
        step = right if kind == "Add" else -right
        return type(left)(*_fields(left)[:-1], left.offset + step)  # type: ignore[call-arg]
    if kind == "Add" and isinstance(left, int) and not isinstance(left, bool) and isinstance(right, LoopIndex):
        return binary("Add", right, left)
    return None


def _fields(value: LoopIndex | Count) -> tuple:
    if isinstance(value, LoopIndex):
        return (value.position, value.count, value.offset)
    return (value.key, value.offset)


def symbolic(expr: cst.BaseExpression, key: str, text: Callable[[cst.CSTNode], str]) -> Count | None:
    """The expression `expr` read as the count named `key` plus a constant (`n`, `n - 1`, `n + 1`); None: not."""
    offset = 0
    while isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        if not isinstance(expr.right, cst.Integer):
            return None
        step = int(expr.right.value)
        offset += step if isinstance(expr.operator, cst.Add) else -step
        expr = expr.left
    if text(expr) == key:
        return Count(key, offset)
    return None


# a linear form `a * n + b` of the unknown count n (n >= MIN_COUNT)
Linear = tuple[int, int]


def _bounds(index: LoopIndex) -> tuple[Linear, Linear]:
    """The smallest and largest value `index` stands for, as linear forms of its loop's count."""
    if index.position == "first":
        return (0, index.offset), (0, index.offset)
    if index.position == "last":
        return (1, index.offset - 1), (1, index.offset - 1)
    return (0, index.offset + 1), (1, index.offset - 2)  # every iteration between the first and the last


def _sign(form: Linear) -> int | None:
    """The sign of `a * n + b` for every n >= MIN_COUNT, or None when it depends on n."""
    a, b = form
    if a == 0:
        return (b > 0) - (b < 0)
    at_least = a * MIN_COUNT + b
    if a > 0:
        return 1 if at_least > 0 else None
    return -1 if at_least < 0 else None


def compare(op: str, left: Any, right: Any) -> bool | None:
    """A comparison of a loop index with a constant or a count of the same loop, where the index's position
    decides it; None: undecided (or not such a comparison)."""
    if isinstance(right, LoopIndex) and not isinstance(left, LoopIndex):
        flipped = {"LessThan": "GreaterThan", "GreaterThan": "LessThan", "LessThanEqual": "GreaterThanEqual",
                   "GreaterThanEqual": "LessThanEqual", "Equal": "Equal", "NotEqual": "NotEqual"}  # fmt: skip
        return compare(flipped[op], right, left) if op in flipped else None
    if not isinstance(left, LoopIndex):
        return None
    if isinstance(right, int) and not isinstance(right, bool):
        other: Linear = (0, right)
    elif isinstance(right, Count) and right.key == left.count:
        other = (1, right.offset)
    else:
        return None
    low, high = _bounds(left)
    low_sign = _sign((low[0] - other[0], low[1] - other[1]))
    high_sign = _sign((high[0] - other[0], high[1] - other[1]))
    if low_sign is None or high_sign is None:
        return None
    equal = low_sign == 0 and high_sign == 0
    below = high_sign < 0  # every value the index stands for is below the other side
    above = low_sign > 0
    if op == "Equal":
        return True if equal else (False if below or above else None)
    if op == "NotEqual":
        return False if equal else (True if below or above else None)
    if op == "LessThan":
        return True if below else (False if low_sign >= 0 else None)
    if op == "LessThanEqual":
        return True if high_sign <= 0 else (False if above else None)
    if op == "GreaterThan":
        return True if above else (False if high_sign <= 0 else None)
    if op == "GreaterThanEqual":
        return True if low_sign >= 0 else (False if below else None)
    return None


class _Calls(cst.CSTVisitor):
    """Whether a loop's body calls `backward()` / steps an optimizer (not counting nested functions)."""

    def __init__(self) -> None:
        self.backward = False
        self.step = False

    def visit_Call(self, node: cst.Call) -> None:  # noqa: N802 - libcst's visitor naming
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name == "backward":
            self.backward = True
        elif name == "step" and isinstance(func, cst.Attribute):
            self.step = True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:  # noqa: N802
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:  # noqa: N802
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:  # noqa: N802
        return False


def body_calls(node: cst.For | cst.While) -> tuple[bool, bool]:
    """(calls `backward()`, steps an optimizer) in the body of the loop `node`."""
    calls = _Calls()
    node.body.visit(calls)
    return calls.backward, calls.step

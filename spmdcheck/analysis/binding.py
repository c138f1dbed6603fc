"""Bind call arguments to a stub signature, and collect the operands of an op."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from spmdcheck.analysis.values import (
    Homogeneous,
    Literal,
    PyNumber,
    ScalarValue,
    Seq,
    TensorValue,
    Unknown,
    Value,
)
from spmdcheck.rules.model import OpRule, ParamRole

Arg = tuple[str | None, Value, cst.BaseExpression]


@dataclass
class Bound:
    """Arguments by parameter name (a variadic parameter holds a list)."""

    values: dict[str, list[tuple[Value, cst.BaseExpression]]]
    starred: bool = False  # a `*args` the checker could not expand: the variadic parameter's list is partial

    def get(self, name: str) -> Value | None:
        items = self.values.get(name)
        return items[0][0] if items else None

    def node(self, name: str) -> cst.BaseExpression | None:
        items = self.values.get(name)
        return items[0][1] if items else None

    def literal(self, rule: OpRule, name: str) -> object:
        """The literal value of an argument, or the stub's default when it was not passed."""
        value = self.get(name)
        if value is None:
            param = rule.param(name)
            return param.default if param is not None else None
        if isinstance(value, Literal):
            return value.value
        if isinstance(value, Seq) and all(isinstance(i, Literal) for i in value.items):
            return tuple(i.value for i in value.items)  # type: ignore[attr-defined]
        return _NOT_LITERAL

    def all(self, name: str) -> list[tuple[Value, cst.BaseExpression]]:
        return self.values.get(name, [])


_NOT_LITERAL = object()
NOT_LITERAL = _NOT_LITERAL


def bind(rule: OpRule, args: list[Arg]) -> Bound:
    values: dict[str, list[tuple[Value, cst.BaseExpression]]] = {}
    positional = [p for p in rule.params if p.positional and not p.variadic]
    variadic = next((p for p in rule.params if p.variadic), None)
    i = 0
    starred = False
    for keyword, value, node in args:
        if keyword is None:
            if i < len(positional):
                values.setdefault(positional[i].name, []).append((value, node))
                i += 1
            elif variadic is not None:
                values.setdefault(variadic.name, []).append((value, node))
            continue
        if keyword == "*":
            starred = True
            continue
        param = rule.param(keyword)
        if param is not None and param.keyword:
            values.setdefault(keyword, []).append((value, node))
    return Bound(values, starred)


@dataclass
class Slot:
    """One operand of an op: a tensor, a typed Scalar, or the weak scalar marker."""

    value: TensorValue | ScalarValue | None  # None = a Python number (weak scalar)
    node: cst.BaseExpression
    param: str
    divisor: bool = False


def has_unknown_operand(rule: OpRule, bound: Bound, exclude: tuple[str, ...] = ("out",)) -> bool:
    """Is a value we cannot model passed where a tensor may go? Then the result's type is unknown."""
    for param in rule.params:
        if param.name in exclude or param.role is ParamRole.OTHER:
            continue
        for value, node in bound.all(param.name):
            for item, _ in _flatten(value, node, param.role):
                if isinstance(item, Unknown) or (isinstance(item, TensorValue) and item.opaque):
                    return True
    return False


def operand_slots(rule: OpRule, bound: Bound, exclude: tuple[str, ...] = ("out",)) -> list[Slot]:
    slots: list[Slot] = []
    for param in rule.params:
        if param.name in exclude or param.role is ParamRole.OTHER:
            if param.role is ParamRole.OTHER:
                for value, node in bound.all(param.name):
                    if isinstance(value, ScalarValue):
                        slots.append(Slot(value, node, param.name))
            continue
        divisor = param.name in rule.divisors
        for value, node in bound.all(param.name):
            for item, item_node in _flatten(value, node, param.role):
                if isinstance(item, (TensorValue, ScalarValue)):
                    slots.append(Slot(item, item_node, param.name, divisor))
                elif param.role is ParamRole.TENSOR_OR_NUMBER and (
                    isinstance(item, PyNumber)
                    or (
                        isinstance(item, Literal)
                        and isinstance(item.value, (int, float, complex))
                        and not isinstance(item.value, bool)
                    )
                ):
                    slots.append(Slot(None, item_node, param.name, divisor))
    return slots


def _flatten(value: Value, node: cst.BaseExpression, role: ParamRole) -> list[tuple[Value, cst.BaseExpression]]:
    if role is ParamRole.TENSORS:
        if isinstance(value, Seq):
            elements = getattr(node, "elements", None)
            nodes = (
                [e.value for e in elements]
                if elements and len(elements) == len(value.items)
                else [node] * len(value.items)
            )
            return list(zip(value.items, nodes))
        if isinstance(value, Homogeneous):
            return [(value.item, node)]
    return [(value, node)]

"""What a *writer* root wrote (roots.py), described the same way in every run of the same program.

A writer changes state later roots read: it attaches a module contract, narrows a config field, or teaches a
file an axis name. A selective run (incremental.py) runs every writer again; when the edit reached one, the
run stands only if each writer wrote what it wrote before, described here: classes by file and qualified
name, values by their structure (never by object identity or memory address). A value this module cannot
describe is None, and a writer holding one makes such an edit run the whole program, as before.
"""

from __future__ import annotations

from typing import Any

from spmdcheck.analysis.values import (
    ClassValue,
    ContractValue,
    DictValue,
    LayoutChoice,
    LayoutValue,
    Literal,
    Seq,
    TypeValue,
    Unknown,
)

_PLAIN = (bool, int, float, complex, str, bytes)  # constants whose repr is the same in every run


def class_name(cls: object) -> str | None:
    """`path:Outer.Inner` for a class of a checked file."""
    if not isinstance(cls, ClassValue):
        return None
    names = []
    node: Any = cls
    while isinstance(node, ClassValue):
        names.append(node.name)
        node = node.outer
    ctx = getattr(cls.scope, "ctx", None)
    path = getattr(ctx, "path", None)
    return f"{path}:{'.'.join(reversed(names))}" if isinstance(path, str) else None


def describe(value: object) -> str | None:
    """A value's structure as text, the same in every run; None for what this does not follow."""
    if isinstance(value, Literal):
        plain = value.value is None or value.value is Ellipsis or type(value.value) in _PLAIN
        return f"lit:{type(value).__name__}:{value.value!r}" if plain else None
    if isinstance(value, TypeValue):
        # str() names kind and shard dim; a pending sum's contraction site it leaves out: not followed
        return f"type:{value.type}" if value.type.pending is None else None
    if isinstance(value, Unknown):
        return "unknown"
    if isinstance(value, LayoutValue):
        return _joined("layout", value.parts)
    if isinstance(value, LayoutChoice):
        return _joined("choice", value.options)
    if isinstance(value, Seq):
        return _joined("list" if value.is_list else "tuple", value.items)
    if isinstance(value, DictValue):
        parts = []
        for key, item, _ in value.items:
            k, v = describe(key), describe(item)
            if k is None or v is None:
                return None
            parts.append(f"{k}:{v}")
        return "dict(" + ",".join(parts) + ")"
    if isinstance(value, ContractValue):
        parts = [repr(value.rule)]
        for role, item, _ in value.fields:
            described = describe(item)
            if described is None:
                return None
            parts.append(f"{role}={described}")
        return "contract(" + ",".join(parts) + ")"
    if isinstance(value, ClassValue):
        return class_name(value)
    return None


def _joined(kind: str, items: tuple) -> str | None:
    parts = [describe(item) for item in items]
    if any(p is None for p in parts):
        return None
    return f"{kind}(" + ",".join(parts) + ")"  # type: ignore[arg-type]

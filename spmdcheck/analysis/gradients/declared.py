"""Parameters whose local SPMD type the program declares, in the gradient walk: spmd_types' annotations read
through the stubs' rules (`@spmd_api("assert_type")`, `@spmd_api("mutate_type")`, the type constants
`LocalType["R"]` and `S(d)`'s `@spmd_api("shard_type")`), never by name.

A parameter declared with type T on an axis has the dual gradient type there (spmd_types' duality, what
`reveal_spmd_type` shows: lattice `gradient_type`):
- R: P, a pending sum. backward() leaves it pending on the axes the data is split over (as for an undeclared
  parameter: sync.backward); on an axis the data is not split over nothing is known, and nothing is said;
- I: I. The module itself made the gradient whole (its forward converts I -> R, whose backward all-reduces),
  so backward() leaves no pending sum on that axis;
- V or S(d): V. Each rank holds its own block; its gradient is its own, not a sum (as Megatron's
  `tensor_model_parallel` mark says on tp).
(sync.backward reads `Param.declared` against sync.NO_PENDING_SUM.)
Without the rules, an annotation of a parameter was a library call receiving it: the parameter escaped and
the walk said nothing of its gradient. With them the annotation returns the parameter, declared.

A declaration the walk cannot read (a type dict built elsewhere, an axis it cannot name, a partition spec)
leaves the parameter escaped, as any library call given it does (sync.forget_value): never guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from spmdcheck.analysis.gradients import sync
from spmdcheck.analysis.gradients.state import DeclaredKind, Group, ModuleObj, Param, Qual, argument

if TYPE_CHECKING:
    from spmdcheck.analysis.gradients.walker import Walker

def call(walker: Walker, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    """An spmd_types annotation call (NotImplemented: not one)."""
    rule = walker.ctx.registry.lookup(name)
    api = rule.spmd_api if rule is not None else None
    if api == "shard_type":
        return DeclaredKind("S")
    if api == "assert_type" and args:
        value = args[0][0]
        if isinstance(value, Param):
            read = [_type_dict(walker, types) for types, _ in args[1:]]
            if not read or any(types is None for types in read) or "partition_spec" in kwargs:
                sync.forget_value(walker, value)  # a declaration not read: what it says of the gradient is unknown
            else:
                for types in read:
                    value.declared.update(types)
        return value
    if api == "mutate_type" and args:
        value = args[0][0]
        axis = _axis(argument(args, kwargs, 1, "axis")[0])
        dst = kind_of(walker, argument(args, kwargs, 99, "dst")[0])
        if isinstance(value, Param):
            if axis is not None and dst is not None:
                value.declared[axis] = dst
            else:
                value.declared.clear()  # changed in a way the walk cannot read: no longer known
        return value
    return NotImplemented


def method(walker: Walker, wrapper: ModuleObj, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    """No wrapper of its own."""
    return NotImplemented


def kind_of(walker: Walker, value: Any) -> str | None:
    """The letter of a type the walk evaluated: a stub's type constant (`spmd_types.I`), or `S(d)`."""
    if isinstance(value, DeclaredKind):
        return value.kind
    if isinstance(value, Qual):
        rule = walker.ctx.registry.lookup(value.name)
        return rule.const_type if rule is not None else None
    return None


def _type_dict(walker: Walker, types: Any) -> dict[str, str] | None:
    """`{"tp": I, dp_group: R}`: each axis with its kind; None when an axis or a kind cannot be read."""
    if type(types) is not dict:
        return None
    out: dict[str, str] = {}
    for key, item in types.items():
        axis, kind = _axis(key), kind_of(walker, item)
        if axis is None or kind is None:
            return None
        out[axis] = kind
    return out


def _axis(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Group):
        return value.axis
    return None

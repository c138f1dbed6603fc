"""Read SPMD type expressions: `{"tp": V}`, `R`, `S(0)`, `"tp: V"`, `Annotated[T, ...]`, `Local["..."]`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spmdcheck.analysis.values import (
    DictValue,
    GroupValue,
    Literal,
    MeshValue,
    ModuleRef,
    Seq,
    TensorValue,
    TypeValue,
    Value,
)
from spmdcheck.lattice import AxisType, Kind
from spmdcheck.rules.typespec import TypeSpecError, parse_type_spec


@dataclass(frozen=True)
class TypeDict:
    """An asserted type: explicit axes, and an optional bare type for the rest of the mesh."""

    axes: dict[str, AxisType]
    bare: AxisType | None = None
    # Some keys or types could not be read statically (an imported enum member, a computed value): those
    # axes stay unknown, and a bare type cannot tell which mesh axes remain for it to fill.
    partial: bool = False


class TypeExprError(ValueError):
    pass


def axis_name(value: Value) -> str | None:
    """The mesh axis a value names: a string, a process group, a 1-D mesh."""
    if isinstance(value, Literal) and isinstance(value.value, str):
        return value.value
    if isinstance(value, GroupValue):
        return value.axis
    if isinstance(value, MeshValue) and len(value.axes) == 1:
        return value.axes[0]
    return None


def type_dict(value: Value, known: Callable[[str], bool] | None = None) -> TypeDict:
    """A dict literal of axis -> type, a bare type, or a spec string.

    `known(qualname)`: whether an imported name is one the stubs describe (then it is not an axis or a
    type if it did not resolve to one, e.g. a bare `S`); other imported names are unreadable, silently.
    """
    if isinstance(value, TypeValue):
        return TypeDict({}, value.type)
    if isinstance(value, Literal) and isinstance(value.value, str):
        try:
            return TypeDict(parse_type_spec(value.value))
        except TypeSpecError as exc:
            raise TypeExprError(str(exc)) from exc
    if isinstance(value, DictValue):
        axes: dict[str, AxisType] = {}
        partial = False
        for key, item, _node in value.items:
            name = axis_name(key)
            if name is None:
                if not unreadable(key, known):
                    raise TypeExprError("a type dict key must be an axis name or a process group")
                partial = True
                continue
            if not isinstance(item, TypeValue):
                if not unreadable(item, known):
                    raise TypeExprError(f"the type of axis {name!r} is not R, I, V, P or S(d)")
                partial = True
                continue
            if name in axes:
                raise TypeExprError(f"axis {name!r} is given twice")
            axes[name] = item.type
        return TypeDict(axes, partial=partial)
    raise TypeExprError('not an SPMD type: expected a dict like {"tp": V}, a type, or a spec string')


def unreadable(value: Value, known: Callable[[str], bool] | None = None) -> bool:
    """A value the checker cannot see statically (not one it sees and knows to be wrong): gradual, silent."""
    if isinstance(value, ModuleRef):
        return known is None or not known(value.qualname)
    return not isinstance(value, (Literal, TypeValue, TensorValue, DictValue, Seq))


def merge_type_dicts(parts: list[TypeDict]) -> TypeDict:
    axes: dict[str, AxisType] = {}
    bare: AxisType | None = None
    partial = any(part.partial for part in parts)
    for part in parts:
        if part.bare is not None:
            if bare is not None:
                raise TypeExprError("at most one bare type may be given")
            bare = part.bare
        for axis, t in part.axes.items():
            if axis in axes and axes[axis] != t:
                have = axes[axis]
                if have.kind is t.kind is Kind.V and (have.shard is None or t.shard is None):
                    # V in a dict and S(d) from a PartitionSpec: the spec refines V to its dim
                    axes[axis] = t if t.shard is not None else have
                    continue
                raise TypeExprError(f"axis {axis!r} is given two different types")
            axes[axis] = t
    return TypeDict(axes, bare, partial)



def group_parameter_axis(param: str) -> str:
    """The axis a ProcessGroup parameter spans, when the caller is not known: opaque but consistent.

    Within one function, two uses of the parameter `group` are the same axis `<group>`; it is no axis of
    the mesh (its name is unknown), so no mesh check applies to it.
    """
    return f"<{param}>"


def is_opaque_axis(axis: str) -> bool:
    return axis.startswith("<")


def group_parameter(name: str, annotation: str | None) -> GroupValue | None:
    """A parameter annotated as a ProcessGroup (`group: dist.ProcessGroup`) in a function checked alone."""
    if annotation is not None and "ProcessGroup" in annotation:
        return GroupValue(group_parameter_axis(name))
    return None

"""Transfer functions: how a call of each kind of rule acts on abstract values.

One function per kind of rule (`OpRule.kind`), registered in `TRANSFER`, as JAX registers one
abstract-evaluation rule per primitive. Each sees the narrow `Analysis` interface and the call's
bound arguments, returns the call's value and announces its effects through the interface; the
interpreter alone applies and joins them. Ops and collectives have their own modules (ops.py,
comms.py, spmd_api.py); the small kinds are here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import libcst as cst

from spmdcheck.analysis import comms, layouts, ops, spmd_api
from spmdcheck.analysis.binding import Arg, Bound
from spmdcheck.analysis.context import Analysis
from spmdcheck.analysis.dtensor import api as dtensor_api
from spmdcheck.analysis.typeexpr import axis_name
from spmdcheck.analysis.values import (
    NUMBER,
    RANK,
    UNKNOWN,
    Assumed,
    Chain,
    ContextValue,
    DictValue,
    DimSize,
    GroupValue,
    Homogeneous,
    Literal,
    MembersValue,
    MeshValue,
    RankValue,
    Seq,
    ShapeValue,
    TensorValue,
    Value,
)
from spmdcheck.lattice import AxisType, GradState, Kind, Linearity, SpmdType
from spmdcheck.rules.model import OpRule, Returns

Transfer = Callable[[Analysis, OpRule, Bound, list[Arg], cst.CSTNode], Value]


def _context(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    payload = bound.get(rule.params[0].name) if rule.params else None
    if rule.context == "mesh":
        payload = _mesh_of(payload)
    return ContextValue(rule.context or "", payload or UNKNOWN)


def _spmd_api(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    handler = spmd_api.HANDLERS.get(rule.spmd_api or "")
    return handler(a, rule, bound, node, args) if handler is not None else UNKNOWN  # type: ignore[arg-type]


def _process_group(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return GroupValue(rule.process_group_axis or "")


def _mesh_factory(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    names = bound.literal(rule, rule.mesh_factory_names or "")
    if isinstance(names, tuple) and all(isinstance(n, str) for n in names):
        log = a.ctx.program.log
        if log is not None and not a.ctx.known_axes.issuperset(names):
            log.wrote_shared(("axes", a.ctx.path, " ".join(sorted(names))))  # valid in the file from now on
        a.ctx.known_axes.update(names)
        return MeshValue(names)
    return UNKNOWN


def _mesh_group(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    name = bound.literal(rule, rule.mesh_group_param or "")
    mesh = bound.get(rule.params[0].name) if rule.params else None
    if isinstance(name, str):
        return GroupValue(name)
    if name is None and isinstance(mesh, MeshValue) and len(mesh.axes) == 1:
        return GroupValue(mesh.axes[0])
    return UNKNOWN


def _constant_test(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return Literal(bool(args) and isinstance(args[0][1], Literal))


def _container(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    modules = bound.get(rule.container_param or "")
    return modules if isinstance(modules, (Seq, Homogeneous, DictValue)) else UNKNOWN


def _sequential(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return Chain(tuple(v for v, _ in bound.all(rule.sequential_param or "")))


def _rank_of(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    receiver = bound.get(rule.params[0].name) if rule.params else None
    if isinstance(receiver, TensorValue) and receiver.rank is not None:
        return Literal(receiver.rank)
    return _passthrough(a, rule, bound, args, node)


def _shape_of(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    """`x.shape`, `x.size()`: the tensor's sizes; `x.size(d)` with a constant `d`: the size of that dim."""
    receiver = bound.get(rule.params[0].name) if rule.params else None
    if not isinstance(receiver, TensorValue):
        return _passthrough(a, rule, bound, args, node)
    dims = [p for p in rule.params[1:] if p.positional]
    dim = bound.get(dims[0].name) if dims else None
    if dim is None:
        return ShapeValue(receiver)
    if isinstance(dim, Literal) and isinstance(dim.value, int) and not isinstance(dim.value, bool):
        return DimSize(receiver, dim.value)
    return _passthrough(a, rule, bound, args, node)


def _group_members(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return MembersValue(_group_axis(bound.get(rule.group_members_param or "")))


def _passthrough(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    if rule.rank_dependent:
        return _rank_value(rule, bound)
    return NUMBER if rule.returns is Returns.NUMBER else UNKNOWN


def _type_constant(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return UNKNOWN  # calling a type constant is not an annotation


def _opaque(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return TensorValue() if rule.returns is Returns.TENSOR else UNKNOWN


def _factory(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    requires = bound.literal(rule, "requires_grad") is True
    grad = GradState.YES if requires and a.grad_enabled else GradState.NO
    kind = rule.factory
    rank = _shape_rank(rule, bound)
    if kind == "like":
        source = next((v for _, v, _ in args if isinstance(v, TensorValue)), None)
        if source is None:
            return TensorValue(SpmdType(), grad, None)
        plain = SpmdType(
            {ax: AxisType(t.kind, shard=t.shard) for ax, t in source.type.items() if t.kind is not Kind.P}
            | {ax: AxisType(Kind.R) for ax, t in source.type.items() if t.kind is Kind.P}
        )
        return TensorValue(plain if rule.linearity is Linearity.NONLINEAR else source.type, grad, source.rank)
    # a factory's result is a fresh leaf of the autograd graph: a raw collective writing into it cuts no history
    if kind == "random":
        return TensorValue(SpmdType(), grad, rank, leaf=True)
    return replace(a.factory_tensor(rank, grad, typed=True), leaf=True)


def _collective(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return comms.apply_collective(a, rule, bound, node)


def _raw(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return comms.apply_raw(a, rule, bound, node)


def _mapping(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return comms.apply_mapping(a, rule, bound, node)


def _assumed(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return Assumed(rule.assumed[0] if rule.assumed else None)


def _declared_data(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return layouts.build(a, rule, args, node)


def _op(a: Analysis, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    return ops.apply_op(a, rule, bound, node)


TRANSFER: dict[str, Transfer] = {
    "context": _context,
    "spmd_api": _spmd_api,
    "dtensor_api": dtensor_api.transfer,  # type: ignore[dict-item]
    "collective": _collective,
    "raw_collective": _raw,
    "mapping": _mapping,
    "process_group": _process_group,
    "mesh_factory": _mesh_factory,
    "mesh_group": _mesh_group,
    "constant_test": _constant_test,
    "container": _container,
    "sequential": _sequential,
    "rank_of": _rank_of,
    "shape_of": _shape_of,
    "group_members": _group_members,
    "passthrough": _passthrough,
    "type_constant": _type_constant,
    "factory": _factory,
    "opaque": _opaque,
    "assumed": _assumed,
    "layout": _declared_data,
    "module_contract": _declared_data,
    "op": _op,
}


# ----------------------------------------------------------------------------- helpers


def _mesh_of(value: Value | None) -> Value:
    if isinstance(value, MeshValue):
        return value
    if isinstance(value, DictValue):
        names = tuple(k.value for k, _, _ in value.items if isinstance(k, Literal) and isinstance(k.value, str))
        return MeshValue(names) if names else UNKNOWN
    if isinstance(value, Seq):
        names = tuple(i.axis for i in value.items if isinstance(i, GroupValue))
        return MeshValue(names) if names and len(names) == len(value.items) else UNKNOWN
    return UNKNOWN


def _group_axis(group: Value | None) -> str | None:
    if group is None or (isinstance(group, Literal) and group.value is None):
        return None
    return axis_name(group)


def _rank_value(rule: OpRule, bound: Bound) -> RankValue:
    """Which axes a rank query differs along: fixed by its stub, or the axis of its group argument."""
    if rule.rank_axis is not None:
        return RankValue(frozenset({rule.rank_axis}))
    if rule.rank_group_param is not None:
        group = bound.get(rule.rank_group_param)
        if group is None or (isinstance(group, Literal) and group.value is None):
            receiver = bound.get(rule.params[0].name) if rule.params else None
            if isinstance(receiver, MeshValue) and len(receiver.axes) == 1:
                return RankValue(frozenset(receiver.axes))  # `mesh["tp"].get_local_rank()`: the rank along tp
            return RANK  # the default group: the global rank
        axis = _group_axis(group)
        if axis is None and isinstance(group, Literal) and isinstance(group.value, str):
            axis = group.value  # a mesh dim named by string
        return RankValue(frozenset({axis})) if axis is not None else RankValue(frozenset())
    return RANK


def _shape_rank(rule: OpRule, bound: Bound) -> int | None:
    """A factory's rank: fixed by its stub, or the length of its size argument(s)."""
    if rule.factory_rank is not None:
        return rule.factory_rank
    if rule.factory_size is None:
        return None
    given = bound.all(rule.factory_size)
    param = rule.param(rule.factory_size)
    if param is not None and param.variadic and not (len(given) == 1 and isinstance(given[0][0], Seq)):
        return len(given) if given else None
    if len(given) == 1 and isinstance(given[0][0], Seq):
        return len(given[0][0].items)
    return None

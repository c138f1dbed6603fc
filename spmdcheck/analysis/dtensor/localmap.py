"""`torch.distributed.tensor.experimental.local_map`: local code between two DTensor boundaries.

`local_map(func, out_placements, in_placements, in_grad_placements, device_mesh, redistribute_inputs)` wraps
`func`; a call of the wrapper hands each DTensor argument to `func` as `to_local(grad_placements=...)` of its
`in_placements` (the gradient placement is `in_grad_placements[i]`, by default the forward one: a
Replicate input is Invariant in the body unless its gradient is declared Partial), runs the body as local
code, and wraps the result with `DTensor.from_local(out, mesh, out_placements)` (checked as from_local is).
The decorator form (`@local_map(out_placements=..., in_placements=...)`) types the parameters of the body
checked on its own (`decorations`).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from spmdcheck.analysis.binding import Arg, Bound
from spmdcheck.analysis.dtensor.boundary import check_local, marked, mesh_or_configured
from spmdcheck.analysis.dtensor.values import (
    DTensorValue,
    Placements,
    PlacementValue,
    is_none,
    local_type,
    make_dtensor,
    mesh_dims,
    read_placements,
    to_local,
)
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.values import (
    UNKNOWN,
    DictValue,
    FunctionValue,
    Literal,
    MeshValue,
    Seq,
    TensorValue,
    TypeValue,
    Value,
)
from spmdcheck.rules.model import OpRule


@dataclass(frozen=True)
class DTensorLocalMap(Value):
    """`local_map(...)`: its arguments as read; `in_grads` holds each value `in_grad_placements` may have (a
    conditional argument the checker cannot decide gives both arms); `func` is None until it wraps one."""

    func: Value | None
    out_placements: Value
    in_placements: Value
    in_grads: tuple[Value, ...]
    mesh: MeshValue | None
    redistribute_inputs: bool = False


def local_map(interp: Engine, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`local_map(func, out_placements, ...)`, or without `func`: the decorator it makes."""
    func = bound.get("func")
    mesh_value = bound.get("device_mesh")
    wrapper = DTensorLocalMap(
        None if is_none(func) else func,
        bound.get("out_placements") or UNKNOWN,
        bound.get("in_placements") or Literal(None),
        _options(interp, bound, "in_grad_placements"),
        mesh_value if isinstance(mesh_value, MeshValue) else None,
        bound.literal(rule, "redistribute_inputs") is True,
    )
    return wrapper


def _options(interp: Engine, bound: Bound, name: str) -> tuple[Value, ...]:
    """An argument's possible values: an `a if flag else b` the checker cannot decide is both arms."""
    value = bound.get(name)
    if value is None:
        return (Literal(None),)
    arg = bound.node(name)
    if value is UNKNOWN and isinstance(arg, cst.IfExp):
        return (interp.eval(arg.body), interp.eval(arg.orelse))
    return (value,)


def call(interp: Engine, wrapper: DTensorLocalMap, args: list[Arg], node: cst.CSTNode) -> Value:
    """A call of the wrapper (or of the decorator on a function: the wrapper)."""
    if wrapper.func is None:
        if len(args) == 1 and isinstance(args[0][1], FunctionValue):
            return DTensorLocalMap(
                args[0][1],
                wrapper.out_placements,
                wrapper.in_placements,
                wrapper.in_grads,
                wrapper.mesh,
                wrapper.redistribute_inputs,
            )
        return UNKNOWN
    if not isinstance(wrapper.func, FunctionValue) or any(k is not None for k, _, _ in args):
        return UNKNOWN
    results = [_run(interp, wrapper, args, grads, node) for grads in wrapper.in_grads]
    first = results[0]
    return first if all(r == first for r in results) else UNKNOWN


def _run(interp: Engine, wrapper: DTensorLocalMap, args: list[Arg], grads_option: Value, node: cst.CSTNode) -> Value:
    dtensor = next((v for _, v, _ in args if isinstance(v, DTensorValue)), None)
    mesh = wrapper.mesh or (dtensor.mesh if dtensor is not None else None)
    if mesh is None:
        mesh = mesh_or_configured(interp, None, None)
    if mesh is None:
        return UNKNOWN
    ndim = len(mesh_dims(mesh))
    ins = _per_input(wrapper.in_placements, len(args))
    grads = _per_input(grads_option, len(args))
    local_args: list[Arg] = []
    for i, (key, value, arg_node) in enumerate(args):
        if isinstance(value, DTensorValue):
            given = read_placements(ins[i], ndim) if ins[i] is not None else value.placements
            forward = given if given is not None else (None,) * ndim
            if not wrapper.redistribute_inputs and any(
                p is not None and q is not None and p != q for p, q in zip(forward, value.placements)
            ):
                forward = (None,) * ndim  # PyTorch refuses a DTensor laid out otherwise: not followed
            declared = read_placements(grads[i], ndim) if grads[i] is not None else None
            if grads[i] is not None and declared is None:
                declared = (None,) * ndim
            entering = value.with_placements(forward)
            value = marked(interp, to_local(entering, declared), entering, declared, node, "local_map")
        local_args.append((key, value, arg_node))
    result = interp.call(wrapper.func, local_args, node)  # type: ignore[arg-type]
    return _wrap(interp, result, wrapper.out_placements, mesh, node)


def _per_input(value: Value, count: int) -> list[Value | None]:
    """`in_placements` / `in_grad_placements`: one entry per input (None where it gives none)."""
    if isinstance(value, Seq) and len(value.items) == count:
        return [None if is_none(item) else item for item in value.items]
    if is_none(value):
        return [None] * count
    return [Literal("?")] * count  # unreadable: every input's placements unknown


def _wrap(interp: Engine, result: Value, out: Value, mesh: MeshValue, node: cst.CSTNode) -> Value:
    """The body's result wrapped as DTensors by `out_placements` (None: the value is returned as it is)."""
    ndim = len(mesh_dims(mesh))
    if is_none(out):
        return result
    if isinstance(result, Seq) and isinstance(out, Seq) and len(out.items) == len(result.items):
        if not all(isinstance(item, PlacementValue) for item in out.items):
            return Seq(tuple(_wrap(interp, r, o, mesh, node) for r, o in zip(result.items, out.items)))
    placements = read_placements(out, ndim)
    if placements is None:
        return UNKNOWN
    if isinstance(result, TensorValue) and not result.opaque:
        check_local(interp, result, mesh_dims(mesh), placements, node, "`local_map` out_placements")
    rank, grad = (result.rank, result.grad) if isinstance(result, TensorValue) else (None, None)
    return make_dtensor(mesh, placements, rank=rank, grad=grad) if grad is not None else make_dtensor(mesh, placements)


def decorations(interp: Engine, call_args: list[cst.Arg]) -> tuple[list[Value] | None, Value | None]:
    """`@local_map(out_placements=..., in_placements=..., in_grad_placements=...)` on a function checked on
    its own: its parameters' local types (as type dicts, like spmd_types' `in_types`) and no output check."""
    values = {a.keyword.value: interp.eval(a.value) for a in call_args if a.keyword is not None}
    mesh = values.get("device_mesh")
    mesh = mesh if isinstance(mesh, MeshValue) else mesh_or_configured(interp, None, None)
    ins = values.get("in_placements")
    if mesh is None or not isinstance(ins, Seq):
        return None, None
    ndim = len(mesh_dims(mesh))
    grads = _per_input(values.get("in_grad_placements", Literal(None)), len(ins.items))
    types: list[Value] = []
    for i, item in enumerate(ins.items):
        forward = read_placements(item, ndim) if not is_none(item) else None
        declared: Placements | None = read_placements(grads[i], ndim) if grads[i] is not None else None
        if forward is None:
            types.append(Literal(None))
            continue
        t = local_type(make_dtensor(mesh, forward), declared)
        types.append(DictValue(tuple((Literal(a), TypeValue(x), cst.Name(a)) for a, x in t.items())))
    return types, None

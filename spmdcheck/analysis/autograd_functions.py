"""A program's own `torch.autograd.Function`: what `Fn.apply(...)` does, read from its forward and backward.

PyTorch runs a Function's `forward` (and, without `create_graph`, its `backward`) with gradients disabled,
and records the call as one node whose gradient is what `backward` returns. So a raw collective inside
them cuts no history (no SPMD306): the Function is the autograd-aware collective. Which one it is follows
from the two read together (type_system.md 3.6 and 6): a forward all-reduce with an identity backward is
Megatron's `reduce_from_tensor_model_parallel_region` (`all_reduce`, P -> I); with an all-reduce backward
it is `all_reduce` P -> R; an identity forward with an all-reduce backward is `copy_to_...` (`convert`,
I -> R); an all-gather forward is `all_gather` to R or I by whether its backward reduces; a reduction
followed by keeping this rank's chunk is `reduce_scatter`; keeping this rank's chunk alone is `convert`
I -> V. The Function found to be one of these is typed as that call, exactly like the stubbed Megatron
mapping (the same checks of its input, the same output). Anything else (several collectives or axes, a
group the checker cannot name, a fused kernel) runs its forward as written and gives what forward returns,
without SPMD306.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.comms import REDUCING, transition
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.inline import call_function
from spmdcheck.analysis.values import UNKNOWN, UNNAMED_GROUP, ClassValue, FunctionValue, TensorValue, Value
from spmdcheck.diagnostics.violations.collectives import RawCollectiveOnAutogradPath
from spmdcheck.lattice import AxisType, GradState, Kind, SpmdType


@dataclass(frozen=True)
class FunctionApply(Value):
    """`Fn.apply` of a class of the program with its own `forward` and `backward` (an autograd Function)."""

    cls: ClassValue
    forward: FunctionValue
    backward: FunctionValue


def apply_of(cls: ClassValue) -> FunctionApply | None:
    """`cls.apply` when `cls` is an autograd Function written in the program (forward and backward defined)."""
    forward, backward = cls.lookup("forward"), cls.lookup("backward")
    if isinstance(forward, FunctionValue) and isinstance(backward, FunctionValue):
        return FunctionApply(cls, forward, backward)
    return None


def runs_without_grad(cls: ClassValue, method: str) -> bool:
    """`cls.method` is an autograd Function's forward or backward, which PyTorch runs without recording history."""
    return method in ("forward", "backward") and apply_of(cls) is not None


def cuts_history(finding: Finding) -> bool:
    """The finding is SPMD306 (a raw collective cutting autograd history): not one inside a Function."""
    return finding.code == RawCollectiveOnAutogradPath.code


@dataclass(frozen=True)
class _Mapping:
    """The spmd_types call a Function stands for, on one axis."""

    op: str
    axis: str
    src: AxisType
    dst: AxisType


def call_apply(interp: Engine, fn: FunctionApply, args: list[Arg], node: cst.Call) -> Value:
    """`Fn.apply(*args)`: typed as the collective its forward and backward make together, else by its forward."""
    tensor_args = [(value, arg_node) for _, value, arg_node in args if isinstance(value, TensorValue)]
    forward_calls, _ = _probe(interp, fn.forward, args)
    mapping = _classify(interp, fn, args, forward_calls) if tensor_args else None
    if mapping is not None:
        x, x_node = tensor_args[0]
        return transition(
            interp,
            mapping.op,
            x,
            x_node,
            mapping.axis,
            mapping.src,
            mapping.dst,
            node,
            implicit_partial=mapping.op in REDUCING,
        )
    # forward as written (as before this module: the caller's grad mode, so its ops type as they did), but
    # PyTorch runs it without gradients: a raw collective there cuts no history, so no SPMD306
    mark = interp.ctx.program.checkpoint()
    result = call_function(interp, fn.forward, args, node, receiver=UNKNOWN)
    for finding in interp.ctx.program.withdraw(mark):
        if not cuts_history(finding):
            interp.ctx.report(finding)
    return result


def _classify(
    interp: Engine, fn: FunctionApply, args: list[Arg], forward_calls: list[tuple[str, str | None]]
) -> _Mapping | None:
    """The collective `fn` is, from the collectives its forward and backward issue and what forward returns."""
    backward_args = [(None, TensorValue(SpmdType(), GradState.NO), None) for _ in _tensor_params(fn.backward)]
    backward_calls, _ = _probe(interp, fn.backward, backward_args)  # type: ignore[arg-type]
    axes = {axis for _, axis in forward_calls + backward_calls}
    if len(axes) != 1 or len(forward_calls) > 1 or len(backward_calls) > 1:
        return None  # a mapping is one collective each way; more (a cross entropy's statistics) is computation
    axis = next(iter(axes))
    if axis is None or axis == UNNAMED_GROUP or axis not in (interp.ctx.known_axes or interp.mesh):
        return None
    forward_kinds = {kind for kind, _ in forward_calls}
    backward_reduces = any(kind in REDUCING for kind, _ in backward_calls)
    R, I, P, V = (AxisType(k) for k in (Kind.R, Kind.I, Kind.P, Kind.V))
    if not forward_kinds:
        kept = _forward_type(interp, fn, args, axis, I)
        if kept is None:
            return None
        if kept.kind is Kind.V and not backward_reduces:
            return _Mapping("convert", axis, I, kept)  # this rank's chunk: Megatron's scatter
        if kept.kind is Kind.I and backward_reduces:
            return _Mapping("convert", axis, I, R)  # Megatron's copy_to: identity, backward all-reduce
        return None
    if forward_kinds == {"all_reduce"}:
        reduced = _forward_type(interp, fn, args, axis, P)
        if reduced is not None and reduced.kind is Kind.V:
            return _Mapping("reduce_scatter", axis, P, reduced)  # the sum, then this rank's chunk
        return _Mapping("all_reduce", axis, P, R if backward_reduces else I)
    if forward_kinds == {"reduce_scatter"}:
        return _Mapping("reduce_scatter", axis, P, _forward_type(interp, fn, args, axis, P) or V)
    if forward_kinds == {"all_gather"}:
        return _Mapping("all_gather", axis, V, R if backward_reduces else I)
    if forward_kinds == {"all_to_all"}:
        return _Mapping("all_to_all", axis, V, V)
    return None


def _forward_type(interp: Engine, fn: FunctionApply, args: list[Arg], axis: str, given: AxisType) -> AxisType | None:
    """What forward returns on `axis` when its first tensor argument is `given` there (None: not a tensor)."""
    probe_args = list(args)
    for i, (keyword, value, arg_node) in enumerate(args):
        if isinstance(value, TensorValue):
            probe_args[i] = (keyword, TensorValue(value.type.with_axis(axis, given), value.grad, value.rank), arg_node)
            break
    _, result = _probe(interp, fn.forward, probe_args)
    if isinstance(result, TensorValue) and axis in result.type:
        return result.type[axis]
    return None


def _probe(interp: Engine, func: FunctionValue, args: list[Arg]) -> tuple[list[tuple[str, str | None]], Value]:
    """Run `func` unchecked, gradients off, its writes to the caller's names discarded: the collectives it
    issues (kind, axis) and what it returns. Its collectives are not kept: the probe is not a call."""
    start = len(interp.collectives)
    saved = (interp.grad_enabled, interp.checking, interp.effects)
    interp.grad_enabled, interp.checking, interp.effects = False, False, []
    try:
        result = call_function(interp, func, args, func.node, receiver=UNKNOWN)
    finally:
        interp.grad_enabled, interp.checking, interp.effects = saved
        issued = interp.collectives[start:]
        del interp.collectives[start:]
    return [(_kind(api), axis) for api, axis, _ in issued], result


def _kind(api: str) -> str:
    """The collective an API name performs (`dist.all_reduce`, `reduce_scatter`, `dist.all_gather_into_tensor`)."""
    for kind in ("reduce_scatter", "all_reduce", "all_gather", "all_to_all"):
        if kind in api:
            return kind
    return api


def _tensor_params(fn: FunctionValue) -> list[str]:
    """The parameters of a static `backward(ctx, *grads)` after `ctx`."""
    params = [p.name.value for p in (*fn.node.params.posonly_params, *fn.node.params.params)]
    return params[1:]

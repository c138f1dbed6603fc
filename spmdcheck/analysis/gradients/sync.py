"""What backward(), the reductions, divisions and copies on gradients, and the optimizer step do to the gradient
state (state.py), and the findings they make (SPMD601/602/603/606)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import libcst as cst

from spmdcheck.analysis.gradients import accumulation
from spmdcheck.analysis.gradients.state import (
    AxisGrad,
    Bucket,
    Data,
    GradRef,
    Instance,
    ItemList,
    ModuleObj,
    Optimizer,
    Param,
    Partial,
    Synced,
    spoil,
)
from spmdcheck.diagnostics.violations.gradients import (
    DoubleGradientReduction,
    GradientAveragedTwice,
    GradientReductionWrongGroup,
    MissingGradientReduction,
)

if TYPE_CHECKING:
    from spmdcheck.analysis.gradients.walker import Walker

# Megatron's mark of a weight split over the tensor-parallel axis: each rank's gradient is its own block's
TENSOR_PARALLEL_MARK = "tensor_model_parallel"
# DeepSpeed's mark of an expert parameter: held by some ranks of the data-parallel group only
EXPERT_MARK = "allreduce"


def tensor_parallel_axis(mesh: tuple[str, ...]) -> str | None:
    """The axis Megatron's tensor-parallel group spans: `tp`, or the innermost of several (group_inference)."""
    if "tp" in mesh:
        return "tp"
    return mesh[-1] if len(mesh) >= 2 else None


def data_parallel_axis(mesh: tuple[str, ...]) -> str | None:
    """The axis DeepSpeed's data-parallel group spans (experts split inside it): `dp`, or a mesh's only axis."""
    if "dp" in mesh:
        return "dp"
    return mesh[0] if len(mesh) == 1 else None


def is_expert(param: Param) -> bool:
    return param.attrs.get(EXPERT_MARK, True) is False


# the declared types (declared.py) whose gradient has no pending sum on the axis: I's dual is I (the module made
# it whole), V's and S(d)'s is V (each rank's own)
NO_PENDING_SUM = frozenset({"I", "V", "S"})


def local_on(walker: Walker, param: Param, axis: str) -> bool:
    """Whether each rank of `axis` holds its own value of `param` (its gradient there is its own, not a sum)."""
    if param.attrs.get(TENSOR_PARALLEL_MARK) is True and axis == tensor_parallel_axis(walker.mesh):
        return True
    return is_expert(param)


def backward(walker: Walker, loss: Data, node: cst.CSTNode) -> None:
    """`loss.backward()`: every parameter of the models that made the loss gets its gradient on each axis the
    data is split over (a pending sum, or averaged already by a DistributedDataParallel wrapper)."""
    for model in loss.models:
        for _, param in model.named_parameters():
            if param.escaped:
                continue
            for axis in sorted(loss.shard_axes):
                if local_on(walker, param, axis) or param.declared.get(axis) in NO_PENDING_SUM:
                    continue
                divisions = tuple(n for a, n in loss.divisions if a == axis)
                grad = AxisGrad("pending", divisions=divisions)
                if model.ddp_axis == axis and accumulation.ddp_syncs(model):
                    grad = averaged_by_wrapper(walker, model.ddp_node, axis, divisions)  # type: ignore[arg-type]
                elif param.sharded_by is not None and axis in param.sharded_by[0] and param.sharded_sync:
                    grad = averaged_by_wrapper(walker, param.sharded_by[1], axis, divisions, FULLY_SHARD)
                # repeated backward() calls add into `.grad` (`accumulate`); hooks and no_sync(): accumulation.py
                walker.state.set(param, axis, accumulation.accumulate(walker, param, axis, grad, node, accumulate))
    accumulation.after_backward(walker, loss.models, node)  # hooks, and what `no_sync()` left pending


FULLY_SHARD = "`fully_shard` (FSDP2)"


def averaged_by_wrapper(
    walker: Walker,
    call: cst.CSTNode,
    axis: str,
    divisions: tuple,
    wrapper: str = "DistributedDataParallel",
    at: str = "during backward()",
) -> AxisGrad:
    """A gradient a wrapper averages over `axis` (made at `call`): DistributedDataParallel's and FSDP2's in
    backward(), Megatron's at `finish_grad_sync()`; a division by the axis size before it (`divisions`)
    averages twice."""
    if divisions:
        walker.report(GradientAveragedTwice(axis, by_ddp=True, wrapper=wrapper, at=at), divisions[0])
    return AxisGrad("summed", call, True, (*divisions, call), wrapper=wrapper)


def average_pending(walker: Walker, module: ModuleObj, axis: str, node: cst.CSTNode, wrapper: str, at: str) -> None:
    """A library wrapper's reduction at `node` (Megatron's `finish_grad_sync`, DeepSpeed's engine backward):
    every pending gradient of the module's parameters averaged over `axis`. An expert's is left to its own
    group; one reduced already stays (averaging equal values again leaves them as they are)."""
    walker.remember(node)
    for _, param in module.named_parameters():
        grad = walker.state.get(param, axis)
        if param.escaped or is_expert(param) or grad is None or grad.status != "pending":
            continue
        walker.state.set(param, axis, averaged_by_wrapper(walker, node, axis, grad.divisions, wrapper, at))


def accumulate(old: AxisGrad | None, new: AxisGrad) -> AxisGrad:
    """A backward() into a gradient that holds `old` (no zero_grad between): `+=`. Pending stays pending;
    a part reduced before is remembered (`synced_before`) when more is added to it."""
    if old is None:
        return new
    if old.status == "summed":
        # a plain sum (not an average, not DDP's): summing the whole buffer again counts that part once more
        plain = not old.by_ddp and len(old.divisions) <= len(new.divisions)
        return replace(new, synced_before=old.reduced_at if plain else None)
    if new.status == "summed":  # a DDP backward reduces the whole accumulated buffer
        return new
    return replace(old, synced_before=old.synced_before or new.synced_before)


def divide(walker: Walker, param: Param, axis: str, node: cst.CSTNode) -> None:
    grad = walker.state.get(param, axis)
    if grad is None:
        return
    if grad.divisions:
        first = grad.divisions[-1]
        by_ddp = grad.by_ddp and first is grad.reduced_at
        wrapper = grad.wrapper or "DistributedDataParallel"
        first_site = None if by_ddp else walker.site(first)
        walker.report(GradientAveragedTwice(axis, by_ddp=by_ddp, first=first_site, wrapper=wrapper), node)
    walker.state.set(param, axis, replace(grad, divisions=(*grad.divisions, node)))


def reduce(
    walker: Walker, param: Param, axis: str | None, average: bool, node: cst.CSTNode, api: str, operand: str
) -> None:
    """A sum (or average) of `param`'s gradient over the group of `axis` (None: a group the walk cannot place,
    after which nothing is known of the gradient)."""
    if axis is None:
        walker.state.forget(param)
        return
    if is_expert(param) and axis == data_parallel_axis(walker.mesh):
        walker.report(GradientReductionWrongGroup(api, operand, axis, f"{EXPERT_MARK} = False"), node)
        walker.state.forget(param)
        return
    grad = walker.state.get(param, axis)
    if grad is None:
        return
    if grad.status == "summed":
        first = None if grad.by_ddp or grad.reduced_at is None else walker.site(grad.reduced_at)
        wrapper = grad.wrapper or "DistributedDataParallel"
        walker.report(DoubleGradientReduction(api, operand, axis, grad.by_ddp, first, wrapper), node)
        return
    if grad.synced_before is not None and not average:
        accumulation.report_resummed(walker, param, axis, grad.synced_before, node, api)
        return
    reduced = AxisGrad("summed", node, False, grad.divisions)
    if average:
        reduced = replace(reduced, divisions=(*grad.divisions, node))
    walker.state.set(param, axis, reduced)


def apply_ops(walker: Walker, param: Param, ops: tuple | list) -> None:
    """The ops recorded on a copy of `param`'s gradient (a bucket, a divided value), applied to its state."""
    for op in ops:
        if op[0] == "div":
            divide(walker, param, op[1], op[2])
        elif op[0] == "reduce":
            reduce(walker, param, op[1], op[2], op[3], op[4], op[5])
        elif op[0] == "forget":
            walker.state.forget(param)


def copy_into(walker: Walker, target: GradRef, source: Any) -> None:
    """`grad.copy_(source)`: the gradient takes the values of `source` (its source gradient with ops applied)."""
    if isinstance(source, Synced) and source.index < len(source.bucket.sources):
        origin = source.bucket.sources[source.index]
        if isinstance(origin, GradRef) and origin.param is target.param:
            apply_ops(walker, target.param, [*origin.ops, *source.bucket.ops, *source.ops])
            return
    if isinstance(source, GradRef) and source.param is target.param:
        apply_ops(walker, target.param, source.ops)
        return
    walker.state.forget(target.param)


def reduce_value(
    walker: Walker, value: Any, axis: str | None, average: bool, node: cst.CSTNode, api: str, operand: str
) -> bool:
    """A collective on `value`: a gradient buffer is reduced in place, a bucket records it. False: not a gradient."""
    walker.remember(node)
    if isinstance(value, GradRef) and not value.ops:
        reduce(walker, value.param, axis, average, node, api, operand)
        return True
    if isinstance(value, Bucket):
        view = bucket_view(value)
        if view is not None:  # reduced in place: its copy back into `.grad` copies the reduced values
            reduce(walker, view.param, axis, average, node, api, operand)
        else:
            value.ops.append(("reduce", axis, average, node, api, operand))
        return True
    return False


def bucket_view(bucket: Bucket) -> GradRef | None:
    """The gradient buffer a one-tensor bucket is a view of (`_flatten_dense_tensors([g])` is `g.view(-1)`):
    an op on the bucket is an op on that buffer, once (not again when the bucket is copied back)."""
    if len(bucket.sources) == 1 and isinstance(bucket.sources[0], GradRef) and not bucket.sources[0].ops:
        return bucket.sources[0]
    return None


def divide_value(walker: Walker, value: Any, axis: str, node: cst.CSTNode) -> bool:
    walker.remember(node)
    if isinstance(value, GradRef) and not value.ops:
        divide(walker, value.param, axis, node)
        return True
    if isinstance(value, Bucket):
        view = bucket_view(value)
        if view is not None:
            divide(walker, view.param, axis, node)
        else:
            value.ops.append(("div", axis, node))
        return True
    return False


def checkpoint(
    walker: Walker, params: list[Param] | None, node: cst.CSTNode, reducing_call: tuple[str, str] | None = None
) -> None:
    """`optimizer.step()`: every gradient must be whole (no pending sum) on every axis. `reducing_call`: (axis,
    call) of a wrapper that reduces the optimizer's gradients over that axis in a call of its own (DeepSpeed's
    `engine.backward(loss)`): what is pending there did not go through it."""
    chosen = params if params is not None else list(walker.state.params.values())
    pending: dict[str, list[Param]] = {}
    for param in chosen:
        for axis in walker.state.axes_of(param):
            grad = walker.state.get(param, axis)
            if grad is not None and grad.status == "pending":
                pending.setdefault(axis, []).append(param)
    pending = accumulation.claim_unsynced(walker, pending, node)  # SPMD604: the last backward ran in no_sync()
    for axis, missing in sorted(pending.items()):
        names = tuple(dict.fromkeys(p.name for p in missing))
        unmatched, mark = _filters(walker, missing)
        if reducing_call is not None and reducing_call[0] == axis:
            call = reducing_call[1]
            walker.report(MissingGradientReduction(names, axis, reducing_call=call), node, call)
            continue
        switched = {p.skipped_by for p in missing}
        switch = switched.pop() if len(switched) == 1 else None
        if switch is not None:  # a library's reduction the config turned off: not a filter of the program's
            unmatched = None
            advice = f"{switch} = True  # e.g. TransformerConfig(..., {switch.rpartition('.')[2]}=True)"
        elif mark is not None and unmatched is not None:
            advice = f'getattr(param, "{mark}", False)'
        elif mark is not None:
            advice = f'setattr(param, "{mark}", True)'
        else:
            advice = f"for param in <these parameters>:\n    dist.all_reduce(param.grad, group=<the group of {axis!r}>)"
        walker.report(MissingGradientReduction(names, axis, unmatched, mark, switch), node, advice)


def _filters(walker: Walker, missing: list[Param]) -> tuple[str | None, str | None]:
    """The attribute a reduction loop selected by that no parameter carries, and the mark to set or select by."""
    carried = {name for p in walker.all_params() for name in p.attrs}
    unmatched = next((a for a in sorted(walker.tested_attrs) if a not in carried), None)
    on_all = set.intersection(*({n for n, v in p.attrs.items() if v is True} for p in missing))
    on_all -= {TENSOR_PARALLEL_MARK}
    if unmatched is not None:
        return unmatched, (sorted(on_all)[0] if on_all else None)
    tested = sorted(a for a in walker.tested_attrs if a in carried and a != TENSOR_PARALLEL_MARK)
    return None, (tested[0] if tested else None)


def forget_value(walker: Walker, value: Any) -> None:
    """A call the walk cannot follow received `value`: what is known of the gradients it reaches is dropped."""
    if isinstance(value, ModuleObj):
        for _, param in value.named_parameters():
            _escape(walker, param)
    elif isinstance(value, Param):
        _escape(walker, value)
    elif isinstance(value, GradRef):
        walker.state.forget(value.param)
    elif isinstance(value, Optimizer) and value.params is not None:
        for param in value.params:
            _escape(walker, param)
    elif isinstance(value, ItemList):
        for item in value.items:
            forget_value(walker, item)
        spoil(value)  # the code it reached may change it
    elif isinstance(value, tuple):
        for item in value:
            forget_value(walker, item)
    elif isinstance(value, dict):
        for item in value.values():
            forget_value(walker, item)
        spoil(value)
    elif isinstance(value, Instance) and not value.forgotten:
        value.forgotten = True
        for item in value.attrs.values():
            forget_value(walker, item)
    elif isinstance(value, Partial):
        for item, _ in [(value.func, None), *value.args, *value.kwargs.values()]:
            forget_value(walker, item)
    elif isinstance(value, Bucket):
        view = bucket_view(value)
        if view is not None:
            walker.state.forget(view.param)
        else:
            value.ops.append(("forget",))


def _escape(walker: Walker, param: Param) -> None:
    """`param` reached code the walk does not follow (a wrapper like `fully_shard`, a hook, a distributed
    optimizer): it may synchronise the gradient itself, so nothing is known of it from now on."""
    param.escaped = True
    walker.state.forget(param)


def model_params(value: Any) -> list[Param] | None:
    if isinstance(value, ModuleObj):
        return [p for _, p in value.named_parameters()]
    return None

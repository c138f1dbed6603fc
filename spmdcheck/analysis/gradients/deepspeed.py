"""DeepSpeed's engine in the gradient walk, as rules (data) and what they do (ZeRO stages 0, 1 and 2).

`model_engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=..., config=...)` (also `args,
model` by position, and `deepspeed.initialize(...)[0]`) wraps the model in an engine: calling it runs the model's
forward, and the optimizer it returns steps `model_parameters` (the client `optimizer=`'s, else the model's). The
engine reduces the gradients only in its own `model_engine.backward(loss)`: it runs backward, then, at a gradient
accumulation boundary, averages every gradient over the data-parallel group (DeepSpeed's `allreduce_gradients`:
divided by the dp size, all-reduced; ZeRO 1/2 reduce-scatter the same average into each rank's partition). A plain
`loss.backward()` leaves them per-rank sums (SPMD601 at the step, naming the engine's backward: the optimizer's
`reducing_call`); a loss divided by the dp size (SPMD606) or a hand all-reduce after the engine's (SPMD602)
averages or sums twice. `model_engine.step()` steps the optimizer at a boundary (the checkpoint, sync.checkpoint)
and zeroes the gradients; the returned optimizer's own `step()` is a checkpoint too.

Expert parameters (`param.allreduce = False`, sync.is_expert) are averaged by the engine over their
expert-data-parallel group (the ranks holding the same expert), which no mesh axis names: the walk holds no
state for them on dp (sync.local_on) and the engine leaves them so. A hand reduction of them over the whole
dp group is still SPMD603 (sync.reduce).

Boundaries. Every `backward` is at a boundary when the config says `gradient_accumulation_steps: 1` (or
nothing from which DeepSpeed would derive another count). A config dict the walk reads with more steps (or
`train_batch_size` with `train_micro_batch_size_per_gpu`, from which DeepSpeed derives the count from the
world size) makes the boundaries unknown: after each `backward` the engine's gradients are forgotten and its
`step()` is not a checkpoint (silent, never guessed). `set_gradient_accumulation_boundary(flag)` with a
constant flag sets it for what follows, `is_gradient_accumulation_boundary()` reads it. A config the walk
cannot read (a JSON path, `args.deepspeed_config`) is out of scope for the engine's own accumulation: every
call is taken as a boundary. `model_engine.no_sync()` (newer DeepSpeed) is a context in which `backward`
reduces nothing (the DDP no_sync of accumulation.py, reused: what it leaves pending at the step is SPMD601).
A config saying ZeRO stage 3 (parameters partitioned, reduced by hooks) is not followed: the model escapes;
so does a model on a mesh with no data-parallel axis (`dp`, or a one-axis mesh: sync.data_parallel_axis), and
one given with `model_parameters` the walk cannot list (a call it does not follow; `filter(lambda p:
p.requires_grad, model.parameters())` it lists: exprs.py `_apply_each`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from spmdcheck.analysis.gradients import accumulation, sync
from spmdcheck.analysis.gradients.state import OPAQUE, Data, ItemList, ModuleObj, Optimizer, Param, argument, spoiled

if TYPE_CHECKING:
    from spmdcheck.analysis.gradients.walker import Walker

WRAPPER = "DeepSpeed's engine"
REDUCING_CALL = "engine.backward(loss)"  # the one call that reduces (SPMD601 names it)
AVERAGED_AT = f"in `{REDUCING_CALL}`"
# qualified name -> {role: (index, keyword)} of `deepspeed.initialize(args, model, optimizer, model_parameters,
# training_data, lr_scheduler, distributed_port, mpu, dist_init_required, collate_fn, config, ...)`
INITIALIZERS = {
    "deepspeed.initialize": {
        "model": (1, "model"),
        "optimizer": (2, "optimizer"),
        "model_parameters": (3, "model_parameters"),
        "config": (10, "config"),
        "config_params": (12, "config_params"),  # the deprecated spelling of `config`
    },
}
# the config keys the rules read: the accumulation count, the two batch sizes DeepSpeed derives it from, ZeRO
ACCUMULATION_KEY = "gradient_accumulation_steps"
DERIVING_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu")
ZERO_KEY, STAGE_KEY = "zero_optimization", "stage"
UNFOLLOWED_STAGES = frozenset({3})
# engine methods that touch no gradient the walk follows (they return values it does not read)
_INERT_METHODS = frozenset({
    "save_checkpoint", "load_checkpoint", "get_lr", "get_global_grad_norm", "was_step_applied",
    "gradient_accumulation_steps", "train_batch_size", "train_micro_batch_size_per_gpu", "get_mom",
})


@dataclass(eq=False)
class Engine:
    """What the walk knows of one DeepSpeed engine: the axis its backward averages over, the optimizer it
    steps, the `initialize` call, and whether the next backward is at an accumulation boundary (None: not
    known)."""

    axis: str
    optimizer: Optimizer
    node: cst.CSTNode
    boundary: bool | None = True


def call(walker: Walker, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    """`deepspeed.initialize(...)`: (engine, optimizer, data loader, lr scheduler); NotImplemented: another
    call."""
    if name not in INITIALIZERS:
        return NotImplemented
    roles = {role: argument(args, kwargs, *where)[0] for role, where in INITIALIZERS[name].items()}
    model, axis = roles["model"], sync.data_parallel_axis(walker.mesh)
    config = roles["config"] if roles["config"] is not None else roles["config_params"]
    if not isinstance(model, ModuleObj) or axis is None or _zero_stage(config) in UNFOLLOWED_STAGES:
        for value, _ in [*args, *kwargs.values()]:
            sync.forget_value(walker, value)
        return OPAQUE
    optimizer = Optimizer(_stepped(model, roles["optimizer"], roles["model_parameters"]), (axis, REDUCING_CALL))
    engine = Engine(axis, optimizer, walker.remember(node), _boundary(config))
    wrapper = ModuleObj("DeepSpeedEngine", children={"module": model}, inner=model, engine=engine)
    wrapper.attrs["optimizer"] = optimizer
    return (wrapper, optimizer, OPAQUE, OPAQUE)


def method(walker: Walker, wrapper: ModuleObj, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    """A method of a DeepSpeed engine the walk follows (NotImplemented: not an engine, or not one)."""
    engine = wrapper.engine
    if not isinstance(engine, Engine):
        return NotImplemented
    if name == "backward":
        backward(walker, wrapper, engine, argument(args, kwargs, 0, "loss")[0], node)
        return None
    if name == "step":
        if engine.boundary is True:  # DeepSpeed steps (and then zeroes the gradients) at a boundary only
            sync.checkpoint(walker, engine.optimizer.params, node, engine.optimizer.reducing_call)
        _forget(walker, wrapper, engine)
        return None
    if name == "no_sync":
        return accumulation.DdpNoSync(wrapper, walker.remember(node))
    if name == "set_gradient_accumulation_boundary":
        flag, _ = argument(args, kwargs, 0, "is_boundary")
        engine.boundary = flag if isinstance(flag, bool) else None
        return None
    if name == "is_gradient_accumulation_boundary":
        return OPAQUE if engine.boundary is None else engine.boundary
    if name in _INERT_METHODS:
        return OPAQUE
    return NotImplemented


def backward(walker: Walker, wrapper: ModuleObj, engine: Engine, loss: Any, node: cst.CSTNode) -> None:
    """`engine.backward(loss)`: backward, then (at a boundary, outside `no_sync()`) every pending gradient of
    the engine's parameters averaged over its data-parallel axis (a division of the loss by the axis size
    before it averages twice: SPMD606)."""
    if not isinstance(loss, Data):
        sync.forget_value(walker, wrapper)
        return
    sync.backward(walker, loss, node)
    if engine.boundary is None:
        _forget(walker, wrapper, engine)  # reduced at some micro-steps only: not known which
        return
    if not engine.boundary or not accumulation.ddp_syncs(wrapper):
        engine.optimizer.reducing_call = None  # went through the engine's backward: SPMD601 names no call
        return  # the gradients accumulate unreduced until a backward at a boundary
    engine.optimizer.reducing_call = (engine.axis, REDUCING_CALL)
    sync.average_pending(walker, wrapper, engine.axis, node, WRAPPER, AVERAGED_AT)


def _forget(walker: Walker, wrapper: ModuleObj, engine: Engine) -> None:
    """The gradients of the engine's parameters (and its optimizer's) zeroed, or no longer known."""
    params = [p for _, p in wrapper.named_parameters()] + list(engine.optimizer.params or [])
    for param in params:
        walker.state.forget(param)


def _stepped(model: ModuleObj, optimizer: Any, model_parameters: Any) -> list[Param] | None:
    """The parameters the engine's optimizer steps: the client optimizer's, `model_parameters`, or the model's
    (None: not known)."""
    if isinstance(optimizer, Optimizer):
        return optimizer.params
    if isinstance(model_parameters, ItemList) and not model_parameters.spoiled and not model_parameters.repeated:
        params = [p for item in model_parameters.items for p in (item["params"].items if _group(item) else [item])]
        return params if all(isinstance(p, Param) for p in params) else None
    if model_parameters is None:
        return [p for _, p in model.named_parameters()]
    return None


def _group(item: Any) -> bool:
    """A parameter group `{"params": [...], "lr": ...}` of `model_parameters`."""
    return isinstance(item, dict) and isinstance(item.get("params"), ItemList) and not item["params"].spoiled


def _boundary(config: Any) -> bool | None:
    """Whether every backward is at an accumulation boundary by the config (a dict the walk reads; any other
    config is taken as one step: see the module docstring)."""
    if not isinstance(config, dict) or spoiled(config):
        return True
    steps = config.get(ACCUMULATION_KEY)
    if steps is None:
        return None if all(key in config for key in DERIVING_KEYS) else True
    return steps == 1 if isinstance(steps, int) and not isinstance(steps, bool) else None


def _zero_stage(config: Any) -> int | None:
    zero = config.get(ZERO_KEY) if isinstance(config, dict) else None
    stage = zero.get(STAGE_KEY) if isinstance(zero, dict) else None
    return stage if isinstance(stage, int) else None

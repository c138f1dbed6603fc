"""Megatron-core's gradient synchronisation in the gradient walk, as rules (data) and what they do.

Megatron's `DistributedDataParallel(config, ddp_config, module)` accumulates every gradient in a buffer that
backward() leaves as it is (with `overlap_grad_reduce` it starts reducing in backward, but only
`finish_grad_sync` completes it): `model.finish_grad_sync()` reduces it over the data-parallel group, scaled
by 1/dp on the way (an average; with the distributed optimizer a reduce-scatter, after which each rank steps
its shard of the same sums). `finalize_model_grads([model, ...])` runs `finish_grad_sync` on every chunk,
then reduces over the tensor-parallel group the gradients of the parameters Megatron marks: summed for
`sequence_parallel` (LayerNorms applied to a sequence slice: partial sums over tp), averaged for
`average_gradients_across_tp_domain` (megatron/core/distributed/finalize_model_grads.py,
`_allreduce_non_tensor_model_parallel_grads`), the `sequence_parallel` marks only when the model's config
(`config.sequence_parallel` of the config the wrapper was given: `TransformerConfig(..., sequence_parallel=True)`,
False by default) says so; a config the walk cannot read (built elsewhere, `**fields`, positional fields) is
believed to switch them on: nothing is reported of it.
`get_megatron_optimizer(config, [model, ...])` steps the chunks' parameters.

Expert parameters (reduced over the expert data-parallel group) are left as they are: not followed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from spmdcheck.analysis.gradients import sync
from spmdcheck.analysis.gradients.state import OPAQUE, ItemList, ModuleObj, Optimizer, argument

if TYPE_CHECKING:
    from spmdcheck.analysis.gradients.walker import Walker

WRAPPER = "Megatron's `DistributedDataParallel`"
# qualified name -> (index, keyword) of the module argument
WRAPPERS = {
    "megatron.core.distributed.DistributedDataParallel": (2, "module"),
    "megatron.core.distributed.distributed_data_parallel.DistributedDataParallel": (2, "module"),
}
# qualified name -> (index, keyword) of the list of model chunks
FINALIZERS = {
    "megatron.core.distributed.finalize_model_grads": (0, "model"),
    "megatron.core.distributed.finalize_model_grads.finalize_model_grads": (0, "model"),
}
OPTIMIZER_FACTORIES = {
    "megatron.core.optimizer.get_megatron_optimizer": (1, "model_chunks"),
}
# the parameter marks `finalize_model_grads` reduces over the tensor-parallel group: (mark, averaged, the
# config field that must be True for it to, None: whatever the config says)
TENSOR_PARALLEL_REDUCTIONS = (
    ("sequence_parallel", False, "sequence_parallel"),
    ("average_gradients_across_tp_domain", True, None),
)
# Megatron's model configs (dataclasses; the fields read above are ModelParallelConfig's) and their defaults
CONFIG_CLASSES = frozenset({
    "megatron.core.transformer.TransformerConfig",
    "megatron.core.transformer.transformer_config.TransformerConfig",
    "megatron.core.ModelParallelConfig",
    "megatron.core.model_parallel_config.ModelParallelConfig",
})
CONFIG_DEFAULTS = {"sequence_parallel": False}
# methods of the wrapper that touch no gradient the walk follows
_INERT_METHODS = frozenset({"start_grad_sync", "broadcast_params", "start_param_sync", "finish_param_sync"})


@dataclass(frozen=True)
class ModelConfig:
    """A Megatron model config the program built: the fields it gave by keyword (None: not known)."""

    fields: Mapping[str, Any] | None

    def flag(self, name: str) -> bool | None:
        """The field as the config holds it (None: not known)."""
        if self.fields is None:
            return None
        value = self.fields.get(name, CONFIG_DEFAULTS.get(name))
        return value if isinstance(value, bool) else None


def call(walker: Walker, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    """A call of one of the rules above (NotImplemented: not one)."""
    if name in CONFIG_CLASSES:
        return ModelConfig(None if args else {key: value for key, (value, _) in kwargs.items()})
    if name in WRAPPERS:
        module, _ = argument(args, kwargs, *WRAPPERS[name])
        config, _ = argument(args, kwargs, 0, "config")
        axis = sync.data_parallel_axis(walker.mesh)
        if not isinstance(module, ModuleObj) or axis is None:
            return OPAQUE
        wrapper = ModuleObj("DistributedDataParallel", children={"module": module}, inner=module, finish_axis=axis)
        wrapper.attrs["config"] = config  # what `finalize_model_grads` reads (`get_model_config`)
        return wrapper
    if name in FINALIZERS:
        chunks = _chunks(argument(args, kwargs, *FINALIZERS[name])[0])
        if chunks is None:
            for value, _ in [*args, *kwargs.values()]:
                sync.forget_value(walker, value)
            return OPAQUE
        for chunk in chunks:
            finish_grad_sync(walker, chunk, node)
        _reduce_marked(walker, chunks, node)
        return None
    if name in OPTIMIZER_FACTORIES:
        chunks = _chunks(argument(args, kwargs, *OPTIMIZER_FACTORIES[name])[0])
        params = None if chunks is None else [p for chunk in chunks for _, p in chunk.named_parameters()]
        return Optimizer(params)
    return NotImplemented


def method(walker: Walker, wrapper: ModuleObj, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    """A method of a Megatron wrapper the walk follows (NotImplemented: not a Megatron wrapper, or not one)."""
    if wrapper.finish_axis is None:
        return NotImplemented
    if name == "finish_grad_sync":
        finish_grad_sync(walker, wrapper, node)
        return None
    if name == "zero_grad_buffer":
        for _, param in wrapper.named_parameters():
            walker.state.forget(param)
        return None
    if name == "no_sync":
        return OPAQUE  # a context that defers only the overlapped reduction: `finish_grad_sync` still reduces
    if name in _INERT_METHODS:
        return None
    return NotImplemented


def finish_grad_sync(walker: Walker, wrapper: ModuleObj, node: cst.CSTNode) -> None:
    """Every pending gradient of the wrapper's parameters averaged over its data-parallel axis."""
    axis = wrapper.finish_axis
    if axis is None:
        sync.forget_value(walker, wrapper)
        return
    sync.average_pending(walker, wrapper, axis, node, WRAPPER, "at `finish_grad_sync()`")


def _reduce_marked(walker: Walker, chunks: list[ModuleObj], node: cst.CSTNode) -> None:
    tp = sync.tensor_parallel_axis(walker.mesh)
    for mark, _, _ in TENSOR_PARALLEL_REDUCTIONS:
        walker.tested_attrs.add(mark)  # a missing mark is the advice of a gradient left pending (sync.checkpoint)
    if tp is None:
        return
    for chunk in chunks:
        config = chunk.attrs.get("config")
        for name, param in chunk.named_parameters():
            for mark, average, switch in TENSOR_PARALLEL_REDUCTIONS:
                if param.attrs.get(mark) is not True:
                    continue
                if switch is not None and isinstance(config, ModelConfig) and config.flag(switch) is False:
                    param.skipped_by = f"config.{switch}"  # marked, but the config turns the reduction off
                    break
                sync.reduce(walker, param, tp, average, node, "finalize_model_grads", name)
                break


def _chunks(value: Any) -> list[ModuleObj] | None:
    """The model chunks a call is given: a list of Megatron wrappers (or one); None: not known."""
    items = value.items if isinstance(value, ItemList) and not value.repeated and not value.spoiled else [value]
    if not items or not all(isinstance(item, ModuleObj) for item in items):
        return None
    return items

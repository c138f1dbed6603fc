"""Test-only `megatron.core.tensor_parallel.mappings`: Megatron's autograd pairs.

Forward / backward of each region function, as documented in Megatron-LM's
`megatron/core/tensor_parallel/mappings.py`:

| function | forward | backward |
| --- | --- | --- |
| copy_to_tensor_model_parallel_region | identity | all-reduce |
| reduce_from_tensor_model_parallel_region | all-reduce | identity |
| scatter_to_tensor_model_parallel_region | split last dim | all-gather last dim |
| gather_from_tensor_model_parallel_region | all-gather last dim | split last dim |
| scatter_to_sequence_parallel_region | split first dim | all-gather first dim |
| gather_from_sequence_parallel_region | all-gather first dim | reduce-scatter first dim, or split |

(``gather_from_sequence_parallel_region`` splits in backward when ``tensor_parallel_output_grad=False``.)
| reduce_scatter_to_sequence_parallel_region | reduce-scatter first dim | all-gather first dim |
| all_gather_last_dim_from_tensor_parallel_region | all-gather last dim | reduce-scatter last dim |
| reduce_scatter_last_dim_to_tensor_parallel_region | reduce-scatter last dim | all-gather last dim |
| all_to_all(group, x) | all-to-all on dim 0 | all-to-all back |

Each autograd Function also has an ``spmd_typecheck`` hook (spmd-types' runtime
checker types it through it); the hooks say the same as spmdcheck's stubs and
type_system.md section 6 (Megatron's actual pairs for the two plain tensor-model
region scatter/gather functions).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from .. import parallel_state

try:  # the hooks are only used under spmd-types' runtime checker
    from spmd_types import I, P, R, S, V, maybe_get_axis_local_type, rules
except ImportError:  # pragma: no cover - plain execution does not need them
    rules = maybe_get_axis_local_type = None
    I = P = R = V = None  # noqa: E741

    def S(dim):  # noqa: N802, ANN001, ANN201
        return None


def _summed(x, group):  # noqa: ANN001, ANN202
    """The src of a reduction: V where the value is Varying (spmd-types' local view of a
    contraction over a sharded dim, which the real collectives accept as P), else P."""
    return V if maybe_get_axis_local_type(x, group) is V else P


def _tp(group):  # noqa: ANN001, ANN202
    return group if group is not None else parallel_state.get_tensor_model_parallel_group()


# ------------------------------------------------------------------ helpers (Megatron's _reduce, _split, _gather)
def _reduce(x: torch.Tensor, group) -> torch.Tensor:  # noqa: ANN001
    if dist.get_world_size(group) == 1:
        return x
    x = x.contiguous().clone()
    dist.all_reduce(x, group=group)
    return x


def _split(x: torch.Tensor, group, dim: int) -> torch.Tensor:  # noqa: ANN001
    n = dist.get_world_size(group)
    if n == 1:
        return x
    if x.shape[dim] % n:
        raise ValueError(f"dim {dim} of size {x.shape[dim]} is not divisible by the group size {n}")
    return x.chunk(n, dim=dim)[dist.get_rank(group)].contiguous()


def _gather(x: torch.Tensor, group, dim: int) -> torch.Tensor:  # noqa: ANN001
    n = dist.get_world_size(group)
    if n == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(n)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=dim).contiguous()


def _reduce_scatter(x: torch.Tensor, group, dim: int) -> torch.Tensor:  # noqa: ANN001
    n = dist.get_world_size(group)
    if n == 1:
        return x
    if x.shape[dim] % n:
        raise ValueError(f"dim {dim} of size {x.shape[dim]} is not divisible by the group size {n}")
    parts = [c.contiguous() for c in x.chunk(n, dim=dim)]
    out = torch.empty_like(parts[0])
    dist.reduce_scatter(out, parts, group=group)
    return out


def _all_to_all(x: torch.Tensor, group, output_split_sizes=None, input_split_sizes=None) -> torch.Tensor:  # noqa: ANN001
    n = dist.get_world_size(group)
    if n == 1:
        return x
    x = x.contiguous()
    if output_split_sizes is None:
        out = torch.empty_like(x)
    else:
        out = x.new_empty((sum(output_split_sizes), *x.shape[1:]))
    dist.all_to_all_single(out, x, output_split_sizes=output_split_sizes,
                           input_split_sizes=input_split_sizes, group=group)
    return out


# --------------------------------------------------------------------------- autograd pairs
class _CopyToModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, group):  # noqa: ANN001, ANN205
        ctx.group = group
        return input_.view_as(input_)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        return _reduce(grad, ctx.group), None

    @staticmethod
    def spmd_typecheck(*, input_, group):  # noqa: ANN001, ANN205
        return rules.convert(input_, group, src=I, dst=R)


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, group):  # noqa: ANN001, ANN205
        return _reduce(input_, group)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        return grad, None

    @staticmethod
    def spmd_typecheck(*, input_, group):  # noqa: ANN001, ANN205
        return rules.all_reduce(input_, group, src=_summed(input_, group), dst=I)


class _ScatterToModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, group):  # noqa: ANN001, ANN205
        ctx.group = group
        return _split(input_, group, -1)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        return _gather(grad, ctx.group, -1), None

    @staticmethod
    def spmd_typecheck(*, input_, group):  # noqa: ANN001, ANN205
        return rules.convert(input_, group, src=I, dst=S(-1))


class _GatherFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, group):  # noqa: ANN001, ANN205
        ctx.group = group
        return _gather(input_, group, -1)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        return _split(grad, ctx.group, -1), None

    @staticmethod
    def spmd_typecheck(*, input_, group):  # noqa: ANN001, ANN205
        return rules.all_gather(input_, group, src=S(-1), dst=I)


class _ScatterToSequenceParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, group):  # noqa: ANN001, ANN205
        ctx.group = group
        return _split(input_, group, 0)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        return _gather(grad, ctx.group, 0), None

    @staticmethod
    def spmd_typecheck(*, input_, group):  # noqa: ANN001, ANN205
        return rules.convert(input_, group, src=I, dst=S(0))


class _GatherFromSequenceParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, tensor_parallel_output_grad, group):  # noqa: ANN001, ANN205
        ctx.group = group
        ctx.tensor_parallel_output_grad = tensor_parallel_output_grad
        return _gather(input_, group, 0)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        if ctx.tensor_parallel_output_grad:
            return _reduce_scatter(grad, ctx.group, 0), None, None
        return _split(grad, ctx.group, 0), None, None

    @staticmethod
    def spmd_typecheck(*, input_, tensor_parallel_output_grad, group):  # noqa: ANN001, ANN205
        return rules.all_gather(input_, group, src=S(0), dst=R if tensor_parallel_output_grad else I)


class _ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, group):  # noqa: ANN001, ANN205
        ctx.group = group
        return _reduce_scatter(input_, group, 0)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        return _gather(grad, ctx.group, 0), None

    @staticmethod
    def spmd_typecheck(*, input_, group):  # noqa: ANN001, ANN205
        return rules.reduce_scatter(input_, group, src=_summed(input_, group), dst=S(0))


class _AllGatherFromTensorParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, group):  # noqa: ANN001, ANN205
        ctx.group = group
        return _gather(input_, group, -1)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        return _reduce_scatter(grad, ctx.group, -1), None

    @staticmethod
    def spmd_typecheck(*, input_, group):  # noqa: ANN001, ANN205
        return rules.all_gather(input_, group, src=S(-1), dst=R)


class _ReduceScatterToTensorParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, group):  # noqa: ANN001, ANN205
        ctx.group = group
        return _reduce_scatter(input_, group, -1)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        return _gather(grad, ctx.group, -1), None

    @staticmethod
    def spmd_typecheck(*, input_, group):  # noqa: ANN001, ANN205
        return rules.reduce_scatter(input_, group, src=_summed(input_, group), dst=S(-1))


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, group, input_, output_split_sizes, input_split_sizes):  # noqa: ANN001, ANN205
        ctx.group = group
        ctx.output_split_sizes = output_split_sizes
        ctx.input_split_sizes = input_split_sizes
        return _all_to_all(input_, group, output_split_sizes, input_split_sizes)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        return (None, _all_to_all(grad, ctx.group, ctx.input_split_sizes, ctx.output_split_sizes), None, None)

    @staticmethod
    def spmd_typecheck(*, group, input_):  # noqa: ANN001, ANN205
        return rules.all_to_all(input_, group, src=V, dst=V)


# --------------------------------------------------------------------------- public functions
def copy_to_tensor_model_parallel_region(input_, group=None):  # noqa: ANN001, ANN201
    return _CopyToModelParallelRegion.apply(input_, _tp(group))


def reduce_from_tensor_model_parallel_region(input_, group=None):  # noqa: ANN001, ANN201
    return _ReduceFromModelParallelRegion.apply(input_, _tp(group))


def scatter_to_tensor_model_parallel_region(input_, group=None):  # noqa: ANN001, ANN201
    return _ScatterToModelParallelRegion.apply(input_, _tp(group))


def gather_from_tensor_model_parallel_region(input_, group=None):  # noqa: ANN001, ANN201
    return _GatherFromModelParallelRegion.apply(input_, _tp(group))


def scatter_to_sequence_parallel_region(input_, group=None):  # noqa: ANN001, ANN201
    return _ScatterToSequenceParallelRegion.apply(input_, _tp(group))


def gather_from_sequence_parallel_region(input_, tensor_parallel_output_grad=True, group=None,  # noqa: ANN001, ANN201
                                         output_split_sizes=None, use_global_buffer=False):
    if output_split_sizes is not None:
        raise NotImplementedError("fake megatron: uneven output_split_sizes are not supported")
    return _GatherFromSequenceParallelRegion.apply(input_, tensor_parallel_output_grad, _tp(group))


def reduce_scatter_to_sequence_parallel_region(input_, group=None, input_split_sizes=None,  # noqa: ANN001, ANN201
                                               use_global_buffer=False):
    if input_split_sizes is not None:
        raise NotImplementedError("fake megatron: uneven input_split_sizes are not supported")
    return _ReduceScatterToSequenceParallelRegion.apply(input_, _tp(group))


def all_gather_last_dim_from_tensor_parallel_region(input_, group=None):  # noqa: ANN001, ANN201
    return _AllGatherFromTensorParallelRegion.apply(input_, _tp(group))


def reduce_scatter_last_dim_to_tensor_parallel_region(input_, group=None):  # noqa: ANN001, ANN201
    return _ReduceScatterToTensorParallelRegion.apply(input_, _tp(group))


def all_to_all(group, input_, output_split_sizes_=None, input_split_sizes=None):  # noqa: ANN001, ANN201
    return _AllToAll.apply(group, input_, output_split_sizes_, input_split_sizes)


def all_to_all_sp2hp(input_, group=None):  # noqa: ANN001, ANN201
    """[tokens/TP, H] -> [tokens, H/TP] (Megatron's implementation)."""
    group = _tp(group)
    n = dist.get_world_size(group)
    input_ = input_.reshape(-1, input_.shape[-1])
    split_tensors = torch.split(input_, input_.shape[-1] // n, dim=1)
    concat_tensor = torch.cat(split_tensors, dim=0)
    return all_to_all(group, concat_tensor)


def all_to_all_hp2sp(input_, group=None):  # noqa: ANN001, ANN201
    """[tokens, H/TP] -> [tokens/TP, H] (Megatron's implementation)."""
    group = _tp(group)
    n = dist.get_world_size(group)
    input_ = input_.reshape(-1, input_.shape[-1])
    exchanged = all_to_all(group, input_)
    reshaped = exchanged.reshape(-1, exchanged.shape[-1])
    split_tensors = torch.split(reshaped, reshaped.shape[0] // n, dim=0)
    return torch.cat(split_tensors, dim=-1)

"""Test-only `megatron.core.distributed`: the data-parallel wrapper and `finalize_model_grads` with the
semantics Megatron documents (megatron/core/distributed/), on plain torch.distributed and `.grad` (Megatron's
`main_grad` buffers and buckets need CUDA). backward() reduces nothing; `finish_grad_sync` averages every
gradient over the data-parallel group (scaled by 1/dp, then summed: Megatron's default
`gradient_scaling_factor`); `finalize_model_grads` runs it on every chunk, then sums over the tensor-parallel
group the gradients of the parameters marked `sequence_parallel` (when the config says sequence parallel) and
averages those marked `average_gradients_across_tp_domain`."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .. import parallel_state


@dataclass
class DistributedDataParallelConfig:
    grad_reduce_in_fp32: bool = False
    overlap_grad_reduce: bool = False
    use_distributed_optimizer: bool = False
    average_in_collective: bool = False


class DistributedDataParallel(torch.nn.Module):
    def __init__(self, config, ddp_config, module, disable_bucketing=False):  # noqa: ANN001
        super().__init__()
        self.config, self.ddp_config, self.module = config, ddp_config, module

    def forward(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):  # noqa: ANN201
        yield

    def zero_grad_buffer(self) -> None:
        for param in self.module.parameters():
            param.grad = None

    def start_grad_sync(self) -> None:
        pass

    def finish_grad_sync(self, force_all_reduce: bool = False) -> None:
        group = parallel_state.get_data_parallel_group()
        size = dist.get_world_size(group)
        for param in self.module.parameters():
            if param.grad is not None:
                param.grad.mul_(1.0 / size)
                dist.all_reduce(param.grad, group=group)


def finalize_model_grads(model, num_tokens=None, pg_collection=None, force_all_reduce=False) -> None:  # noqa: ANN001
    for chunk in model:
        chunk.finish_grad_sync(force_all_reduce=force_all_reduce)
    group = parallel_state.get_tensor_model_parallel_group()
    for chunk in model:
        for param in chunk.module.parameters():
            if param.grad is None:
                continue
            if getattr(param, "average_gradients_across_tp_domain", False):
                dist.all_reduce(param.grad, op=dist.ReduceOp.AVG, group=group)
            elif chunk.config.sequence_parallel and getattr(param, "sequence_parallel", False):
                dist.all_reduce(param.grad, group=group)

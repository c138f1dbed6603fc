"""Test-only `deepspeed`: `initialize` and the engine with DeepSpeed's documented gradient semantics (README.md),
on plain torch.distributed and `.grad`."""
from __future__ import annotations

import contextlib
import json

import torch
import torch.distributed as dist

from . import comm
from .utils import groups

__all__ = ["DeepSpeedEngine", "comm", "init_distributed", "initialize"]


def init_distributed(dist_backend: str = "gloo", **_ignored) -> None:  # noqa: ANN003
    if not dist.is_initialized():
        dist.init_process_group(dist_backend)


class DeepSpeedEngine(torch.nn.Module):
    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, config: dict) -> None:
        super().__init__()
        self.module, self.optimizer, self.config = model, optimizer, config
        self.gas = int(config.get("gradient_accumulation_steps", 1))
        self.micro_steps = 0
        self._boundary: bool | None = None  # set_gradient_accumulation_boundary's override
        self._inside_no_sync = False

    def forward(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        return self.module(*args, **kwargs)

    def is_gradient_accumulation_boundary(self) -> bool:
        if self._boundary is not None:
            return self._boundary
        return (self.micro_steps + 1) % self.gas == 0

    def set_gradient_accumulation_boundary(self, is_boundary: bool) -> None:
        self._boundary = is_boundary

    @contextlib.contextmanager
    def no_sync(self):  # noqa: ANN201
        self._inside_no_sync = True
        try:
            yield
        finally:
            self._inside_no_sync = False

    def backward(self, loss: torch.Tensor, retain_graph: bool = False, scale_wrt_gas: bool = True) -> torch.Tensor:
        if scale_wrt_gas and self.gas > 1:
            loss = loss / self.gas
        loss.backward(retain_graph=retain_graph)
        if self.is_gradient_accumulation_boundary() and not self._inside_no_sync:
            self.allreduce_gradients()
        return loss

    def allreduce_gradients(self) -> None:
        dp_group = groups._get_data_parallel_group()
        dp_size = dist.get_world_size(dp_group)
        for param in self.module.parameters():
            if param.grad is None:
                continue
            group = dp_group
            if not getattr(param, "allreduce", True):  # an expert: over the ranks holding the same expert
                group = groups._get_expert_data_parallel_group(param.group_name)
            param.grad.div_(dp_size)
            dist.all_reduce(param.grad, group=group)

    def step(self) -> None:
        if self.is_gradient_accumulation_boundary():
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        self.micro_steps += 1

    def zero_grad(self) -> None:
        self.module.zero_grad(set_to_none=True)


def initialize(args=None, model=None, optimizer=None, model_parameters=None, training_data=None,  # noqa: ANN001, ANN201, PLR0913
               lr_scheduler=None, distributed_port=29500, mpu=None, dist_init_required=None, collate_fn=None,  # noqa: ANN001
               config=None, mesh_param=None, config_params=None):  # noqa: ANN001
    config = config if config is not None else config_params
    if isinstance(config, str):
        with open(config, encoding="utf-8") as handle:
            config = json.load(handle)
    config = dict(config or {})
    if config.get("zero_optimization", {}).get("stage", 0) not in (0, 1, 2):
        raise NotImplementedError("fake deepspeed: ZeRO stages 0-2 only")
    init_distributed()
    if optimizer is None:
        spec = config["optimizer"]
        params = model.parameters() if model_parameters is None else model_parameters
        optimizer = getattr(torch.optim, spec["type"])(params, **spec.get("params", {}))
    engine = DeepSpeedEngine(model, optimizer, config)
    return engine, optimizer, None, None

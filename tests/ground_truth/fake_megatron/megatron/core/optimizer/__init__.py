"""Test-only `megatron.core.optimizer`: `get_megatron_optimizer` as plain SGD over the chunks' parameters
(the fake wrapper keeps gradients in `.grad`)."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class OptimizerConfig:
    optimizer: str = "sgd"
    lr: float = 0.5


def get_megatron_optimizer(config, model_chunks, **_ignored):  # noqa: ANN001, ANN003, ANN201
    if config.optimizer != "sgd":
        raise NotImplementedError("fake megatron: sgd only")
    return torch.optim.SGD([p for chunk in model_chunks for p in chunk.parameters()], lr=config.lr)

"""Test-only `deepspeed.utils.groups`: the data-parallel group is the world; the expert groups are laid out as
DeepSpeed's `_create_expert_and_data_parallel(ep_size)` lays them out: with 4 ranks and ep_size 2, expert-parallel
groups [0, 1] and [2, 3] (each holds every expert once), expert-data-parallel groups [0, 2] and [1, 3] (the ranks
holding the same experts)."""
from __future__ import annotations

import torch.distributed as dist

_EXPERT_PARALLEL_GROUP: dict = {}
_EXPERT_DATA_PARALLEL_GROUP: dict = {}


def _get_data_parallel_group():  # noqa: ANN202
    return dist.group.WORLD


def _get_data_parallel_world_size() -> int:
    return dist.get_world_size()


def _get_data_parallel_rank() -> int:
    return dist.get_rank()


def _create_expert_and_data_parallel(expert_parallel_size_: int) -> None:
    world_size, rank = dist.get_world_size(), dist.get_rank()
    ep_size = expert_parallel_size_
    if world_size % ep_size:
        raise ValueError(f"fake deepspeed: world size {world_size} not divisible by ep_size {ep_size}")
    name = f"ep_size_{ep_size}"
    if name in _EXPERT_PARALLEL_GROUP:
        return
    for i in range(world_size // ep_size):
        ranks = list(range(i * ep_size, (i + 1) * ep_size))
        group = dist.new_group(ranks)
        if rank in ranks:
            _EXPERT_PARALLEL_GROUP[name] = group
    for j in range(ep_size):
        ranks = list(range(j, world_size, ep_size))
        group = dist.new_group(ranks)
        if rank in ranks:
            _EXPERT_DATA_PARALLEL_GROUP[name] = group


def _get_expert_parallel_group(group_name: str):  # noqa: ANN202
    return _EXPERT_PARALLEL_GROUP[group_name]


def _get_expert_data_parallel_group(group_name: str):  # noqa: ANN202
    return _EXPERT_DATA_PARALLEL_GROUP[group_name]

# spmdcheck: mesh = ["dp", "tp"]
"""A group whose axis a stub names (Megatron's expert-data-parallel group is `edp`) but the project's
mesh does not list is unknown, not an error: the user wrote no axis name to correct. An axis name the
user writes is still checked."""
import torch
import torch.distributed as dist
from megatron.core import parallel_state

import spmd_types as spmd
from spmd_types import P, R


def sync_expert_grads(grad: torch.Tensor):
    dist.all_reduce(grad, group=parallel_state.get_expert_data_parallel_group())
    return grad


def typo(x: torch.Tensor):
    return spmd.all_reduce(x, "tpp", src=P, dst=R)  # error: SPMD003 col 31

# [expected messages] line:column CODE: message
# 19:31 SPMD003: unknown mesh axis 'tpp'; the mesh in scope has dp, tp

"""spmdcheck rules for `deepspeed.utils.groups` (never imported).

The data-parallel group spans the mesh axis `dp`. The expert groups
(`_get_expert_parallel_group(name)`, `_get_expert_data_parallel_group(name)`)
split it into subgroups no mesh axis names: not declared (a reduction over
them is one the gradient walk cannot place).
"""

from torch.distributed import ProcessGroup

from spmdcheck.annotations import group_size, process_group, rank_dependent

@process_group("dp")
def _get_data_parallel_group() -> ProcessGroup: ...
@group_size("dp")
def _get_data_parallel_world_size() -> int: ...
@rank_dependent(axis="dp")
def _get_data_parallel_rank() -> int: ...

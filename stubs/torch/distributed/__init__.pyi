"""spmdcheck rules for raw `torch.distributed` collectives (type_system.md 3.7).

Read with libcst, never imported; vocabulary in docs/stubs.md. These
collectives have no autograd: spmdcheck reports them on values that need a
gradient (project decision 5). No implicit V->P here (unlike spmd_types'
own collectives). `group=None` is the default (world) group.
"""

from typing import Any

from torch import Tensor

from spmdcheck.annotations import group_members, passthrough, raw_collective, rank_dependent

from .device_mesh import DeviceMesh as DeviceMesh
from .device_mesh import init_device_mesh as init_device_mesh

class ReduceOp:
    SUM: ReduceOp
    AVG: ReduceOp
    PRODUCT: ReduceOp
    MIN: ReduceOp
    MAX: ReduceOp
    BAND: ReduceOp
    BOR: ReduceOp
    BXOR: ReduceOp
    PREMUL_SUM: ReduceOp

class ProcessGroup:
    @passthrough
    def size(self) -> int: ...
    @passthrough
    def rank(self) -> int: ...

class Work:
    @passthrough
    def wait(self, timeout: Any = None) -> bool: ...
    @passthrough
    def is_completed(self) -> bool: ...

class group:
    WORLD: ProcessGroup

# ----- intercepted by spmd_types (_raw_dist.py) ------------------------------

# In place: `tensor` must be P on the group and becomes R.
@raw_collective(src="P", dst="R", input="tensor")
def all_reduce(
    tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None, async_op: bool = False
) -> Work | None: ...
@raw_collective(src="V", dst="R|I", input="tensor", output="tensor_list")
def all_gather(
    tensor_list: list[Tensor], tensor: Tensor, group: ProcessGroup | None = None, async_op: bool = False
) -> Work | None: ...
@raw_collective(src="V", dst="R|I", input="input_tensor", output="output_tensor")
def all_gather_into_tensor(
    output_tensor: Tensor, input_tensor: Tensor, group: ProcessGroup | None = None, async_op: bool = False
) -> Work | None: ...
@raw_collective(src="P", dst="V", input="input", output="output")
def reduce_scatter_tensor(
    output: Tensor,
    input: Tensor,
    op: ReduceOp = ReduceOp.SUM,
    group: ProcessGroup | None = None,
    async_op: bool = False,
) -> Work | None: ...
@raw_collective(src="V", dst="V", input="input", output="output")
def all_to_all_single(
    output: Tensor,
    input: Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: ProcessGroup | None = None,
    async_op: bool = False,
) -> Work | None: ...

# ----- not typed by spmd_types ("not yet implemented"); typed here ----------

# In place: afterwards every rank holds the source rank's data.
@raw_collective(src="*", dst="R", input="tensor")
def broadcast(
    tensor: Tensor,
    src: int | None = None,
    group: ProcessGroup | None = None,
    async_op: bool = False,
    group_src: int | None = None,
) -> Work | None: ...

# In place: only rank `dst` receives the sum; the other ranks' buffers hold
# unspecified partial data, so the result is V on the group (not R).
@raw_collective(src="P", dst="V", input="tensor")
def reduce(
    tensor: Tensor,
    dst: int | None = None,
    op: ReduceOp = ReduceOp.SUM,
    group: ProcessGroup | None = None,
    async_op: bool = False,
    group_dst: int | None = None,
) -> Work | None: ...

# ----- process-group management and metadata (untyped values) ---------------

@rank_dependent(group="group")
def get_rank(group: ProcessGroup | None = None) -> int: ...
@passthrough
def get_world_size(group: ProcessGroup | None = None) -> int: ...
@passthrough
def barrier(group: ProcessGroup | None = None, async_op: bool = False, device_ids: Any = None) -> Work | None: ...
@passthrough
def is_initialized() -> bool: ...
@passthrough
def is_available() -> bool: ...
@passthrough
def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: Any = None,
    world_size: int = -1,
    rank: int = -1,
    store: Any = None,
    group_name: str = "",
    pg_options: Any = None,
    device_id: Any = None,
) -> None: ...
@passthrough
def destroy_process_group(group: ProcessGroup | None = None) -> None: ...
@passthrough
def new_group(
    ranks: list[int] | None = None,
    timeout: Any = None,
    backend: Any = None,
    pg_options: Any = None,
    use_local_synchronization: bool = False,
    group_desc: str | None = None,
    device_id: Any = None,
) -> ProcessGroup: ...
@group_members("group")
def get_process_group_ranks(group: ProcessGroup | None) -> list[int]: ...
@rank_dependent
def get_global_rank(group: ProcessGroup, group_rank: int) -> int: ...
@passthrough
def get_backend(group: ProcessGroup | None = None) -> str: ...

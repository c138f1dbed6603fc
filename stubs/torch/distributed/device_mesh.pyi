"""spmdcheck rules for `torch.distributed.device_mesh` (read with libcst, never imported)."""

from typing import Any

from torch.distributed import ProcessGroup

from spmdcheck.annotations import dtensor_api, mesh_factory, mesh_group, passthrough, rank_dependent

@mesh_factory(names="mesh_dim_names")
def init_device_mesh(
    device_type: str,
    mesh_shape: tuple[int, ...],
    *,
    mesh_dim_names: tuple[str, ...] | None = None,
    backend_override: Any = None,
) -> DeviceMesh: ...

class DeviceMesh:
    @mesh_group(param="mesh_dim")
    def get_group(self, mesh_dim: int | str | None = None) -> ProcessGroup: ...
    @passthrough
    @dtensor_api("mesh_size", dim="mesh_dim")  # a number: the size of one axis when it names one
    def size(self, mesh_dim: int | str | None = None) -> int: ...
    @rank_dependent(group="mesh_dim")
    def get_local_rank(self, mesh_dim: int | str | None = None) -> int: ...
    @rank_dependent
    def get_rank(self) -> int: ...
    @dtensor_api("flatten")
    def _flatten(self, mesh_dim_name: str | None = None, backend_override: Any = None) -> DeviceMesh: ...
    @passthrough
    def get_coordinate(self) -> tuple[int, ...] | None: ...
    @passthrough
    def get_all_groups(self) -> list[ProcessGroup]: ...
    @property
    @passthrough
    def mesh_dim_names(self) -> tuple[str, ...] | None: ...
    @property
    @passthrough
    def ndim(self) -> int: ...
    @property
    @passthrough
    def shape(self) -> tuple[int, ...]: ...
    @property
    @passthrough
    def device_type(self) -> str: ...

"""spmdcheck rules for `torch.distributed.tensor` (never imported).

spmdcheck types local tensors (spmd_types); a tensor it has typed is never a DTensor, so
`isinstance(x, DTensor)` on one is False and its DTensor-only branch is not checked.

DTensors are typed values of their own (analysis/dtensor/): a placement per mesh dim. The entries marked
`@dtensor_api` are the DTensor/local boundary and the placements; ops on DTensors use the ordinary
`torch.Tensor` rules, on the placements' local types (analysis/dtensor/propagate.py).
"""

from collections.abc import Sequence
from typing import Any

from torch import Tensor
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.device_mesh import DeviceMesh as DeviceMesh
from torch.distributed.device_mesh import init_device_mesh as init_device_mesh

from spmdcheck.annotations import dtensor_api, instance_test

class Placement: ...

@dtensor_api("placement", placement="shard", dim="dim")
class Shard(Placement):
    def __init__(self, dim: int) -> None: ...

@dtensor_api("placement", placement="replicate")
class Replicate(Placement):
    def __init__(self) -> None: ...

@dtensor_api("placement", placement="partial", reduce_op="reduce_op")
class Partial(Placement):
    def __init__(self, reduce_op: str = "sum") -> None: ...

@instance_test(False)
class DTensor:
    @staticmethod
    @dtensor_api("from_local")
    def from_local(
        local_tensor: Tensor,
        device_mesh: DeviceMesh | None = None,
        placements: Sequence[Placement] | None = None,
        *,
        run_check: bool = False,
        shape: Any = None,
        stride: Any = None,
    ) -> DTensor: ...
    @dtensor_api("to_local")
    def to_local(self, *, grad_placements: Sequence[Placement] | None = None) -> Tensor: ...
    @dtensor_api("full_tensor")
    def full_tensor(self, *, grad_placements: Sequence[Placement] | None = None) -> Tensor: ...
    @dtensor_api("redistribute")
    def redistribute(
        self,
        device_mesh: DeviceMesh | None = None,
        placements: Sequence[Placement] | None = None,
        *,
        async_op: bool = False,
        forward_dtype: Any = None,
        backward_dtype: Any = None,
    ) -> DTensor: ...
    @property
    @dtensor_api("placements")
    def placements(self) -> tuple[Placement, ...]: ...
    @property
    @dtensor_api("device_mesh")
    def device_mesh(self) -> DeviceMesh: ...
    @property
    @dtensor_api("grad")
    def grad(self) -> DTensor | None: ...

@dtensor_api("distribute_tensor")
def distribute_tensor(
    tensor: Tensor,
    device_mesh: DeviceMesh | None = None,
    placements: Sequence[Placement] | None = None,
    *,
    src_data_rank: int | None = 0,
) -> DTensor: ...

"""spmdcheck rules for `torch.distributed.tensor.experimental` (never imported)."""

from collections.abc import Callable, Sequence
from typing import Any

from torch.distributed.device_mesh import DeviceMesh

from spmdcheck.annotations import dtensor_api

# `local_map(func, out_placements, ...)` wraps `func` (without `func`: a decorator): DTensor arguments enter
# the body as `to_local(grad_placements=in_grad_placements[i])` of `in_placements[i]`, the result leaves as
# `DTensor.from_local(out, mesh, out_placements)` (analysis/dtensor/localmap.py).
@dtensor_api("local_map")
def local_map(
    func: Callable[..., Any] | None = None,
    out_placements: Any = None,
    in_placements: Sequence[Any] | None = None,
    in_grad_placements: Sequence[Any] | None = None,
    device_mesh: DeviceMesh | None = None,
    *,
    redistribute_inputs: bool = False,
) -> Any: ...

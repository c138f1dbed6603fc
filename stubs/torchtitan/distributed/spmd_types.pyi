"""spmdcheck rules for `torchtitan.distributed.spmd_types` (torchtitan 0.3.0).

torchtitan wraps spmd_types' mesh stack in its own helpers; they mean what
`spmd_types.set_current_mesh` and `spmd_types.current_mesh` mean.
"""

from typing import Any

from spmdcheck.annotations import context, spmd_api

@context("mesh")
def set_current_spmd_mesh(mesh: Any) -> Any: ...

# The mesh in scope (None outside one): its groups name its axes.
@spmd_api("current_mesh")
def current_spmd_mesh() -> Any: ...

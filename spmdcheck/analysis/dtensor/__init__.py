"""DTensor values: PyTorch's own SPMD types, read as local types at the DTensor/local boundary (issue 22).

Interface (kept stable for the code built on it, e.g. tensor-parallel plans):

* A placement is a `PlacementValue(kind, dim=None, reduce_op="sum")` with `kind` one of `SHARD`,
  `REPLICATE`, `PARTIAL` (`Shard(d)`, `Replicate()`, `Partial()` calls evaluate to one; `str()` spells it as
  the user wrote it). `placement.forward` is its local type on one mesh dim: S(d), R or P (None: untyped,
  e.g. `Partial("avg")` or a Shard whose dim is not a constant).
* A DTensor is a `DTensorValue(dims, placements, grads=None, rank=None, grad=GradState.UNKNOWN)`:
  `dims[i]` are the checker axes mesh dim i spans (one axis a dim; several after `_flatten`),
  `placements[i]` its placement (None: unknown), `grads` the gradient placements its conversion to a
  local tensor uses by default (None: the forward placements, PyTorch's default), `rank` the tensor's
  number of dims, `grad` whether it needs a gradient. Make one with
  `make_dtensor(mesh, placements, grads=None, rank=None, grad=...)` from a `MeshValue` (a mesh's dims are
  its axes in order; `FlatMeshValue` for a flattened one), or change one with `dt.with_placements(...)`.
* To local: `to_local(dt, grads=None) -> TensorValue` (`local_type(dt, grads) -> SpmdType`). Per mesh dim,
  Replicate is I when its gradient placement is Replicate and R when it is Partial, Shard(d) is S(d), Partial
  is P; any other pairing (and an unknown placement) leaves that axis untyped, and a DTensor with no typed
  axis gives an opaque (unknown, silent) tensor. Back: `from_local_type(dims, local_type) -> placements`
  (R/I Replicate, P or a pending sum Partial, S(d) Shard(d)).
* `read_placements(value, ndim)` reads a placements argument (`[Shard(0), Replicate()]`).
* Boundary calls are `@dtensor_api("...")` stub entries (stubs/torch/distributed/tensor/), typed by
  `boundary.HANDLERS`; ops with DTensor operands are typed by `propagate.apply_op` (never reported).
"""

from spmdcheck.analysis.dtensor.values import (
    PARTIAL,
    REPLICATE,
    SHARD,
    DTensorValue,
    FlatMeshValue,
    Placements,
    PlacementValue,
    from_local_type,
    local_type,
    make_dtensor,
    mesh_dims,
    read_placements,
    to_local,
)

__all__ = [
    "PARTIAL",
    "REPLICATE",
    "SHARD",
    "DTensorValue",
    "FlatMeshValue",
    "PlacementValue",
    "Placements",
    "from_local_type",
    "local_type",
    "make_dtensor",
    "mesh_dims",
    "read_placements",
    "to_local",
]

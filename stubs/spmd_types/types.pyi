"""spmdcheck rules for `spmd_types.types` (read with libcst, never imported)."""

from typing import Any

from spmdcheck.annotations import LocalType, spmd_api

R: LocalType["R"]  # noqa: UP037
I: LocalType["I"]  # noqa: UP037
V: LocalType["V"]  # noqa: UP037
P: LocalType["P"]  # noqa: UP037

Replicate = R
Invariant = I
Varying = V
Partial = P

# `S(i)`: V on the axis, and the global tensor is the concatenation of the
# local ones along tensor dim `i`.
@spmd_api("shard_type")
def S(dim: int) -> Any: ...

Shard = S

# `PartitionSpec("dp", "cp", None)`: one entry per tensor dim, an axis (or a tuple of axes) sharding that
# dim: the axes named are S(dim); axes not named are left as they are.
@spmd_api("partition_spec")
def PartitionSpec(*dims: Any) -> Any: ...
class SpmdType: ...
class TensorSharding: ...
class SpmdTypeError(RuntimeError): ...

# Annotation-only aliases (torchtitan annotates parameters with them): they name types, they make none.
class PerMeshAxisSpmdType: ...
class PerMeshAxisLocalSpmdType: ...
class PerMeshAxisSpmdTypes: ...

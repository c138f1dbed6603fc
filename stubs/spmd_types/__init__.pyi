"""spmdcheck rules for `spmd_types` 0.3.1 (read with libcst, never imported).

Signatures follow the 0.3.1 wheel (`_collectives.py`, `_local.py`,
`runtime.py`, `_mesh.py`); transition tables follow type_system.md 3.2-3.4.
Letters: R I V P, and S for any S(i). `axis` is an axis name, a
ProcessGroup or a MeshAxis.
"""

from typing import Any

from torch import Tensor

from spmdcheck.annotations import assume_returns, collective, context, conversion, opaque, passthrough, spmd_api

from .types import I as I
from .types import Invariant as Invariant
from .types import P as P
from .types import Partial as Partial
from .types import PartitionSpec as PartitionSpec
from .types import PerMeshAxisLocalSpmdType as PerMeshAxisLocalSpmdType
from .types import PerMeshAxisSpmdType as PerMeshAxisSpmdType
from .types import PerMeshAxisSpmdTypes as PerMeshAxisSpmdTypes
from .types import R as R
from .types import Replicate as Replicate
from .types import S as S
from .types import Shard as Shard
from .types import SpmdType as SpmdType
from .types import SpmdTypeError as SpmdTypeError
from .types import TensorSharding as TensorSharding
from .types import V as V
from .types import Varying as Varying

# ---------------------------------------------------------------------------
# Collectives (type_system.md 3.2). V is accepted where src is P (implicit
# reinterpret(V, P)).
# ---------------------------------------------------------------------------

@collective("all_reduce", src="P", dst="R|I", default_src="P")
def all_reduce(
    x: Tensor,
    axis: Any,
    *,
    src: Any = P,
    dst: Any,
    inplace: bool = False,
    op_dtype: Any = None,
    out_dtype: Any = None,
    async_op: bool = False,
    backward_options: dict | None = None,
) -> Tensor: ...
@collective("all_gather", src="V|S", dst="R|I", default_src="V")
def all_gather(
    x: Tensor,
    axis: Any,
    *,
    src: Any = V,
    dst: Any,
    gather_dim: int | None = None,
    split_sizes: list[int] | None = None,
    op_dtype: Any = None,
    out_dtype: Any = None,
    async_op: bool = False,
    backward_options: dict | None = None,
) -> Tensor: ...
@collective("reduce_scatter", src="P", dst="V|S", default_src="P", default_dst="V")
def reduce_scatter(
    x: Tensor,
    axis: Any,
    *,
    src: Any = P,
    dst: Any = V,
    scatter_dim: int | None = None,
    split_sizes: list[int] | None = None,
    op_dtype: Any = None,
    out_dtype: Any = None,
    async_op: bool = False,
    backward_options: dict | None = None,
) -> Tensor: ...
@collective("all_to_all", src="V|S", dst="V|S", default_src="V", default_dst="V")
def all_to_all(
    x: Tensor,
    axis: Any,
    *,
    src: Any = V,
    dst: Any = V,
    split_dim: int | None = None,
    concat_dim: int | None = None,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    op_dtype: Any = None,
    out_dtype: Any = None,
    async_op: bool = False,
    backward_options: dict | None = None,
) -> Tensor: ...

# `unshard(S(i), dst)` is `all_gather(S(i), dst)`; src must be a Shard.
@collective("unshard", src="S", dst="R|I")
def unshard(
    x: Tensor,
    axis: Any,
    *,
    src: Any,
    dst: Any,
    op_dtype: Any = None,
    out_dtype: Any = None,
    async_op: bool = False,
    backward_options: dict | None = None,
) -> Tensor: ...

# Semantics-preserving, comms allowed: every pair is routed to some op
# (expert conversions are enabled internally); V accepted for src=P.
@conversion("redistribute", allowed="*", implicit_partial=True)
def redistribute(
    x: Tensor,
    axis: Any,
    *,
    src: Any,
    dst: Any,
    op_dtype: Any = None,
    out_dtype: Any = None,
    async_op: bool = False,
    backward_options: dict | None = None,
) -> Tensor: ...

# ---------------------------------------------------------------------------
# No-comms conversions (type_system.md 3.3-3.4)
# ---------------------------------------------------------------------------

# Meaning preserved. V<->S(i) is a no-op (both are V locally); S(i)->S(j),
# i != j, needs all_to_all.
@conversion(
    "convert",
    allowed="I->R R->V R->S I->V I->S R->P V->S S->V",
    expert="R->I I->P V->P S->P",
    hints=(
        "P->R:all_reduce P->I:all_reduce P->V:reduce_scatter P->S:reduce_scatter"
        " V->R:all_gather V->I:all_gather S->R:all_gather S->I:all_gather S->S:all_to_all"
    ),
)
def convert(
    x: Tensor,
    axis: Any,
    *,
    src: Any,
    dst: Any,
    expert_mode: bool = False,
    op_dtype: Any = None,
    out_dtype: Any = None,
    async_op: bool = False,
    backward_options: dict | None = None,
) -> Tensor: ...

# No data change, meaning may change. No S(i) on either side (use V, or convert).
@conversion(
    "reinterpret",
    allowed="I->V I->P V->P",
    expert="R->I I->R R->V R->P",
    hints=(
        "P->R:all_reduce P->I:all_reduce P->V:reduce_scatter P->S:reduce_scatter"
        " V->R:all_gather V->I:all_gather S->R:all_gather S->I:all_gather"
        " R->S:convert I->S:convert V->S:convert S->V:convert S->P:convert"
    ),
)
def reinterpret(
    x: Tensor,
    axis: Any,
    *,
    src: Any,
    dst: Any,
    expert_mode: bool = False,
    op_dtype: Any = None,
    out_dtype: Any = None,
    async_op: bool = False,
    backward_options: dict | None = None,
) -> Tensor: ...

# `shard(src, S(i))` is `convert(src, S(i))`; dst must be a Shard.
@conversion(
    "shard",
    allowed="R->S I->S V->S",
    hints="P->S:reduce_scatter S->S:all_to_all R->V:convert I->V:convert",
)
def shard(
    x: Tensor,
    axis: Any,
    *,
    src: Any,
    dst: Any,
    op_dtype: Any = None,
    out_dtype: Any = None,
    async_op: bool = False,
    backward_options: dict | None = None,
) -> Tensor: ...

# `convert(x, axis, src=I, dst=R)` (Megatron copy_to_tensor_model_parallel_region).
@conversion("invariant_to_replicate", allowed="I->R", default_src="I", default_dst="R")
def invariant_to_replicate(
    x: Tensor,
    axis: Any,
    *,
    op_dtype: Any = None,
    out_dtype: Any = None,
    async_op: bool = False,
    backward_options: dict | None = None,
) -> Tensor: ...

# ---------------------------------------------------------------------------
# Annotations (type_system.md 4.1-4.2, 4.5)
# ---------------------------------------------------------------------------

# Also accepts a list/tuple of tensors (applied to each, same container back).
@spmd_api("assert_type")
def assert_type(tensor: Tensor, *types: Any, partition_spec: Any = None) -> Tensor: ...

# Deprecated alias in 0.3.1: `assert_local_type(tensor, type)` calls assert_type.
assert_local_type = assert_type

@spmd_api("assert_type_like")
def assert_type_like(tensor: Tensor, source: Tensor, overrides: Any = None) -> None: ...

# Same as assert_type_like without copying the PartitionSpec.
@spmd_api("assert_type_like")
def assert_local_type_like(tensor: Tensor, source: Tensor, overrides: Any = None) -> None: ...
@spmd_api("mutate_type")
def mutate_type(tensor: Tensor, axis: Any = None, *, src: Any, dst: Any) -> Tensor: ...
@spmd_api("reinterpret_no_grad")
def reinterpret_no_grad(tensor: Tensor, axis: Any, *, dst: Any) -> Tensor: ...
@spmd_api("scalar")
def Scalar(value: int | float | complex, spmd_type: Any) -> Any: ...
@spmd_api("local_map")
def local_map(*, in_types: Any = ..., out_types: Any) -> Any: ...
@spmd_api("ignore")
def reinterpret_mesh(tensor: Tensor, type: Any, *, inplace: bool = False) -> Tensor: ...

# ---------------------------------------------------------------------------
# Scoping (type_system.md 4.3)
# ---------------------------------------------------------------------------

@context("mesh")
def set_current_mesh(axes: Any = None, *, local_axes: tuple[Any, ...] = ()) -> Any: ...

# `with no_typecheck():`, `@no_typecheck`, `@no_typecheck(out_types=..., in_types=...)`.
@context("no_typecheck")
def no_typecheck(fn: Any = None, /, *, out_types: Any = ..., in_types: Any = ...) -> Any: ...

# Disables checking whenever `fn` runs, without wrapping it; as a decorator
# it is the same boundary as `@no_typecheck` (hence a context, not passthrough).
@context("no_typecheck")
def register_no_typecheck(fn: Any) -> Any: ...
@context("local")
def local() -> Any: ...

# ---------------------------------------------------------------------------
# Registration and queries: no typing effect on the call itself
# ---------------------------------------------------------------------------

@passthrough
def register_local_autograd_function(cls: Any) -> Any: ...
@passthrough
def register_local_backward_hook(fn: Any) -> Any: ...
@passthrough
def register_autograd_function(cls: Any) -> Any: ...
@passthrough
def register_decomposition(cls: Any, ref_impl: Any = None) -> Any: ...
@passthrough
def get_local_type(value: Any) -> Any: ...
@passthrough
def get_axis_local_type(tensor: Any, axis: Any) -> Any: ...
@passthrough
def maybe_get_axis_local_type(tensor: Any, axis: Any) -> Any: ...
@passthrough
def get_partition_spec(tensor: Any) -> Any: ...
@passthrough
def has_local_type(tensor: Any) -> bool: ...
@passthrough
def merge_types(*types: Any) -> Any: ...
@passthrough
def normalize_axis(axis: Any) -> Any: ...
@passthrough
def normalize_mesh(axes: Any) -> Any: ...
# spmdcheck checks the program as spmd_types' type-checking mode runs it.
@assume_returns(True)
def is_type_checking() -> bool: ...
@spmd_api("current_mesh")
def current_mesh() -> Any: ...
@passthrough
def current_mesh_names() -> Any: ...
@passthrough
def current_mesh_all_names() -> Any: ...
@passthrough
def trace(enabled: bool = True) -> Any: ...
@passthrough
def set_dist(module: Any) -> None: ...
@passthrough
def dtensor_placement_to_spmd_type(placement: Any, grad_placement: Any = None) -> Any: ...
@passthrough
def spmd_type_to_dtensor_placement(typ: Any) -> Any: ...

# DTensor bridge: DTensor calls are not typed locally.
@opaque
def spmd_redistribute(x: Any, src: Any, dst: Any) -> Tensor: ...

class MeshAxis: ...
class _InferType: ...

Infer: _InferType

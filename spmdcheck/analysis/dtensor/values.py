"""DTensor values: placements, meshes and DTensors as abstract values, and their local types.

Pure: values and the lattice only (no libcst node is read, nothing is reported).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spmdcheck.analysis.values import (
    UNKNOWN,
    CarriesTypes,
    Literal,
    MeshValue,
    Seq,
    TensorValue,
    Value,
)
from spmdcheck.lattice import AI, AP, AR, AxisType, GradState, Kind, S, SpmdType

SHARD, REPLICATE, PARTIAL = "shard", "replicate", "partial"


@dataclass(frozen=True)
class PlacementValue(Value):
    """`Shard(dim)`, `Replicate()` or `Partial(reduce_op)`: how a DTensor is laid out on one mesh dim.

    `dim` is None for a Shard whose dim the checker cannot read; `reduce_op` is Partial's reduction
    ("sum" is the only one typed: P; "avg", "max", ... are reductions of their own, left unknown).
    """

    kind: str
    dim: int | None = None
    reduce_op: str = "sum"

    @property
    def forward(self) -> AxisType | None:
        """The local type a rank's piece has in the forward pass: S(d), R or P (None: not typed)."""
        if self.kind == SHARD:
            return S(self.dim) if self.dim is not None else None
        if self.kind == REPLICATE:
            return AR
        return AP if self.reduce_op == "sum" else None

    def __str__(self) -> str:
        if self.kind == SHARD:
            return f"Shard({self.dim if self.dim is not None else '?'})"
        if self.kind == REPLICATE:
            return "Replicate()"
        return "Partial()" if self.reduce_op == "sum" else f"Partial({self.reduce_op!r})"


SHARD_0 = PlacementValue(SHARD, 0)
REPLICATE_PLACEMENT = PlacementValue(REPLICATE)
PARTIAL_PLACEMENT = PlacementValue(PARTIAL)

Placements = tuple[PlacementValue | None, ...]  # one per mesh dim; None: not known


@dataclass(frozen=True)
class FlatMeshValue(MeshValue):
    """`mesh["dp", "cp"]._flatten("dp_cp")`: one mesh dim (`axes`: its name) spanning several checker axes."""

    parts: tuple[tuple[str, ...], ...] = ()


def mesh_dims(mesh: MeshValue) -> tuple[tuple[str, ...], ...]:
    """The checker axes each dim of a mesh spans (one axis a dim, several for a flattened dim)."""
    if isinstance(mesh, FlatMeshValue) and len(mesh.parts) == len(mesh.axes):
        return mesh.parts
    return tuple((axis,) for axis in mesh.axes)


@dataclass(frozen=True)
class DTensorValue(CarriesTypes):
    """A DTensor: per mesh dim, the checker axes it spans, its placement, and the gradient placement its
    conversion to a local tensor uses by default (None: the forward placement, as PyTorch does).
    `backward`: the placements of the gradient backward() leaves in its `.grad`, where what consumed it
    fixes them (a column-parallel module given it Replicate: Partial); None: not known."""

    dims: tuple[tuple[str, ...], ...]
    placements: Placements
    grads: Placements | None = None
    rank: int | None = None
    grad: GradState = GradState.UNKNOWN
    backward: Placements | None = None

    @property
    def mesh(self) -> MeshValue:
        if all(len(d) == 1 for d in self.dims):
            return MeshValue(tuple(d[0] for d in self.dims))
        return FlatMeshValue(tuple("_".join(d) for d in self.dims), self.dims)

    def with_placements(self, placements: Placements, grads: Placements | None = None) -> DTensorValue:
        return DTensorValue(self.dims, placements, grads, self.rank, self.grad)

    def gradient_placements(self) -> Placements:
        """The placements of `.grad`: where a consumer fixed them, those; else Shard(d) keeps its shards
        (a sharded value's gradient is sharded alike); Replicate and Partial depend on what consumed it."""
        known = self.backward or (None,) * len(self.placements)
        return tuple(
            b if b is not None else (p if p is not None and p.kind == SHARD else None)
            for p, b in zip(self.placements, known)
        )


def make_dtensor(
    mesh: MeshValue,
    placements: Placements,
    grads: Placements | None = None,
    rank: int | None = None,
    grad: GradState = GradState.UNKNOWN,
) -> DTensorValue:
    """A DTensor on `mesh` with these placements (one per mesh dim; the checker's public constructor)."""
    return DTensorValue(mesh_dims(mesh), placements, grads, rank, grad)


def axis_local_type(forward: PlacementValue | None, gradient: PlacementValue | None) -> AxisType | None:
    """The local type of a DTensor's piece on one mesh dim, from its placement and its gradient placement.

    Replicate is R when its gradient is Partial (each rank's gradient is one share of the sum) and I when
    its gradient is Replicate (already summed); Shard(d) is S(d) (its gradient sharded alike); Partial is
    P (its gradient is replicated). Any other pairing has no local type here: unknown, silent.
    """
    if forward is None or gradient is None:
        return None
    if forward.kind == REPLICATE:
        if gradient.kind == REPLICATE:
            return AI
        return AR if gradient.kind == PARTIAL and gradient.reduce_op == "sum" else None
    if forward.kind == SHARD:
        return forward.forward if gradient == forward else None
    return forward.forward


def local_type(dt: DTensorValue, grads: Placements | None = None) -> SpmdType:
    """The local type of `dt.to_local(grad_placements=grads)` (None: `dt.grads`, else the forward ones)."""
    grads = grads if grads is not None else dt.grads if dt.grads is not None else dt.placements
    axes: dict[str, AxisType] = {}
    for dim, forward, gradient in zip(dt.dims, dt.placements, grads):
        t = axis_local_type(forward, gradient)
        if t is not None:
            for axis in dim:
                axes[axis] = t
    return SpmdType(axes)


def to_local(dt: DTensorValue, grads: Placements | None = None) -> TensorValue:
    """The local tensor a DTensor hands to local code (`to_local`), typed where its placements are known."""
    t = local_type(dt, grads)
    return TensorValue(t, dt.grad, dt.rank, opaque=not t)


def placement_of(t: AxisType | None) -> PlacementValue | None:
    """The placement of a DTensor whose local piece has type `t` (the inverse of `axis_local_type`'s
    forward half): R/I Replicate, P or a pending sum Partial, S(d) Shard(d); plain V has none."""
    if t is None:
        return None
    if t.kind is Kind.R or t.kind is Kind.I:
        return REPLICATE_PLACEMENT
    if t.kind is Kind.P or t.is_pending:
        return PARTIAL_PLACEMENT
    if t.shard is not None:
        return PlacementValue(SHARD, t.shard)
    return None


def from_local_type(dims: tuple[tuple[str, ...], ...], t: SpmdType) -> Placements:
    """Placements per mesh dim of a local type (a dim spanning several axes needs them to agree)."""
    out: list[PlacementValue | None] = []
    for dim in dims:
        found = {placement_of(t.get(axis)) for axis in dim}
        out.append(found.pop() if len(found) == 1 else None)
    return tuple(out)


def read_placements(value: Value | None, ndim: int) -> Placements | None:
    """A placements argument (`[Shard(0), Replicate()]`, `(Partial(),)`) for a mesh of `ndim` dims; None when
    it is not a sequence the checker reads. Unknown items are None; a length mismatch is unknown."""
    if isinstance(value, PlacementValue):
        value = Seq((value,))
    if not isinstance(value, Seq) or len(value.items) != ndim:
        return None
    return tuple(item if isinstance(item, PlacementValue) else None for item in value.items)


def is_none(value: Value | None) -> bool:
    return value is None or (isinstance(value, Literal) and value.value is None)


def placements_value(placements: Sequence[PlacementValue | None]) -> Value:
    """`dt.placements`: a tuple of the placements (unknown ones unknown)."""
    return Seq(tuple(p if p is not None else UNKNOWN for p in placements))

"""The DTensor/local boundary: the calls of `@dtensor_api` stub entries (placements, `distribute_tensor`,
`DTensor.from_local`, `to_local`, `full_tensor`, `redistribute`, a mesh's `_flatten`).

Inside DTensor code every op is right by construction (DTensor's sharding propagation redistributes as it
needs); what goes wrong is what the user declares where a local value becomes a DTensor (`from_local`:
the local value must have the placements it is given) and where a DTensor becomes local (`to_local`,
`full_tensor`: the gradient placement, by default the forward one, decides the local type: a Replicate
DTensor is Invariant locally unless its gradient is declared Partial). Those local types then meet the
lattice's ordinary rules in the local code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import libcst as cst

from spmdcheck.analysis.binding import Bound
from spmdcheck.analysis.context import Analysis
from spmdcheck.analysis.dtensor.fixes import fixed_grads
from spmdcheck.analysis.dtensor.values import (
    PARTIAL,
    REPLICATE,
    REPLICATE_PLACEMENT,
    SHARD,
    DTensorValue,
    FlatMeshValue,
    Placements,
    PlacementValue,
    axis_local_type,
    is_none,
    make_dtensor,
    mesh_dims,
    placements_value,
    read_placements,
    to_local,
)
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.values import (
    NUMBER,
    UNKNOWN,
    AxisSize,
    Literal,
    MeshValue,
    Seq,
    TensorValue,
    Value,
)
from spmdcheck.diagnostics.violations.contracts import AssertTypeMismatch, RedistributeToPartial
from spmdcheck.lattice import AI, AxisType, GradState, Kind
from spmdcheck.rules.model import OpRule

Handler = Callable[[Analysis, OpRule, Bound, cst.CSTNode], Value]


def _keyword(rule: OpRule, name: str, default: object = None) -> object:
    return dict(rule.dtensor_args).get(name, default)


def placement(a: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`Shard(d)`, `Replicate()`, `Partial(reduce_op)`: the stub's `placement=` keyword says which; `dim=` and
    `reduce_op=` name the constructor parameters read."""
    kind = str(_keyword(rule, "placement", ""))
    if kind == SHARD:
        dim = bound.literal(rule, str(_keyword(rule, "dim", "dim")))
        return PlacementValue(SHARD, dim if isinstance(dim, int) and not isinstance(dim, bool) else None)
    if kind == REPLICATE:
        return REPLICATE_PLACEMENT
    if kind == PARTIAL:
        op = bound.literal(rule, str(_keyword(rule, "reduce_op", "reduce_op")))
        return PlacementValue(PARTIAL, reduce_op=op if isinstance(op, str) else "?")
    return UNKNOWN


def mesh_or_configured(a: Analysis, value: Value | None, ndim: int | None) -> MeshValue | None:
    """The mesh argument; an unknown one (a mesh passed in as a parameter) is the file's configured mesh when
    the placements have as many dims as it (the header's `mesh = [...]` names the dims' axes in order)."""
    if isinstance(value, MeshValue):
        return value
    if is_none(value) or value is UNKNOWN or not isinstance(value, (Literal, Seq)):
        if a.mesh and (ndim is None or ndim == len(a.mesh)):
            return MeshValue(tuple(a.mesh))
    return None


def _placements_ndim(value: Value | None) -> int | None:
    if isinstance(value, Seq):
        return len(value.items)
    return 1 if isinstance(value, PlacementValue) else None


def _placements(value: Value | None, ndim: int) -> Placements:
    """Placements per mesh dim: all Replicate when none are given (PyTorch's default), else what is read."""
    if is_none(value):
        return (REPLICATE_PLACEMENT,) * ndim
    read = read_placements(value, ndim)
    return read if read is not None else (None,) * ndim


def _tensor_grad(value: Value | None) -> tuple[int | None, GradState]:
    if isinstance(value, TensorValue):
        return value.rank, value.grad
    return None, GradState.UNKNOWN


def distribute_tensor(a: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`distribute_tensor(tensor, mesh, placements)`: the whole tensor (from one rank) laid out as declared."""
    given = bound.get("placements")
    mesh = mesh_or_configured(a, bound.get("device_mesh"), _placements_ndim(given))
    if mesh is None:
        return UNKNOWN
    rank, grad = _tensor_grad(bound.get("tensor"))
    return make_dtensor(mesh, _placements(given, len(mesh_dims(mesh))), rank=rank, grad=grad)


def from_local(a: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`DTensor.from_local(t, mesh, placements)`: `t` must have the types the placements declare (SPMD401)."""
    given = bound.get("placements")
    mesh = mesh_or_configured(a, bound.get("device_mesh"), _placements_ndim(given))
    if mesh is None:
        return UNKNOWN
    local = bound.get("local_tensor")
    placements = _placements(given, len(mesh_dims(mesh)))
    if isinstance(local, TensorValue) and not local.opaque:
        check_local(a, local, mesh_dims(mesh), placements, node, "`DTensor.from_local`")
    rank, grad = _tensor_grad(local)
    return make_dtensor(mesh, placements, rank=rank, grad=grad)


def check_local(
    a: Analysis,
    local: TensorValue,
    dims: tuple[tuple[str, ...], ...],
    placements: Placements,
    node: cst.CSTNode,
    what: str,
) -> None:
    """A local value declared Replicate must be the same on every rank (not a pending or partial sum, not
    varying); one declared Shard(d) must not be a partial sum nor sharded on another dim."""
    spelled = "[" + ", ".join(str(p) if p is not None else "?" for p in placements) + "]"
    for dim, declared in zip(dims, placements):
        if declared is None or declared.forward is None:
            continue
        for axis in dim:
            have = local.type.get(axis)
            if have is None:
                continue
            form = _mismatch(have, declared, local.rank)
            if form is None:
                continue
            violation = AssertTypeMismatch(
                f"{what} with placements {spelled} (mesh dim {'/'.join(dim)!r}: {declared})",
                axis,
                have,
                declared.forward,
                form,  # type: ignore[arg-type]
                have.pending.ref if have.pending is not None else None,
            )
            a.report(Finding.of(violation, node))


def _mismatch(have: AxisType, declared: PlacementValue, rank: int | None) -> str | None:
    """How a local type disagrees with a placement: "kind", "shard-dim", or None when it agrees."""
    partial = have.kind is Kind.P or have.is_pending
    if declared.kind == REPLICATE:
        return "kind" if partial or have.kind is Kind.V else None
    if declared.kind == SHARD:
        if partial:
            return "kind"
        if have.shard is not None and declared.dim is not None and not _same_dim(have.shard, declared.dim, rank):
            return "shard-dim"
    return None


def _same_dim(a: int, b: int, rank: int | None) -> bool:
    if (a < 0) == (b < 0):
        return a == b
    return rank is None or a % rank == b % rank


def _receiver(bound: Bound) -> DTensorValue | None:
    value = bound.get("self")
    return value if isinstance(value, DTensorValue) else None


def _grads(bound: Bound, dt: DTensorValue) -> Placements | None:
    """The `grad_placements=` argument: None when not given; unknown items when it cannot be read."""
    given = bound.get("grad_placements")
    if is_none(given):
        return None
    read = read_placements(given, len(dt.dims))
    return read if read is not None else (None,) * len(dt.dims)


def to_local_call(a: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`x.to_local(grad_placements=...)`: this rank's piece, typed by the placements and gradient placements."""
    dt = _receiver(bound)
    if dt is None:
        return UNKNOWN
    grads = _grads(bound, dt)
    return marked(a, to_local(dt, grads), dt, grads, node, "to_local")


def marked(
    a: Analysis, local: TensorValue, dt: DTensorValue, grads: Placements | None, node: cst.CSTNode, api: str
) -> TensorValue:
    """`local` remembering the boundary that made it Invariant on an axis (named when it is mixed, with the
    DTensor spelling of the fix where `api` is `to_local` or `full_tensor`: ops.py, fixes.py)."""
    used = grads if grads is not None else dt.grads if dt.grads is not None else dt.placements
    entries = []
    for i, dim in enumerate(dt.dims):
        if axis_local_type(dt.placements[i], used[i]) == AI:
            fixed = fixed_grads(used, i) if api in ("to_local", "full_tensor") else ""
            entries.extend((axis, a.ctx.site(node), api, fixed) for axis in dim)
    return replace(local, boundary=tuple(entries)) if entries else local


def full_tensor(a: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`x.full_tensor(grad_placements=...)`: all-gathered (Replicate on every dim); its gradient placement is
    Replicate by default (Invariant locally), Partial when declared so (Replicate locally)."""
    dt = _receiver(bound)
    if dt is None:
        return UNKNOWN
    whole = dt.with_placements((REPLICATE_PLACEMENT,) * len(dt.dims))
    grads = _grads(bound, dt)
    grads = grads if grads is not None else whole.placements
    return marked(a, to_local(whole, grads), whole, grads, node, "full_tensor")


def redistribute(a: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`x.redistribute(mesh, placements)`: the same DTensor with new placements (DTensor moves the data)."""
    dt = _receiver(bound)
    if dt is None:
        return UNKNOWN
    given = bound.get("placements")
    if is_none(given):
        return dt
    target = _placements(given, len(dt.dims))
    for dim, have, wanted in zip(dt.dims, dt.placements, target):
        if wanted is not None and wanted.kind == PARTIAL and have is not None and have != wanted:
            a.report(Finding.of(RedistributeToPartial("/".join(dim), str(have)), node))
    return dt.with_placements(target)


def placements_of(a: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`x.placements`."""
    dt = _receiver(bound)
    return placements_value(dt.placements) if dt is not None else UNKNOWN


def gradient_of(a: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`x.grad` after backward(): a DTensor with the placements backward gives it (DTensorValue.backward),
    itself no part of the autograd graph."""
    dt = _receiver(bound)
    if dt is None:
        return UNKNOWN
    return DTensorValue(dt.dims, dt.gradient_placements(), None, dt.rank, GradState.NO)


def device_mesh_of(a: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`x.device_mesh`."""
    dt = _receiver(bound)
    return dt.mesh if dt is not None else UNKNOWN


def mesh_size(a: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`mesh["tp"].size()`, `mesh.size("tp")`: the number of ranks along one axis (a number elsewhere; a count
    of pieces that makes `x.chunk(n, dim)[rank]` this rank's block: subscripts.py)."""
    mesh = bound.get("self")
    if not isinstance(mesh, MeshValue):
        return NUMBER
    dims = mesh_dims(mesh)
    which = bound.literal(rule, str(_keyword(rule, "dim", "mesh_dim")))
    if which is None and len(dims) == 1:
        dim = dims[0]
    elif isinstance(which, int) and not isinstance(which, bool) and -len(dims) <= which < len(dims):
        dim = dims[which]
    elif isinstance(which, str) and which in mesh.axes:
        dim = dims[mesh.axes.index(which)]
    else:
        return NUMBER
    return AxisSize(axis=dim[0]) if len(dim) == 1 else NUMBER


def flatten_mesh(a: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """`mesh["dp", "cp"]._flatten("dp_cp")`: one mesh dim spanning the axes of all of the mesh's dims."""
    mesh = bound.get("self")
    if not isinstance(mesh, MeshValue):
        return UNKNOWN
    parts = tuple(axis for dim in mesh_dims(mesh) for axis in dim)
    name = bound.literal(rule, "mesh_dim_name")
    return FlatMeshValue((name if isinstance(name, str) else "_".join(parts),), (parts,))


HANDLERS: dict[str, Handler] = {
    "placement": placement,
    "distribute_tensor": distribute_tensor,
    "from_local": from_local,
    "to_local": to_local_call,
    "full_tensor": full_tensor,
    "redistribute": redistribute,
    "placements": placements_of,
    "device_mesh": device_mesh_of,
    "grad": gradient_of,
    "flatten": flatten_mesh,
    "mesh_size": mesh_size,
}

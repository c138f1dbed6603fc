"""Subscripts: `x[i]` read (basic indexing is linear and moves the shard dim; advanced indexing is not) and
`x[i] = y` written (a mutation, checked like an in-place op)."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from spmdcheck.analysis import containers, ops, rankflow
from spmdcheck.analysis.dispatch import apply_rule, default_tensor_rule
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.values import (
    NUMBER,
    UNKNOWN,
    Alternatives,
    AxisSize,
    DictValue,
    DimSize,
    Homogeneous,
    Literal,
    MeshValue,
    Pieces,
    PyNumber,
    RankValue,
    Seq,
    ShapeValue,
    TensorValue,
    Unknown,
    Value,
)
from spmdcheck.diagnostics.violations.inference import SetitemTypeChange
from spmdcheck.lattice import AxisType, GradState, Kind, Linearity, Operand, SpmdType, infer_axis
from spmdcheck.rules.model import OpRule


# ---------------------------------------------------------------- subscripts
def getitem(interp: Engine, base: Value, node: cst.Subscript) -> Value:
    if len(node.slice) == 1 and type(node.slice[0].slice) is cst.Slice and not isinstance(base, _SIZED):
        part = node.slice[0].slice
        lower, upper, step = (interp.eval(p) if p is not None else None for p in (part.lower, part.upper, part.step))
        ranked = rankflow.sliced(base, lower, upper, step)  # a rank's stride of a list (rankflow.py)
        if ranked is not None:
            return ranked
        index_values: list[Value] = [Literal(slice(None))]
    else:
        index_values = [
            interp.eval(el.slice.value) if isinstance(el.slice, cst.Index) else _eval_slice(interp, el.slice)
            for el in node.slice
        ]
    if isinstance(base, (TensorValue, Alternatives)):
        return _tensor_getitem(interp, base, node, index_values)
    if (
        isinstance(base, Seq)
        and len(index_values) == 1
        and isinstance(index_values[0], Literal)
        and isinstance(index_values[0].value, int)
    ):
        i = index_values[0].value
        if -len(base.items) <= i < len(base.items):
            return base.items[i]
        return UNKNOWN
    if isinstance(base, Pieces) and len(index_values) == 1 and isinstance(index_values[0], RankValue):
        return rank_piece(base, index_values[0])
    if isinstance(base, Homogeneous):
        return base.item
    if isinstance(base, ShapeValue) and len(node.slice) == 1:
        return _shape_item(interp, base, node.slice[0].slice, index_values[0])
    if isinstance(base, (DictValue, Seq)) and len(index_values) == 1:
        # a dict's entry (an nn.ModuleDict of layers, a config dict, a registry), a list's item at an index
        # the checker cannot read: containers.py
        found = containers.getitem(interp, base, index_values[0], node)
        if found is not None:
            return found
    names = [v.value for v in index_values if isinstance(v, Literal) and isinstance(v.value, str)]
    if isinstance(base, MeshValue) and len(names) == len(index_values):
        return MeshValue(tuple(names))  # `mesh["dp", "cp"]`
    if type(base) is Unknown and names and len(names) == len(index_values) and set(names) <= set(interp.mesh):
        # a mesh the checker cannot see (a `mesh` parameter) is the configured one, as at a DTensor boundary
        # (dtensor/boundary.py): `mesh["tp"]` names the configured axis
        return MeshValue(tuple(names))
    return UNKNOWN


def rank_piece(pieces: Pieces, index: RankValue) -> Value:
    """`x.chunk(n, dim)[rank]` with a rank along one axis: each rank of that axis takes a different piece, so
    the piece varies along it: S(dim) when `x` is the same on every rank there (R or I) and `n` is the axis's
    size (`mesh["tp"].size()`), else V (a piece of a pending or partial sum is left unknown). A piece of a
    tensor whose type is unknown varies along that axis all the same: its other axes stay unknown."""
    piece = pieces.item
    if not isinstance(piece, TensorValue) or index.varies is None or len(index.varies) != 1:
        return piece
    (axis,) = index.varies
    if piece.opaque:
        return replace(piece, type=SpmdType({axis: AxisType(Kind.V)}), opaque=False)
    axes = dict(piece.type.items())
    had = axes.pop(axis, None)
    if had is not None and (had.kind is Kind.R or had.kind is Kind.I) and _whole_blocks(pieces, axis):
        axes[axis] = AxisType(Kind.V, shard=pieces.dim)
    elif had is None or not (had.kind is Kind.P or had.is_pending):
        axes[axis] = AxisType(Kind.V)
    return replace(piece, type=SpmdType(axes))


def _whole_blocks(pieces: Pieces, axis: str) -> bool:
    """Whether the pieces are one block per rank of `axis`, cut along a known dim."""
    return pieces.dim is not None and isinstance(pieces.count, AxisSize) and pieces.count.axis == axis


# what a slice keeps typed as it was (a tensor's dims, a shape's sizes): not a Python list
_SIZED = (TensorValue, Alternatives, ShapeValue)


def _shape_item(interp: Engine, shape: ShapeValue, index: cst.BaseSlice, value: Value) -> Value:
    """`x.shape[i]` (one dim's size) and `x.shape[a:b]` with constant bounds (those dims' sizes)."""
    if isinstance(index, cst.Index):
        if isinstance(value, Literal) and isinstance(value.value, int) and not isinstance(value.value, bool):
            return DimSize(shape.tensor, value.value)
        return NUMBER
    if isinstance(index, cst.Slice) and index.step is None:
        bounds = [interp.eval(part) if part is not None else Literal(None) for part in (index.lower, index.upper)]
        if all(isinstance(b, Literal) and (b.value is None or type(b.value) is int) for b in bounds):
            return shape.slice(bounds[0].value, bounds[1].value)  # type: ignore[union-attr]
    return UNKNOWN


def _eval_slice(interp: Engine, s: cst.BaseSlice) -> Value:
    if isinstance(s, cst.Slice):
        for part in (s.lower, s.upper, s.step):
            if part is not None:
                interp.eval(part)
        return Literal(slice(None))
    return UNKNOWN


def _tensor_getitem(interp: Engine, base: Value, node: cst.Subscript, index: list[Value]) -> Value:
    """Basic indexing is linear (a deliberate difference); boolean/advanced indexing is not."""
    advanced = any(isinstance(v, (TensorValue, Alternatives, Seq)) for v in index)
    qual = "torch.Tensor.__getitem__"
    rule = interp.ctx.registry.lookup(qual)
    if rule is None:
        rule = default_tensor_rule(qual, True)
    if advanced:
        rule = OpRule(qualname=qual, params=rule.params, linearity=Linearity.NONLINEAR)
    index_args = [(None, v, node) for v in index if isinstance(v, (TensorValue, Alternatives))]
    result = apply_rule(interp, rule, [(None, base, node.value), *index_args], node)
    if isinstance(result, TensorValue):
        result = _index_layout(base, result, index)
    return result


def _index_layout(base: Value, result: TensorValue, index: list[Value]) -> TensorValue:
    """Move the shard dim through basic indexing: ints drop a dim, None adds one, slices keep (but cut a block)."""
    rank = base.rank if isinstance(base, TensorValue) else None
    axes = {}
    for axis, t in result.type.items():
        if t.kind is not Kind.V or t.shard is None:
            axes[axis] = t
            continue
        shard = t.shard if t.shard >= 0 or rank is None else t.shard + rank
        if shard < 0 or any(isinstance(v, Literal) and v.value is Ellipsis for v in index):
            axes[axis] = AxisType(Kind.V, pending=t.pending)
            continue
        pos, new_pos, kept = 0, 0, None
        for v in index:
            if isinstance(v, Literal) and v.value is None:
                new_pos += 1
                continue
            if pos == shard:
                if isinstance(v, Literal) and isinstance(v.value, slice) and v.value == slice(None):
                    kept = new_pos
                break
            if isinstance(v, Literal) and isinstance(v.value, int) and not isinstance(v.value, bool):
                pos += 1
                continue
            pos += 1
            new_pos += 1
        else:
            kept = new_pos + (shard - pos)
        axes[axis] = (
            AxisType(Kind.V, shard=kept, pending=t.pending)
            if t.pending is None or kept is None
            else AxisType(Kind.V, pending=t.pending)
        )
    return TensorValue(SpmdType(axes), result.grad, None)


def setitem(interp: Engine, target: cst.Subscript, value: Value, value_node: cst.CSTNode | None) -> None:
    """`x[i] = y` mutates x: checked like an in-place op (a deliberate difference from spmd_types)."""
    base = interp.eval(target.value)
    index = [interp.eval(el.slice.value) for el in target.slice if isinstance(el.slice, cst.Index)]
    if len(index) == len(target.slice) == 1 and containers.is_container(base):
        if containers.setitem(interp, target, base, index[0], value):
            return
    if isinstance(base, TensorValue) and not isinstance(value, (TensorValue, Alternatives, Literal, PyNumber)):
        # A value the checker cannot model (it may be a tensor of any type) written into the tensor: what
        # the tensor holds afterwards is not known, and unknown is silent.
        interp.rebind(target.value, TensorValue(SpmdType(), base.grad, base.rank, opaque=True))
        return
    if not isinstance(base, TensorValue) or not isinstance(value, TensorValue):
        return
    axes: dict[str, AxisType] = {}
    for axis in sorted(set(base.type) & set(value.type)):
        old, new = base.type[axis], value.type[axis]
        # the tensor holds both its old values and the written ones: combined as operands, it keeps its type
        # when that is what they infer to (replicated data written into a varying buffer leaves it varying)
        kept = (
            old.kind is new.kind
            or infer_axis([Operand(old.kind, base.grad), Operand(new.kind, value.grad)], Linearity.LINEAR) is old.kind
        )
        axes[axis] = old if kept else new
    for axis in set(base.type) - set(value.type):
        axes[axis] = base.type[axis]
    merged = TensorValue(SpmdType(axes), GradState.join([base.grad, value.grad]), base.rank)
    ops.check_mutation(interp, base, merged, target.value, target, SetitemTypeChange, "x[...] = y")

"""How an op moves the tracked shard dim S(d) and the rank, per the stub's `@dims` rule."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spmdcheck.analysis.binding import NOT_LITERAL, Bound
from spmdcheck.analysis.values import DimSize, Literal, Seq, TensorValue, Unknown, Value
from spmdcheck.rules.model import DimsRule, OpRule


@dataclass(frozen=True)
class DimResult:
    shard: int | None  # the result's shard dim, None = plain V
    reduced: bool = False  # the op summed over the sharded dim: a pending sum
    rank: int | None = None


def _norm(d: int, rank: int | None) -> int | None:
    if d >= 0:
        return d
    return d + rank if rank is not None else None


def _ints(value: object) -> tuple[int, ...] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value,)
    if isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def _guess_rank(rank: int | None, shard: int | None, args: list[object], at_least: int = 0) -> int | None:
    """An unknown rank, when a positive shard dim meets a negative dim argument (or the reverse): take 2.

    Otherwise the two cannot be compared and the layout would be dropped silently, which hid real bugs
    from the differential fuzzer (a sum over dim -1 of an S(1) activation). Activations and weights are
    matrices far more often than anything else; `.T` makes the same assumption. `at_least` is the rank the
    value's other shard dims prove (S(1) on one axis and S(2) on another: 3 or more), which rules the
    guess out: torchtitan's per-head activations are S(1)/S(2) and rank 4.
    """
    if rank is not None or shard is None:
        return rank
    dims = [d for a in args for d in (_ints(a) or ())]
    if not any((d < 0) != (shard < 0) for d in dims):
        return None
    needed = max([at_least, shard + 1 if shard >= 0 else -shard] + [d + 1 if d >= 0 else -d for d in dims])
    return 2 if needed <= 2 else None


def move(rule: OpRule, bound: Bound, shard: int | None, rank: int | None, at_least: int = 0) -> DimResult:
    """The result's shard dim given the (first sharded) operand's shard dim and rank (or, when the rank is
    unknown, the least rank its layout on every axis proves: `at_least`)."""
    dims: DimsRule | None = rule.dims
    if dims is None:
        return DimResult(None, rank=None)
    args = [bound.literal(rule, p) for p in dims.params]
    rank = _guess_rank(rank, shard, args, at_least)
    mover = _MOVERS.get(dims.name)
    if mover is None:
        return DimResult(None)
    return mover(_Call(rule, bound, dims, args), shard, rank)


def sized_by_shard(rule: OpRule, bound: Bound, axis: str) -> int | None:
    """`x.expand(w.shape[0], -1, -1)` with `w` sharded on that dim on `axis`: the result's dim that takes the
    local size of a sharded dim (a replicated value broadcast over this rank's block: S(that dim)); None
    when no size is one."""
    if rule.dims is None or not rule.dims.params:
        return None
    sizes = [v for v, _ in bound.all(rule.dims.params[0])]
    if len(sizes) == 1 and isinstance(sizes[0], Seq):
        sizes = list(sizes[0].items)
    for position, size in enumerate(sizes):
        if isinstance(size, DimSize) and size.tensor is not None:
            t = size.tensor.type.get(axis)
            rank = size.tensor.rank
            if t is not None and t.shard is not None and (
                t.shard == size.index or (rank is not None and _norm(t.shard, rank) == _norm(size.index, rank))
            ):
                return position
    return None


@dataclass(frozen=True)
class _Call:
    """The op call a `@dims` rule reads: its rule, bound arguments, and the literal values of the dims params."""

    rule: OpRule
    bound: Bound
    dims: DimsRule
    args: list[object]


def _keep(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    return DimResult(shard, rank=rank)


def _t(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    # t(), .T, .H: for tensors of at most 2 dims, in practice matrices (weights)
    return _swap_last(call, shard, 2 if rank is None else rank)


def _swap_last(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    """`.T` / `.mT`: the last two dims swap."""
    if rank is not None and rank >= 2:
        s = _norm(shard, rank) if shard is not None else None
        if s is None:
            return DimResult(None, rank=rank)
        swap = {rank - 1: rank - 2, rank - 2: rank - 1}
        return DimResult(swap.get(s, s), rank=rank)
    if shard is not None and shard < 0:
        return DimResult({-1: -2, -2: -1}.get(shard, shard), rank=rank)
    return DimResult(None, rank=rank)


def _transpose(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    args = call.args
    if len(args) != 2:
        return DimResult(None)
    d0, d1 = _ints(args[0]), _ints(args[1])
    if d0 is None or d1 is None:
        return DimResult(None)
    a, b = d0[0], d1[0]
    if shard is None:
        return DimResult(None, rank=rank)
    if rank is not None:
        a, b, s = _norm(a, rank), _norm(b, rank), _norm(shard, rank)
    elif (a < 0) == (b < 0) == (shard < 0):
        s = shard
    else:
        return DimResult(None)
    return DimResult(b if s == a else a if s == b else s, rank=rank)


def _permute(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    # permute(0, 2, 1) (variadic) or permute((0, 2, 1)) / permute(dims=[0, 2, 1])
    dims = call.dims
    given = [v for v, _ in call.bound.all(dims.params[0])] if dims.params else []
    if len(given) == 1:
        perm = _ints(call.bound.literal(call.rule, dims.params[0]))
    else:
        vals = [v.value if isinstance(v, Literal) else None for v in given]
        perm = tuple(vals) if vals and all(isinstance(v, int) for v in vals) else None  # type: ignore[assignment]
    r = len(perm) if perm else rank
    if shard is None or not perm:
        return DimResult(None, rank=r)
    s = _norm(shard, r)
    norm_perm = [_norm(p, r) for p in perm]
    return DimResult(norm_perm.index(s) if s in norm_perm else None, rank=r)


def _movedim(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    args = call.args
    src, dst = (_ints(args[0]), _ints(args[1])) if len(args) == 2 else (None, None)
    if shard is None or src is None or dst is None or rank is None:
        return DimResult(None, rank=rank)
    order = [d for d in range(rank) if d not in [_norm(x, rank) for x in src]]
    for s_dim, d_dim in sorted(zip([_norm(x, rank) for x in src], [_norm(x, rank) for x in dst]), key=lambda p: p[1]):
        order.insert(d_dim, s_dim)
    s = _norm(shard, rank)
    return DimResult(order.index(s) if s in order else None, rank=rank)


def _unsqueeze(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    d = _ints(call.args[0]) if call.args else None
    new_rank = rank + 1 if rank is not None else None
    if shard is None or d is None:
        return DimResult(None, rank=new_rank)
    dim = _norm(d[0], new_rank)
    s = _norm(shard, rank)
    if dim is None or s is None:
        if d[0] >= 0 and shard >= 0:
            return DimResult(shard + 1 if shard >= d[0] else shard, rank=new_rank)
        if d[0] < 0 and shard < 0:
            # counted from the end: dims at or left of the new one move one further left
            return DimResult(shard - 1 if shard <= d[0] else shard, rank=new_rank)
        return DimResult(None, rank=new_rank)
    return DimResult(s + 1 if s >= dim else s, rank=new_rank)


def _squeeze(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    """`squeeze(d)` and `select(d, i)`: dim d goes."""
    args = call.args
    d = _ints(args[0]) if args and args[0] is not NOT_LITERAL else None
    if d is None:
        return DimResult(None)
    new_rank = rank - 1 if rank is not None else None
    if shard is None:
        return DimResult(None, rank=new_rank)
    dim, s = _norm(d[0], rank), _norm(shard, rank)
    if dim is None or s is None:
        if d[0] >= 0 and shard >= 0:
            dim, s = d[0], shard
        else:
            return DimResult(None, rank=new_rank)
    if s == dim:
        return DimResult(None, rank=new_rank)
    return DimResult(s - 1 if s > dim else s, rank=new_rank)


def _narrow(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    """`narrow(d, ...)` and `split(..., d)`: dim d is cut (a shard there loses its layout)."""
    d = _ints(call.args[0]) if call.args else None
    if shard is None or d is None:
        return DimResult(None, rank=rank)
    dim, s = _norm(d[0], rank), _norm(shard, rank)
    if dim is None or s is None:
        same = (d[0] >= 0) == (shard >= 0)
        return DimResult(None if (not same or d[0] == shard) else shard, rank=rank)
    return DimResult(None if s == dim else shard, rank=rank)


def _reduce(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    """A sum or mean over dims (a mean over the sharded dim is a pending *mean*: see ops)."""
    args = call.args
    d = args[0] if args else None
    keepdim = bool(args[1]) if len(args) > 1 and isinstance(args[1], bool) else False
    if d is None:
        return DimResult(None, reduced=shard is not None, rank=rank if keepdim else 0)
    ds = _ints(d)
    if ds is None:
        return DimResult(None)
    new_rank = rank if keepdim or rank is None else rank - len(ds)
    if shard is None:
        return DimResult(None, rank=new_rank)
    norm = [_norm(x, rank) for x in ds]
    s = _norm(shard, rank)
    if s is None or None in norm:
        if all(x >= 0 for x in ds) and shard >= 0:
            norm, s = list(ds), shard
        elif shard in ds:
            return DimResult(None, reduced=True, rank=new_rank)
        else:
            return DimResult(None, rank=new_rank)
    if s in norm:
        return DimResult(None, reduced=True, rank=new_rank)
    if keepdim:
        return DimResult(s, rank=new_rank)
    return DimResult(s - sum(1 for x in norm if x is not None and x < s), rank=new_rank)


def _cat(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    d = _ints(call.args[0]) if call.args else (0,)
    if shard is None or d is None:
        return DimResult(None, rank=rank)
    dim, s = _norm(d[0], rank), _norm(shard, rank)
    if dim is None or s is None:
        return DimResult(None if d[0] == shard or (d[0] >= 0) != (shard >= 0) else shard, rank=rank)
    return DimResult(None if s == dim else shard, rank=rank)


def _stack(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    d = _ints(call.args[0]) if call.args else (0,)
    new_rank = rank + 1 if rank is not None else None
    if shard is None or d is None:
        return DimResult(None, rank=new_rank)
    if d[0] >= 0 and shard >= 0:
        return DimResult(shard + 1 if shard >= d[0] else shard, rank=new_rank)
    return DimResult(None, rank=new_rank)


def _flatten(call: _Call, shard: int | None, rank: int | None) -> DimResult:
    start = _ints(call.args[0]) if call.args else (0,)
    if shard is None or start is None:
        return DimResult(None)
    st, s = _norm(start[0], rank), _norm(shard, rank)
    if st is not None and s is not None and s < st:
        return DimResult(s)
    return DimResult(None)


def _length(bound: Bound, param: str) -> int | None:
    value = bound.get(param)
    items = getattr(value, "items", None)
    return len(items) if isinstance(items, tuple) else None


def _unflatten(rule: OpRule, bound: Bound, dims: DimsRule, shard: int | None, rank: int | None) -> DimResult:
    """`x.unflatten(dim, sizes)`: dims before `dim` stay, dims after it move by len(sizes) - 1; a shard on
    `dim` itself goes to the outermost new dim when that one is inferred (`-1`: `(-1, head_dim)` splits each
    rank's block of heads), else its layout is unknown."""
    if len(dims.params) < 2:
        return DimResult(None)
    d = _ints(bound.literal(rule, dims.params[0]))
    n = _length(bound, dims.params[1])
    new_rank = rank + n - 1 if rank is not None and n is not None else None
    if shard is None or d is None or n is None:
        return DimResult(None, rank=new_rank)
    sizes = bound.get(dims.params[1])
    first = sizes.items[0] if sizes is not None and getattr(sizes, "items", None) else None  # type: ignore[union-attr]
    outer_inferred = isinstance(first, Literal) and first.value == -1
    dim, s = _norm(d[0], rank), _norm(shard, rank)
    if dim is not None and s is not None:
        if s == dim:
            return DimResult(dim if outer_inferred else None, rank=new_rank)
        return DimResult(s if s < dim else s + n - 1, rank=new_rank)
    if (d[0] < 0) != (shard < 0):
        return DimResult(None, rank=new_rank)
    if d[0] >= 0:  # both counted from the front
        if shard == d[0]:
            return DimResult(shard if outer_inferred else None, rank=new_rank)
        return DimResult(shard if shard < d[0] else shard + n - 1, rank=new_rank)
    # both counted from the end: dims after `dim` keep their place from the end
    if shard == d[0]:
        return DimResult(shard - (n - 1) if outer_inferred else None, rank=new_rank)
    return DimResult(shard if shard > d[0] else shard - (n - 1), rank=new_rank)


def _reshape(rule: OpRule, bound: Bound, dims: DimsRule, shard: int | None, rank: int | None) -> DimResult:
    """`x.view(*sizes)` / `x.reshape(sizes)`. Sizes that are the input's own (`x.shape[0]`, `b, s, _ = x.shape`)
    keep their dims: a leading run of them keeps the dims in front, a trailing run the dims at the end, and a
    shard there stays. A shard on the first dim after the leading run moves to the first new dim when that one
    is inferred (`-1`) and every other new size there is the same on each rank: each rank's block of the
    outermost dim of the reshaped region is a block of the new outermost dim (`t.view(t.shape[0],
    t.shape[1], -1, head_dim)` splits the heads of an S(2) activation). Anything else: an unknown shard dim."""
    if not dims.params or bound.starred:
        return DimResult(None)
    sizes: list[Value] = [v for v, _ in bound.all(dims.params[0])]
    if len(sizes) == 1 and isinstance(sizes[0], Seq):
        sizes = list(sizes[0].items)
    n = len(sizes)
    source = bound.get(rule.params[0].name) if rule.params else None
    if not sizes or shard is None or not isinstance(source, TensorValue):
        return DimResult(None, rank=n or None)
    if rank is None:  # `b, s, _ = x.shape` said how many dims x has
        rank = next((v.rank for v in sizes if isinstance(v, DimSize) and v.tensor is source and v.rank), None)

    def own(item: Value, front: int, back: int) -> bool:
        """`item` is the size of the input's dim `front` (counted from the front) / `back` (from the end)."""
        return isinstance(item, DimSize) and item.tensor is source and item.index in (front, back)

    lead = 0
    while lead < n and own(sizes[lead], lead, lead - rank if rank is not None else lead):
        lead += 1
    trail = 0
    while trail < n - lead:
        back = -1 - trail
        if not own(sizes[n - 1 - trail], rank + back if rank is not None else back, back):
            break
        trail += 1
    s = _norm(shard, rank) if rank is not None else (shard if shard >= 0 else None)
    if s is not None and s < lead:
        return DimResult(s, rank=n)
    from_end = shard if shard < 0 else (shard - rank if rank is not None else None)
    if from_end is not None and -from_end <= trail:
        return DimResult(n + from_end, rank=n)
    region = sizes[lead : n - trail]
    inferred = bool(region) and isinstance(region[0], Literal) and region[0].value == -1
    if s == lead and inferred and all(_same_on_every_rank(v, source, s) for v in region[1:]):
        return DimResult(lead, rank=n)
    return DimResult(None, rank=n)


def _same_on_every_rank(size: Value, source: TensorValue, shard: int) -> bool:
    """A size no rank computes differently: a constant, an unsharded dim of the input, or a value the checker
    does not know (a parameter: `head_dim`). A number computed here (maybe from the sharded dim) is not."""
    if isinstance(size, DimSize):
        return size.tensor is source and size.index != shard
    if isinstance(size, Literal):
        return isinstance(size.value, int) and size.value > 0
    return isinstance(size, Unknown)


def _pad(rule: OpRule, bound: Bound, dims: DimsRule, shard: int | None, rank: int | None) -> DimResult:
    """`F.pad(x, pad)` pads the last len(pad) // 2 dims: a shard elsewhere keeps its dim; a padded sharded dim
    (each rank pads its own block) has no global layout."""
    n = _length(bound, dims.params[0]) if dims.params else None
    if shard is None or n is None:
        return DimResult(None, rank=rank)
    from_end = shard if shard < 0 else (shard - rank if rank is not None else None)
    if from_end is None or -from_end <= n // 2:
        return DimResult(None, rank=rank)
    return DimResult(shard, rank=rank)


_MOVERS: dict[str, Callable[[_Call, int | None, int | None], DimResult]] = {
    "keep": _keep,
    "t": _t,
    "T": _swap_last,
    "transpose": _transpose,
    "permute": _permute,
    "movedim": _movedim,
    "unsqueeze": _unsqueeze,
    "squeeze": _squeeze,
    "select": _squeeze,
    "narrow": _narrow,
    "split": _narrow,
    "reduce": _reduce,
    "mean": _reduce,
    "cat": _cat,
    "stack": _stack,
    "unflatten": lambda call, shard, rank: _unflatten(call.rule, call.bound, call.dims, shard, rank),
    "reshape": lambda call, shard, rank: _reshape(call.rule, call.bound, call.dims, shard, rank),
    "pad": lambda call, shard, rank: _pad(call.rule, call.bound, call.dims, shard, rank),
    "flatten": _flatten,
}

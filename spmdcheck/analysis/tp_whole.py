"""The output of a submodule a tensor-parallel plan leaves out, where it meets a planned layer's feature shard.

A module left out of a plan (tp_plans.py) keeps its whole parameters, so its output holds every feature on
every rank. Elementwise with a ColwiseParallel layer's local output (`use_local_output=True`: this rank's
slice of the features, S(-1)), the two local shapes differ on the feature dim: a shape error at run time, on
more than one rank (the plan entry between the column-parallel and the row-parallel layer is missing). The
lattice alone cannot tell that operand from an I value that broadcasts along the features (a norm's scale),
so the unplanned output is remembered here, by identity, for as long as it lives; ops.py asks `report` first
when an elementwise op mixes types.
"""

from __future__ import annotations

import weakref

from spmdcheck.analysis.binding import Slot
from spmdcheck.analysis.context import Analysis
from spmdcheck.analysis.findings import Finding, Suggestion
from spmdcheck.analysis.values import TensorValue
from spmdcheck.diagnostics.violations.inference import ShardedDimMismatch
from spmdcheck.lattice import Kind

# id -> the unplanned output (alive: its id is not reused), and what to call its submodule in a fix
_WHOLE: weakref.WeakValueDictionary[int, TensorValue] = weakref.WeakValueDictionary()
_NAMES: dict[int, tuple[str, str]] = {}


def remember(value: TensorValue, attr: str, sibling_fix: str) -> TensorValue:
    """`value` is the whole output of the unplanned submodule `attr`; `sibling_fix` the plan entry that
    would shard it as its planned neighbour is (`"w3": ColwiseParallel()`)."""
    key = id(value)
    _WHOLE[key] = value
    _NAMES[key] = (attr, sibling_fix)
    weakref.finalize(value, _NAMES.pop, key, None)
    return value


def _whole(slot: Slot) -> tuple[str, str] | None:
    value = slot.value
    if value is None or _WHOLE.get(id(value)) is not value:
        return None
    return _NAMES.get(id(value))


def report(interp: Analysis, slots: list[Slot], axis: str, node: object, op_name: str) -> bool:
    """An elementwise op mixing an unplanned submodule's whole output with a feature shard S(-1) on `axis`:
    SPMD108 at the op, with the plan entry as the fix (True: reported)."""
    if not _WHOLE:
        return False
    whole = next((s for s in slots if _whole(s) is not None), None)
    if whole is None:
        return False
    sharded = None
    for slot in slots:
        value = slot.value
        t = value.type.get(axis) if isinstance(value, TensorValue) else None
        if t is not None and t.kind is Kind.V and t.shard is not None and _last_dim(t.shard, value.rank):  # type: ignore[union-attr]
            sharded = slot
            break
    if sharded is None:
        return False
    attr, fix = _whole(whole)  # type: ignore[misc]
    operands = tuple(
        (interp.ctx.code_of(s.node), str(s.value.type.get(axis, "?")) if isinstance(s.value, TensorValue) else "Scalar")
        for s in slots
    )
    violation = ShardedDimMismatch(
        op_name,
        "...h,...h->...h",
        "h",
        axis,
        interp.ctx.code_of(sharded.node),
        interp.ctx.code_of(whole.node),
        operands,
    )
    title = f"plan `{attr}` as its neighbour is, so that its output is this rank's slice of the features too"
    interp.report(Finding.of(violation, node, [Suggestion(title, fix)]))  # type: ignore[arg-type]
    return True


def _last_dim(shard: int, rank: int | None) -> bool:
    return shard == -1 or (rank is not None and shard == rank - 1)

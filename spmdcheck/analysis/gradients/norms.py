"""Global-norm clipping in the gradient walk (SPMD605): the squared gradient norm and the axes it is summed over.

`p.grad.norm()` (`torch.norm(g)`, `torch.linalg.vector_norm(g)`) is a `Norm` of one parameter's gradient;
its square (`** 2`, or `** p` of a `p`-norm) summed into a zero (`torch.zeros(())`, `0.0`) is a
`SquaredNorm`: the parameters it counts, each with the rank conditions it is counted under (an `if` whose
test is `rank(g) == k` counts it on one rank of g's axis: Megatron's `tp_rank == 0`). Each counted gradient
is, on each mesh axis, *sharded* (a Megatron `tensor_model_parallel` weight on the tensor-parallel axis, an
expert on the data-parallel one: each rank holds its own block), *whole* on every rank (a replicated weight
on the tensor-parallel axis; a gradient summed over an axis by its sync), or unknown there.

A `dist.all_reduce` of the squared norm (SUM) must span every axis on which a counted gradient is sharded or
counted on one rank only, and no axis on which one is whole on every rank and counted on each: the latter is
reported at once (`duplicated`); an axis left out is reported when the norm is next used (`missing`: a later
all-reduce may still add it). Anything the walk cannot name - a term under an unknown condition, a gradient
of unknown state, an op other than sums, a reduction over a group off the mesh - makes the norm inexact, and
an inexact norm is never reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import libcst as cst

from spmdcheck.analysis.gradients.state import OPAQUE, GradRef, Param, Qual, Rank
from spmdcheck.diagnostics.violations.gradient_norms import ClipNormWrongAxes

if TYPE_CHECKING:
    from spmdcheck.analysis.gradients.walker import Walker

# Megatron's mark of a weight split over the tensor-parallel axis, DeepSpeed's mark of an expert parameter
TENSOR_PARALLEL_MARK = "tensor_model_parallel"
EXPERT_MARK = "allreduce"
NORM_FUNCTIONS = frozenset({"norm", "vector_norm"})  # torch.norm, torch.linalg.norm / vector_norm
ZERO_FACTORIES = frozenset({"zeros", "zeros_like"})


@dataclass(frozen=True)
class RankTest:
    """A condition true on one rank of `axis` (`rank(g) == k`)."""

    axis: str


UNKNOWN_CONDITION = object()  # an `if` the walk cannot decide and that is no RankTest


@dataclass(eq=False)
class Norm:
    """The `order`-norm of gradients: one parameter's (`grad.norm(order)`) or several (`get_total_norm(grads)`,
    `vector_norm(torch.stack(norms))`), each term with the conditions it is taken under. `stacked`: the vector
    of the terms' norms (`torch.stack(torch._foreach_norm(grads))`), not yet their norm."""

    terms: tuple[tuple[Param, tuple[Any, ...]], ...]
    order: float
    stacked: bool = False


@dataclass(eq=False)
class SquaredNorm:
    """A sum of squared gradient norms: (parameter, conditions) per term; `exact`: nothing else is in it."""

    terms: list[tuple[Param, tuple[Any, ...]]] = field(default_factory=list)
    exact: bool = True
    reduced: set[str] = field(default_factory=set)
    missing_at: tuple[cst.CSTNode, tuple[str, ...]] | None = None  # a reduction that left out axes, reported on use
    reported: bool = False


@dataclass
class Clipping:
    """What this module keeps during one walk (`Walker.clipping`)."""

    conditions: list[Any] = field(default_factory=list)  # the undecided `if` arms being walked
    included: dict[int, tuple[Any, tuple[Any, ...]]] = field(default_factory=dict)  # id(item) -> (item, conds)


def of(walker: Walker) -> Clipping:
    if walker.clipping is None:
        walker.clipping = Clipping()
    return walker.clipping


# ----------------------------------------------------------------------------------------------- conditions
def rank_condition(
    walker: Walker, expr: cst.BaseExpression, evaluate: Callable[[Walker, Any], Any], test: Callable[[Walker, Any], Any]
) -> Any:
    """A condition the walk's `test` could not decide: a RankTest when it holds on one rank of an axis,
    True/False when the parts decide it, else None."""
    if isinstance(expr, cst.BooleanOperation):
        left = rank_condition(walker, expr.left, evaluate, test)
        is_or = isinstance(expr.operator, cst.Or)
        if left is is_or:  # `True or ...`, `False and ...`
            return left
        right = rank_condition(walker, expr.right, evaluate, test)
        if left is (not is_or):
            return right
        if right is (not is_or):
            return left
        return right if is_or and right is True else None
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        target = expr.comparisons[0]
        if isinstance(target.operator, cst.Equal):
            left, right = evaluate(walker, expr.left), evaluate(walker, target.comparator)
            for rank, other in ((left, right), (right, left)):
                if isinstance(rank, Rank) and isinstance(other, int) and not isinstance(other, bool):
                    return RankTest(rank.axis)
    if isinstance(expr, cst.Name):
        value = evaluate(walker, expr)
        if isinstance(value, (RankTest, bool)):
            return value
        return None
    return test(walker, expr)


def push_condition(walker: Walker, condition: Any) -> None:
    of(walker).conditions.append(condition if isinstance(condition, RankTest) else UNKNOWN_CONDITION)


def pop_condition(walker: Walker) -> None:
    stack = of(walker).conditions
    if stack:
        stack.pop()


def _current(walker: Walker) -> tuple[Any, ...]:
    return tuple(walker.clipping.conditions) if walker.clipping is not None else ()


def note_item(walker: Walker, item: Any) -> None:
    """An item appended to a list under the undecided conditions being walked: remember them with it."""
    conditions = _current(walker)
    if conditions and isinstance(item, GradRef):
        of(walker).included[id(item)] = (item, conditions)


def _conditions_of(walker: Walker, grad: GradRef) -> tuple[Any, ...]:
    held = walker.clipping.included.get(id(grad)) if walker.clipping is not None else None
    kept = held[1] if held is not None and held[0] is grad else ()
    return (*kept, *_current(walker))


# ----------------------------------------------------------------------------------------------- values
def norm_of(walker: Walker, grad: Any, args: list) -> Any:
    """`grad.norm()` / `torch.norm(grad)`: a Norm of a parameter's own gradient (2-norm unless given); the
    same norm of a norm of that order (a number) or of a stack of them (`vector_norm(torch.stack(norms))`)."""
    order = _order(args[0] if args else 2)
    if order is None:
        return None
    if isinstance(grad, Norm):
        return Norm(grad.terms, order) if grad.order == order else None
    if not isinstance(grad, GradRef) or grad.ops:
        return None
    return Norm(((grad.param, _conditions_of(walker, grad)),), order)


def _order(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _grads(value: Any) -> list[Any] | None:
    """The gradients a list (or one gradient) holds, each a `GradRef` of its own buffer; None: not known."""
    items = [value] if isinstance(value, GradRef) else getattr(value, "items", None)
    if items is None or getattr(value, "spoiled", False) or getattr(value, "repeated", False):
        return None
    return list(items) if all(isinstance(g, GradRef) and not g.ops for g in items) else None


def foreach_norm(walker: Walker, tensors: Any, order: Any) -> list[Norm] | None:
    """`torch._foreach_norm(grads, ord)`: the norm of each gradient; None when they are not all known."""
    grads, order = _grads(tensors), _order(order)
    if grads is None or order is None:
        return None
    return [Norm(((g.param, _conditions_of(walker, g)),), order) for g in grads]


def stack(values: Any) -> Norm | None:
    """`torch.stack(norms)` of norms of one order: the vector of them."""
    items = getattr(values, "items", None)
    if not items or not all(isinstance(n, Norm) and not n.stacked for n in items):
        return None
    if len({n.order for n in items}) != 1:
        return None
    return Norm(tuple(t for n in items for t in n.terms), items[0].order, stacked=True)


def total_norm(walker: Walker, tensors: Any, order: Any) -> Norm | None:
    """`torch.nn.utils.get_total_norm(grads, norm_type)`: the norm of all of them together, on this rank."""
    grads, order = _grads(tensors), _order(order)
    if grads is None or order is None:
        return None
    return Norm(tuple((g.param, _conditions_of(walker, g)) for g in grads), order)


def clipped_locally(walker: Walker, norm: Norm, node: cst.CSTNode) -> None:
    """`clip_grad_norm_(params)`: the gradients clipped with their norm on this rank alone (summed over no
    axis): reported when some gradient is sharded over an axis (each rank clips with its own shards' norm)."""
    if not math.isfinite(norm.order):
        return
    squared = SquaredNorm(list(norm.terms))
    verdict = _verdict(walker, squared)
    if verdict is not None and verdict[0] and not verdict[1]:
        walker.report(ClipNormWrongAxes((), verdict[0], local_api="clip_grad_norm_"), walker.remember(node))


def zero() -> SquaredNorm:
    """`torch.zeros(())`: a squared norm with nothing in it yet."""
    return SquaredNorm()


def binary(kind: str, left: Any, right: Any) -> Any:
    """`norm ** 2`, `a + b` of squared norms; None when the operands are not these."""
    if kind == "Power" and isinstance(left, Norm):
        # the p-th power of a p-norm: a sum over the gradients' elements, so over their shards too
        power = _order(right)
        if power is not None and power == left.order and math.isfinite(power) and not left.stacked:
            return SquaredNorm(list(left.terms))
        return None
    if kind == "Add" and (isinstance(left, SquaredNorm) or isinstance(right, SquaredNorm)):
        return add(left, right)
    return None


def add(left: Any, right: Any) -> Any:
    """`left + right` where one side is a squared norm (a zero number adds nothing; anything else unknown)."""
    parts = [p for p in (left, right) if not _is_zero_number(p)]
    out = SquaredNorm()
    for part in parts:
        if isinstance(part, SquaredNorm):
            out.terms.extend(part.terms)
            out.exact = out.exact and part.exact and not part.reduced
        else:
            out.exact = False
    return out


def _is_zero_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def is_norm_value(value: Any) -> bool:
    return isinstance(value, (Norm, SquaredNorm))


# ----------------------------------------------------------------------------------------------- reductions
def reduced(walker: Walker, norm: SquaredNorm, axis: str | None, op: Any, node: cst.CSTNode) -> None:
    """`dist.all_reduce(norm, op, group)` over `axis` (None: a group the walk cannot place)."""
    if op is not None and not (isinstance(op, Qual) and op.name.endswith(".SUM")):
        norm.exact = False  # a max (the inf-norm) or an op the walk cannot read
        return
    if axis is None or axis not in walker.mesh:
        norm.exact = False
        return
    norm.reduced.add(axis)
    if not norm.exact or norm.reported or not norm.terms:
        return
    verdict = _verdict(walker, norm)
    if verdict is None:
        norm.exact = False
        return
    missing, duplicated, replicated = verdict
    if duplicated:
        walker.remember(node)
        norm.reported = True
        tp_axis = tensor_parallel_axis(walker.mesh)
        on_one_rank = tp_axis if tp_axis in duplicated else None
        violation = ClipNormWrongAxes(tuple(sorted(norm.reduced)), missing, duplicated, replicated, on_one_rank)
        walker.report(violation, node)
    elif missing:
        norm.missing_at = (walker.remember(node), missing)
    else:
        norm.missing_at = None


def method(walker: Walker, norm: SquaredNorm, name: str) -> Any:
    """`norm.sqrt()`, `norm.item()`, ...: a use of it; an in-place op (`norm.mul_(...)`) makes it inexact."""
    used(walker, norm)
    if name.endswith("_"):
        norm.exact = False
    return OPAQUE


def used(walker: Walker, value: Any) -> None:
    """A squared norm used for what it is (`sqrt`, a clip coefficient): an axis still left out is reported."""
    if not isinstance(value, SquaredNorm) or value.reported or value.missing_at is None:
        return
    node, _ = value.missing_at
    verdict = _verdict(walker, value) if value.exact else None
    value.missing_at = None
    if verdict is None:
        return
    missing, duplicated, replicated = verdict
    if missing and not duplicated:
        value.reported = True
        walker.report(ClipNormWrongAxes(tuple(sorted(value.reduced)), missing), node)


def _verdict(walker: Walker, norm: SquaredNorm) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None:
    """(axes left out, axes summed over that count whole gradients on every rank, those gradients' names);
    None when a term's conditions cannot be read."""
    missing: list[str] = []
    duplicated: list[str] = []
    replicated: list[str] = []
    for condition_list in (conds for _, conds in norm.terms):
        if any(c is UNKNOWN_CONDITION or not isinstance(c, RankTest) for c in condition_list):
            return None
    for axis in walker.mesh:
        kinds = []
        for param, conditions in norm.terms:
            kind = _kind(walker, param, axis)
            once = any(c.axis == axis for c in conditions)
            if kind is None or (once and kind == "sharded"):
                kinds = None
                break
            kinds.append((param, "once" if once else kind))
        if kinds is None:
            continue
        needs = any(k in ("sharded", "once") for _, k in kinds)
        whole = [p for p, k in kinds if k == "whole"]
        if axis in norm.reduced and whole:
            duplicated.append(axis)
            replicated.extend(p.name for p in whole if p.name not in replicated)
        elif axis not in norm.reduced and needs:
            missing.append(axis)
    return tuple(missing), tuple(duplicated), tuple(replicated)


def tensor_parallel_axis(mesh: tuple[str, ...]) -> str | None:
    """The axis Megatron's tensor-parallel group spans: `tp`, or the innermost of several."""
    if "tp" in mesh:
        return "tp"
    return mesh[-1] if len(mesh) >= 2 else None


def _kind(walker: Walker, param: Param, axis: str) -> str | None:
    """What `param`'s gradient is on `axis` at this point: "sharded", "whole" or None (unknown)."""
    if axis == tensor_parallel_axis(walker.mesh):
        mark = param.attrs.get(TENSOR_PARALLEL_MARK, False)
        if mark is True:
            return "sharded"
        return "whole" if mark is False else None
    if param.attrs.get(EXPERT_MARK, True) is False:
        return "sharded"
    if param.sharded_by is not None and axis in param.sharded_by[0]:
        return None  # FSDP2 keeps a shard of the averaged gradient per rank, a DTensor that norms itself
    grad = walker.state.get(param, axis)
    if grad is not None and grad.status == "summed":
        return "whole"
    return None


def join(first: Any, second: Any) -> Any:
    """A name after the two arms of an undecided `if`: a squared norm one arm added terms to is that arm's
    (each term it added carries the arm's condition); anything else is unknown."""
    if isinstance(first, SquaredNorm) and isinstance(second, SquaredNorm):
        shorter, longer = sorted((first, second), key=lambda n: len(n.terms))
        if longer.terms[: len(shorter.terms)] == shorter.terms and shorter.reduced == longer.reduced:
            return longer
    return OPAQUE

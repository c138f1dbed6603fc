"""2xx: pending sums from sharded contractions, used before they are reduced."""

from __future__ import annotations

from spmdcheck.diagnostics.violation import Violation, site
from spmdcheck.lattice import Rule

# what an op does to a pending sum, by the lattice rule the per-rank sums break there
_MISUSE = {
    Rule.PARTIAL_NONLINEAR: "goes through non-linear `{op}`",
    Rule.PARTIAL_AFFINE: "gets a Replicate or scalar term added by `{op}` (counted once per rank)",
    Rule.PARTIAL_WITH_VARYING: "is combined with a Varying value by `{op}`",
    Rule.PARTIAL_SEVERAL_FACTORS: "is multiplied by another pending sum in `{op}`",
    Rule.PARTIAL_DIVISOR: "is a divisor in `{op}`",
    Rule.INVARIANT_MIX: "is mixed with an Invariant in `{op}`",
}


class PendingSumMisuse(Violation):
    """A per-rank partial sum from the contraction at site `origin`, used before it is reduced.

    How it is used, one of: an op `op` breaking lattice rule `rule`; a collective `op` (rule None) that
    does not reduce it; a contract declaring it `declared`. `operand` is its source text (None at a
    contract, which names no operand); `of_product` when it is the product inside `F.linear(x, w, b)`.
    """

    code = "SPMD201"
    axis: str
    origin: int
    operand: str | None = None
    op: str = ""
    rule: Rule | None = None
    declared: str | None = None
    of_product: bool = False

    @property
    def message(self) -> str:
        where = f"on axis {self.axis!r} (from the sharded contraction at {site(self.origin)})"
        if self.declared is not None:
            return f"a per-rank partial sum {where} is declared {self.declared} before it is reduced"
        use = _MISUSE[self.rule].format(op=self.op) if self.rule is not None else f"reaches `{self.op}`"
        operand = "the product" if self.of_product else self.operand
        return f"`{operand}` is a per-rank partial sum {where} and {use} before it is reduced"

    @property
    def fix_title(self) -> str:
        if self.declared is not None:
            return "reduce-scatter it into the declared layout" if self.declared.startswith("S(") else "reduce it first"
        if self.rule is None:
            return "reduce it instead"
        if self.of_product:
            return "reduce the product, then add the bias once (Megatron's row-parallel linear does)"
        return "reduce it first (all-reduce forward; Megatron: reduce_from_tensor_model_parallel_region)"

    # the second suggestion at an op: the operand reduced both ways, for a per-rank use
    KEEP_REPLICATE_TITLE = "or keep it Replicate for per-rank use (all-reduce both ways)"


class ReducedLocalMean(Violation):
    """Per-rank means over a dim sharded on `axis` (taken at site `origin`) summed by the reduction `api`."""

    code = "SPMD202"
    operand: str
    axis: str
    origin: int
    api: str

    @property
    def message(self) -> str:
        return (
            f"`{self.operand}` holds per-rank means over a dim sharded on axis {self.axis!r} (from "
            f"{site(self.origin)}); `{self.api}` sums them, which is the axis size times the global mean: "
            f"take the local sum, reduce it, then divide by the global count"
        )

"""1xx: per-axis inference through ordinary ops (the lattice's rules, einsum layouts, in-place writes)."""

from __future__ import annotations

from typing import ClassVar

from spmdcheck.diagnostics.violation import Violation, operand_list
from spmdcheck.lattice import AxisType, Rule


class AxisRuleViolation(Violation):
    """An op whose operands break one per-axis rule of the lattice (SPMD101-106).

    `operands` are each operand's source text and type on the axis; `product` is the kind of the product
    inside `F.linear(x, w, b)` when the bias add is what failed.
    """

    rule: ClassVar[Rule]
    template: ClassVar[str]  # with {axis!r} and {op}
    op: str
    axis: str
    operands: tuple[tuple[str, str], ...]
    product: str | None = None

    @property
    def message(self) -> str:
        found = operand_list(self.operands)
        if self.product is not None:
            found = "product: " + self.product + (", " + found if found else "")
        return self.template.format(axis=self.axis, op=self.op) + f" (operands: {found})"


class PartialThroughNonlinear(AxisRuleViolation):
    code = "SPMD101"
    rule = Rule.PARTIAL_NONLINEAR
    template = "Partial on axis {axis!r} goes through non-linear `{op}`: f(sum) != sum(f); reduce first"


class InvariantMixing(AxisRuleViolation):
    code = "SPMD102"
    rule = Rule.INVARIANT_MIX
    template = "Invariant on axis {axis!r} cannot be mixed with other types: its gradient would not be all-reduced"


class PartialWithVarying(AxisRuleViolation):
    code = "SPMD103"
    rule = Rule.PARTIAL_WITH_VARYING
    template = "Partial on axis {axis!r} cannot be combined with Varying; reduce the Partial first"


class PartialAffine(AxisRuleViolation):
    code = "SPMD104"
    rule = Rule.PARTIAL_AFFINE
    template = "`{op}` adds a Replicate or scalar term to a Partial on axis {axis!r}: it is counted once per rank"


class PartialSeveralFactors(AxisRuleViolation):
    code = "SPMD105"
    rule = Rule.PARTIAL_SEVERAL_FACTORS
    template = "more than one factor of `{op}` is Partial on axis {axis!r}; reduce all but one"


class PartialInDivisor(AxisRuleViolation):
    code = "SPMD106"
    rule = Rule.PARTIAL_DIVISOR
    template = "`{op}` divides by a Partial on axis {axis!r}; reduce it first"


AXIS_RULE_VIOLATIONS: dict[Rule, type[AxisRuleViolation]] = {
    v.rule: v
    for v in (
        PartialThroughNonlinear,
        InvariantMixing,
        PartialWithVarying,
        PartialAffine,
        PartialSeveralFactors,
        PartialInDivisor,
    )
}


def axis_fix_title(api: str, src_name: str, operand: str, forward: str, backward: str) -> str:
    """The suggestion fixing one operand of an SPMD101-106 op with a collective or conversion."""
    return f"{api} the {src_name} operand `{operand}` (forward: {forward}, backward: {backward})"


def megatron_fix_title(forward: str, backward: str) -> str:
    """The same fix spelled with the Megatron mapping that does it."""
    return f"Megatron spelling of the same (forward: {forward}, backward: {backward})"


class MissingAxis(Violation):
    code = "SPMD107"
    op: str
    operand: str
    axis: str
    operand_axes: tuple[str, ...]  # the axes the operand is typed on

    @property
    def message(self) -> str:
        has = ", ".join(self.operand_axes) if self.operand_axes else "no axes"
        return (
            f"`{self.op}`: operand `{self.operand}` has no type on axis {self.axis!r} (it has {has}); "
            f"every operand needs every mesh axis in strict mode"
        )


class ShardedDimMismatch(Violation):
    """An equation label sharded on the axis in operand `sharded` and whole in operand `whole`."""

    code = "SPMD108"
    op: str
    equation: str
    label: str
    axis: str
    sharded: str
    whole: str
    operands: tuple[tuple[str, str], ...]

    @property
    def message(self) -> str:
        return (
            f"`{self.op}` ({self.equation}): label {self.label!r} is sharded on axis {self.axis!r} in "
            f"`{self.sharded}` but whole in `{self.whole}`; the local shapes cannot match "
            f"({operand_list(self.operands)})"
        )

    @property
    def fix_title(self) -> str:
        return "gather the sharded operand first"


class MixedShardLayout(Violation):
    """Different labels (or one repeated label, `labels` empty) sharded on the same axis across operands."""

    code = "SPMD109"
    op: str
    equation: str
    axis: str
    labels: tuple[str, ...]
    operands: tuple[tuple[str, str], ...]

    @property
    def message(self) -> str:
        what = f"labels {', '.join(self.labels)}" if self.labels else "a repeated label on the sharded dim"
        return (
            f"`{self.op}` ({self.equation}): {what} sharded on axis {self.axis!r} across the operands; each rank "
            f"computes a block with no global layout ({operand_list(self.operands)})"
        )

    @property
    def fix_title(self) -> str:
        return "gather the sequence-sharded activation first (Megatron: gather_from_sequence_parallel_region)"


class TypeChangingWrite(Violation):
    """A write into an existing tensor that would change its type on an axis (SPMD110, SPMD111)."""

    op: str
    target: str
    axis: str
    before: AxisType
    after: AxisType

    @property
    def message(self) -> str:
        return (
            f"`{self.op}` would change the type of `{self.target}` on axis {self.axis!r} from "
            f"{self.before} to {self.after}; an in-place write must keep its destination's type"
        )


class InplaceTypeChange(TypeChangingWrite):
    code = "SPMD110"


class SetitemTypeChange(TypeChangingWrite):
    code = "SPMD111"


class DTensorLocalMix(Violation):
    """An op given a DTensor (`dtensor`, with its placements spelled) and a local tensor (`local`)."""

    code = "SPMD112"
    op: str
    dtensor: str
    placements: str
    local: str

    @property
    def message(self) -> str:
        return (
            f"`{self.op}` mixes DTensor `{self.dtensor}` ({self.placements}) with local tensor `{self.local}`: "
            "PyTorch refuses mixed torch.Tensor and DTensor operands"
        )

    @property
    def fix_title(self) -> str:
        return f"make `{self.local}` a DTensor with the placements it has (`DTensor.from_local`)"

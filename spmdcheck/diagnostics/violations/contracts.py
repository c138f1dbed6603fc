"""4xx: contracts (assert_type and friends, annotated returns and parameters, backward(), module contracts)."""

from __future__ import annotations

from typing import Literal

from spmdcheck.diagnostics.violation import Violation, site
from spmdcheck.lattice import AxisType, Kind


class DeclaredTypeMismatch(Violation):
    """A value whose type on `axis` (`have`) disagrees with what `what` declares (`declared`): SPMD401-403.

    form: `kind` (another type), `shard-dim` (sharded on another dim), `src` (mutate_type's src=),
    `untyped` (no type on the axis: `have` is None). `pending_origin` is the contraction site of a
    pending sum that was never reduced.
    """

    what: str  # the contract: `assert_type`, `return value`, `argument `x``, ...
    axis: str
    have: AxisType | None
    declared: AxisType | None
    form: Literal["kind", "shard-dim", "src", "untyped"] = "kind"
    pending_origin: int | None = None

    @property
    def message(self) -> str:
        if self.form == "untyped":
            return f"{self.what}: the value has no type on axis {self.axis!r}"
        start = f"{self.what}: on axis {self.axis!r} the value is"
        if self.form == "shard-dim":
            return f"{start} sharded on dim {self.have.shard} but S({self.declared.shard}) is declared"  # type: ignore[union-attr]
        if self.form == "src":
            return f"{start} {self.have} but src={self.declared}"
        extra = ""
        if self.pending_origin is not None:
            extra = (
                f"; it is a per-rank partial sum from the sharded contraction at {site(self.pending_origin)} "
                f"that was never reduced"
            )
        return f"{start} {self.have} but {self.declared} is declared{extra}"

    @property
    def fix_title(self) -> str:
        return "reduce the partial sum"


class AssertTypeMismatch(DeclaredTypeMismatch):
    code = "SPMD401"


class ReturnTypeMismatch(DeclaredTypeMismatch):
    code = "SPMD402"


class ArgumentTypeMismatch(DeclaredTypeMismatch):
    code = "SPMD403"


class InvalidLossType(Violation):
    """backward() on a loss that is Replicate (`kind` R) or Varying (`kind` V) on `axis`."""

    code = "SPMD404"
    operand: str
    axis: str
    kind: Kind

    @property
    def message(self) -> str:
        if self.kind is Kind.R:
            return (
                f"backward() on `{self.operand}`, which is Replicate on axis {self.axis!r}: the implicit gradient "
                f"1.0 on every rank is read as a Partial, so gradients are over-counted by the axis size"
            )
        return (
            f"backward() on `{self.operand}`, which is Varying on axis {self.axis!r}: a per-rank loss must be "
            f"declared the summands of the global loss"
        )

    @property
    def fix_title(self) -> str:
        if self.kind is Kind.R:
            return "reduce upstream with dst=I instead of dst=R (the loss is then Invariant)"
        return "declare the per-rank losses as a pending sum"

    # the second suggestion for a Replicate loss
    LOCAL_LOSS_TITLE = "or backpropagate the local Partial loss (drop the reduction)"


class UnreducedContractOutput(Violation):
    code = "SPMD405"
    axis: str

    @property
    def message(self) -> str:
        return (
            f"the module's output is a pending sum on axis {self.axis!r} (out_src) and the contract gives it no "
            f"destination on that axis: nothing reduces it"
        )


class ContractInputWithoutSource(Violation):
    code = "SPMD406"
    input_name: str

    @property
    def message(self) -> str:
        return (
            f"input `{self.input_name}` has a destination layout (in_dst) but no source layout (in_src): the "
            "module's wrapper cannot redistribute it and refuses the call"
        )


class RedistributeToPartial(Violation):
    """`x.redistribute(mesh, placements)` with a Partial placement on mesh dim `dim` where `x` is `have`."""

    code = "SPMD407"
    dim: str
    have: str

    @property
    def message(self) -> str:
        return (
            f"`redistribute` to Partial() on mesh dim {self.dim!r}, where the DTensor is {self.have}: PyTorch "
            "refuses a Partial target (redistributing to Partial is for its internal use)"
        )

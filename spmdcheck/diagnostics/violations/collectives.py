"""3xx: collectives and conversions (spmd_types calls, library mappings, raw torch.distributed)."""

from __future__ import annotations

from typing import Literal

from spmdcheck.diagnostics.violation import Violation, site
from spmdcheck.lattice import AxisType, Kind


class CollectiveSrcMismatch(Violation):
    code = "SPMD301"
    api: str
    src: AxisType  # what the collective expects
    axis: str
    operand: str
    actual: AxisType

    @property
    def message(self) -> str:
        return f"`{self.api}` expects {self.src} on axis {self.axis!r} but `{self.operand}` is {self.actual}"

    @property
    def fix_title(self) -> str:
        return "declare the local values as summands first"


class DoubleReduction(Violation):
    """A reduction of a value already reduced (by the reduction at site `reduced_at`, when known)."""

    code = "SPMD302"
    api: str
    axis: str
    operand: str
    actual: AxisType
    reduced_at: int | None = None

    @property
    def message(self) -> str:
        where = f" (by the reduction at {site(self.reduced_at)})" if self.reduced_at is not None else ""
        return (
            f"`{self.api}` expects a Partial on axis {self.axis!r} but `{self.operand}` is {self.actual}: it is "
            f"already reduced{where}, and reducing again multiplies it by the axis size"
        )


class ForbiddenTransition(Violation):
    """A src/dst pair the collective or conversion `api` rejects at run time.

    reason: `rejected` (a collective: `allowed_src` / `allowed_dst` are set for the side it rejects;
    `already_same` when a reduction is given a value already the same on every rank), `not-allowed` (a
    conversion; `use_instead` names the call that does it), `requires-grad` (reinterpret_no_grad on a
    tensor that requires grad).
    """

    code = "SPMD303"
    api: str
    reason: Literal["rejected", "not-allowed", "requires-grad"]
    src: AxisType | None = None
    dst: AxisType | None = None
    allowed_src: tuple[str, ...] | None = None
    allowed_dst: tuple[str, ...] | None = None
    already_same: bool = False
    use_instead: str | None = None

    @property
    def message(self) -> str:
        if self.reason == "requires-grad":
            return f"{self.api} on a tensor that requires grad"
        if self.reason == "not-allowed":
            extra = f"; use `{self.use_instead}` instead" if self.use_instead else ""
            return f"`{self.api}` does not allow src={self.src} -> dst={self.dst}{extra}"
        bad = []
        if self.allowed_src is not None:
            bad.append(f"src={self.src} (allowed: {', '.join(sorted(self.allowed_src))})")
        if self.allowed_dst is not None:
            bad.append(f"dst={self.dst} (allowed: {', '.join(sorted(self.allowed_dst))})")
        hint = (
            "; reducing a value that is already the same on every rank multiplies it by the axis size"
            if self.already_same
            else ""
        )
        return f"`{self.api}` rejects {' and '.join(bad)}{hint}"


def _letter(t: AxisType) -> str:
    return "S" if t.kind is Kind.V and t.is_shard else t.kind.value


_EXPERT_REASONS = {
    ("R", "I"): "it makes a Replicate value Invariant, which forward code rarely wants (it is the backward "
    "of convert(I, P))",
    ("I", "P"): "it keeps the value on rank 0 only and zeros the others",
    ("V", "P"): "it places each rank's block into zeros",
    ("S", "P"): "it places each rank's block into zeros",
    ("I", "R"): "use convert(x, axis, src=I, dst=R) instead",
    ("R", "V"): "it declares N copies of one value to be different per rank",
    ("R", "P"): "it scales the value's meaning by the axis size",
}


class ExpertModeRequired(Violation):
    code = "SPMD304"
    api: str
    src: AxisType
    dst: AxisType

    @property
    def message(self) -> str:
        s, d = _letter(self.src), _letter(self.dst)
        reason = _EXPERT_REASONS.get((s, d), f"{self.api} from {s} to {d} is an expert-only transition")
        return f"`{self.api}(src={self.src}, dst={self.dst})` needs expert_mode=True: {reason}"


class WrongShardDim(Violation):
    """A collective's S(d) (`src`) names another dim than the one `operand` is sharded on (`actual`)."""

    code = "SPMD305"
    api: str
    src: AxisType
    operand: str
    actual: AxisType
    axis: str

    @property
    def message(self) -> str:
        return (
            f"`{self.api}` gathers/splits dim {self.src.shard} (src={self.src}) but `{self.operand}` is sharded "
            f"on dim {self.actual.shard} on axis {self.axis!r}: the blocks would be concatenated along the wrong dim"
        )

    @property
    def right_src(self) -> str:
        """The src= the collective should name."""
        return f"S({self.actual.shard})"

    @property
    def fix_title(self) -> str:
        return f"use src={self.right_src}"


class RawCollectiveOnAutogradPath(Violation):
    code = "SPMD306"
    api: str
    operand: str

    @property
    def message(self) -> str:
        return (
            f"`{self.api}` on `{self.operand}`, which needs grad: raw torch.distributed "
            f"collectives have no backward, so its gradient is silently wrong"
        )

    @property
    def fix_title(self) -> str:
        return "use the autograd-aware collective"

    MEGATRON_FIX_TITLE = "Megatron spelling (all-reduce forward, identity backward)"


class CollectiveUntyped(Violation):
    code = "SPMD307"
    api: str
    operand: str
    axis: str

    @property
    def message(self) -> str:
        return f"`{self.api}`: `{self.operand}` has no type on axis {self.axis!r}; annotate it with assert_type first"

"""The diagnostic codes: one entry per code. Stable: never renumber, only add.

Each code's user documentation (what it does, why it is a bug, a bad example,
a fixed example, the fix) lives beside this module in ``pages/<CODE>.md``;
``spmdcheck explain CODE`` prints it and the test suite runs its examples.
Each code's violation (its fields, the message built from them, its fix
title) is one class in ``violations/<family>.py``; the analysis reports
those, never text.

Severity: ``error`` = the program computes wrong values or gradients, or
cannot run; ``warning`` = a likely mistake; ``note`` = information the
source asked for (never a finding: it does not change the exit status).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Code:
    code: str
    name: str
    severity: str  # "error" | "warning" | "note"
    summary: str
    strict_only: bool = False
    preview: bool = False  # off unless --preview, `preview = true`, or the code is selected by its exact name

    def page(self) -> str:
        """The markdown page documenting this code."""
        try:
            return resources.files(__package__).joinpath("pages", f"{self.code}.md").read_text(encoding="utf-8")
        except FileNotFoundError:  # pragma: no cover - every code has a page (tested)
            return f"# {self.code} {self.name}\n\n{self.summary}\n"


_ALL = [
    # 0xx: the input itself (and the checker itself)
    Code(
        "SPMD000",
        "internal-error",
        "error",
        "spmdcheck failed on this file; the rest of the run goes on. Please report it.",
    ),
    Code("SPMD001", "syntax-error", "error", "The file cannot be parsed; it was not checked."),
    Code("SPMD002", "malformed-annotation", "error", "An SPMD type annotation or type argument cannot be read."),
    Code("SPMD003", "unknown-axis", "error", "A mesh axis name that is not an axis of the mesh in scope."),
    Code(
        "SPMD004", "malformed-einsum", "error", "An einsum equation that cannot be parsed or does not fit its operands."
    ),
    Code("SPMD005", "config-error", "error", "The [tool.spmdcheck] configuration or a stub file is invalid."),
    Code(
        "SPMD006",
        "unused-suppression",
        "warning",
        "A `# noqa: SPMD...` or `# spmdcheck: ignore[...]` comment that suppresses nothing.",
    ),
    # 1xx: per-axis inference through ordinary ops
    Code("SPMD101", "partial-through-nonlinear", "error", "A Partial (pending sum) goes through a non-linear op."),
    Code(
        "SPMD102", "invariant-mixing", "error", "An Invariant value is mixed with a Replicate, Varying or Partial one."
    ),
    Code("SPMD103", "partial-with-varying", "error", "A Partial value is combined with a Varying one."),
    Code(
        "SPMD104",
        "partial-affine",
        "error",
        "A Replicate value or a number is added to a Partial: it is counted once per rank.",
    ),
    Code("SPMD105", "partial-several-factors", "error", "More than one factor of a product is Partial."),
    Code("SPMD106", "partial-in-divisor", "error", "A Partial value is used as a divisor."),
    Code(
        "SPMD107",
        "missing-axis",
        "error",
        "An operand has no type on a mesh axis that the others have (strict mode).",
        strict_only=True,
    ),
    Code(
        "SPMD108",
        "sharded-dim-mismatch",
        "error",
        "A label is sharded in one operand and whole in another: the local shapes cannot match.",
    ),
    Code(
        "SPMD109",
        "mixed-shard-layout",
        "warning",
        "Two different dims are sharded on the same axis across the operands; the result has no global layout.",
    ),
    Code(
        "SPMD110",
        "inplace-type-change",
        "error",
        "An in-place op or out= would change the SPMD type of its destination.",
    ),
    Code("SPMD111", "setitem-type-change", "error", "Assigning into x[...] would change the SPMD type of x."),
    Code(
        "SPMD112",
        "dtensor-local-mix",
        "error",
        "An op mixes a DTensor with a local (plain) tensor: PyTorch refuses it at run time.",
    ),
    # 2xx: pending sums from sharded contractions
    Code(
        "SPMD201",
        "pending-sum-misuse",
        "warning",
        "A per-rank partial sum from a sharded contraction is used before it is reduced.",
    ),
    Code(
        "SPMD202",
        "reduced-local-mean",
        "warning",
        "Per-rank means over a sharded dim are all-reduced as if they were partial sums: the result is the axis size times the global mean.",
    ),
    # 3xx: collectives and conversions
    Code(
        "SPMD301",
        "collective-src-mismatch",
        "error",
        "A collective or conversion receives a type other than its declared source.",
    ),
    Code(
        "SPMD302",
        "double-reduction",
        "error",
        "A reduction receives a value that is already reduced (Replicate or Invariant).",
    ),
    Code(
        "SPMD303",
        "forbidden-transition",
        "error",
        "A src/dst pair that the collective or conversion rejects at run time.",
    ),
    Code("SPMD304", "expert-mode-required", "error", "A transition that spmd_types only allows with expert_mode=True."),
    Code(
        "SPMD305",
        "wrong-shard-dim",
        "error",
        "A collective's S(d) names a different dim than the one the tensor is sharded on.",
    ),
    Code(
        "SPMD306",
        "raw-collective-on-autograd-path",
        "error",
        "A raw torch.distributed collective is applied to a tensor that needs grad: it has no backward.",
    ),
    Code(
        "SPMD307",
        "collective-untyped",
        "error",
        "A collective receives a tensor with no type on its axis (strict mode).",
        strict_only=True,
    ),
    # 4xx: contracts
    Code("SPMD401", "assert-type-mismatch", "error", "assert_type (or mutate_type) disagrees with the inferred type."),
    Code(
        "SPMD402",
        "return-type-mismatch",
        "error",
        "A returned value disagrees with the function's annotated return type.",
    ),
    Code(
        "SPMD403",
        "argument-type-mismatch",
        "error",
        "An argument disagrees with the callee's annotated parameter type.",
    ),
    Code("SPMD404", "invalid-loss-type", "error", "backward() on a loss that is Replicate or Varying on some axis."),
    Code(
        "SPMD405",
        "unreduced-contract-output",
        "warning",
        "A module contract declares its output a pending sum (Partial) and gives it no destination: nothing reduces it.",
    ),
    Code(
        "SPMD406",
        "contract-input-without-source",
        "error",
        "A module contract gives an input a destination layout (in_dst) but no source layout (in_src): its wrapper "
        "refuses the call.",
    ),
    Code(
        "SPMD407",
        "redistribute-to-partial",
        "error",
        "`DTensor.redistribute` to a Partial placement: PyTorch refuses it (Partial is for its internal use).",
    ),
    # 5xx: control flow
    Code(
        "SPMD501",
        "collective-in-rank-branch",
        "error",
        "A collective runs only under a rank-dependent condition: the other ranks never join it (deadlock).",
    ),
    Code(
        "SPMD502",
        "rank-specific-graph",
        "warning",
        "(preview) Tensor computation that continues past a rank-dependent condition differs between ranks: "
        "a program compiled once for every rank would be wrong on some.",
        preview=True,
    ),
    # 6xx: gradient synchronisation (checked at the optimizer step)
    Code(
        "SPMD601",
        "missing-gradient-reduction",
        "error",
        "At the optimizer step a parameter's gradient is still a pending sum over an axis: no reduction reaches "
        "it, or the reduced value never gets back into `.grad`.",
    ),
    Code(
        "SPMD602",
        "double-gradient-reduction",
        "error",
        "A gradient already reduced over an axis (by DistributedDataParallel or an earlier all-reduce) is summed "
        "over it again.",
    ),
    Code(
        "SPMD603",
        "gradient-reduction-wrong-group",
        "error",
        "A gradient is reduced over a group that mixes ranks holding different parameters (experts reduced over "
        "the whole data-parallel group).",
    ),
    Code(
        "SPMD604",
        "accumulation-sync-misplaced",
        "error",
        "With gradient accumulation the gradients are synchronised before the last micro-batch (and then again), "
        "or never (`no_sync()` covers the last backward).",
    ),
    Code(
        "SPMD605",
        "clip-norm-wrong-axes",
        "error",
        "The squared gradient norm of global-norm clipping is reduced over other axes than the ones the gradients "
        "are sharded over, or counts a replicated gradient once per rank.",
    ),
    Code(
        "SPMD606",
        "gradient-averaged-twice",
        "error",
        "The data-parallel average is applied twice: the loss divided by the axis size while DDP averages, or a "
        "division before and after the all-reduce.",
    ),
    # 9xx: information the source asks for (notes, not findings)
    Code(
        "SPMD901",
        "reveal-type",
        "note",
        "reveal_spmd_type(x): the inferred SPMD type of x on every mesh axis and the type of its gradient.",
    ),
]

CODES: dict[str, Code] = {c.code: c for c in _ALL}
BY_NAME: dict[str, Code] = {c.name: c for c in _ALL}


def lookup(code_or_name: str) -> Code | None:
    key = code_or_name.strip()
    return CODES.get(key.upper()) or BY_NAME.get(key.lower())

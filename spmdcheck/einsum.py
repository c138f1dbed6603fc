"""einsum equations and how types and shard dims flow through them (einsum_rules.md).

Pure: no libcst. The matmul family (mm, bmm, matmul, F.linear, addmm, ...)
is rewritten to an equation (`equation_for`) and judged by `judge_axis`, per
mesh axis, on top of the lattice's multilinear rule.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from spmdcheck.lattice import (
    MAX_TENSOR_RANK,
    AxisError,
    AxisType,
    Kind,
    Linearity,
    Operand,
    Site,
    infer_axis,
)


class EinsumError(ValueError):
    """A malformed equation (SPMD004)."""


ELLIPSIS = "..."


@dataclass(frozen=True)
class Equation:
    """A parsed equation; terms hold labels and at most one ELLIPSIS marker."""

    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...] | None  # None: implicit output

    def __str__(self) -> str:
        ins = ",".join("".join(t) for t in self.inputs)
        return ins if self.output is None else f"{ins}->{''.join(self.output)}"


def _term(text: str) -> tuple[str, ...]:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith(ELLIPSIS, i):
            if ELLIPSIS in out:
                raise EinsumError(f"more than one '...' in term {text!r}")
            out.append(ELLIPSIS)
            i += 3
            continue
        ch = text[i]
        if not ch.isalpha() or not ch.isascii():
            raise EinsumError(f"invalid label {ch!r} in {text!r} (labels are letters a-z, A-Z)")
        out.append(ch)
        i += 1
    return tuple(out)


def parse_equation(eq: str, n_operands: int | None = None) -> Equation:
    text = eq.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    if "->" in rhs:
        raise EinsumError(f"more than one '->' in {eq!r}")
    terms = tuple(_term(t) for t in lhs.split(","))
    if n_operands is not None and len(terms) != n_operands:
        raise EinsumError(f"{eq!r} has {len(terms)} operand term(s) but {n_operands} operand(s) are given")
    output = _term(rhs) if arrow else None
    if output is not None:
        plain = [x for x in output if x != ELLIPSIS]
        if len(plain) != len(set(plain)):
            raise EinsumError(f"output of {eq!r} repeats a label")
        seen = {x for t in terms for x in t}
        missing = [x for x in plain if x not in seen]
        if missing:
            raise EinsumError(f"output label(s) {''.join(missing)} of {eq!r} appear in no operand")
        if ELLIPSIS in output and not any(ELLIPSIS in t for t in terms):
            raise EinsumError(f"output of {eq!r} has '...' but no operand does")
    return Equation(terms, output)


@dataclass(frozen=True)
class Spec:
    """An equation with every ellipsis expanded for known ranks."""

    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]

    def contains(self, k: int, label: str) -> bool:
        return label in self.inputs[k]


def _label_order(label: str) -> tuple[int, str]:
    # torch orders implicit-output labels A..Z then a..z
    return (0 if label.isupper() else 1, label)


def expand(eq: Equation, ranks: Sequence[int | None]) -> Spec | None:
    """Expand ellipses (right-aligned fresh labels). None when a needed rank is unknown."""
    inputs: list[tuple[str, ...]] = []
    widest = 0
    for term, rank in zip(eq.inputs, ranks):
        if ELLIPSIS not in term:
            if rank is not None and rank != len(term):
                raise EinsumError(f"term {''.join(term)!r} has {len(term)} labels but its operand has {rank} dims")
            inputs.append(term)
            continue
        if rank is None:
            return None
        width = rank - (len(term) - 1)
        if width < 0:
            raise EinsumError(f"term {''.join(term)!r} needs more dims than its operand's {rank}")
        widest = max(widest, width)
        fresh = tuple(f"E{w}" for w in range(width, 0, -1))
        i = term.index(ELLIPSIS)
        inputs.append(term[:i] + fresh + term[i + 1 :])
    ell = tuple(f"E{w}" for w in range(widest, 0, -1))
    if eq.output is None:
        counts: dict[str, int] = {}
        for term in eq.inputs:
            for x in term:
                if x != ELLIPSIS:
                    counts[x] = counts.get(x, 0) + 1
        singles = sorted((x for x, c in counts.items() if c == 1), key=_label_order)
        has_ell = any(ELLIPSIS in t for t in eq.inputs)
        output = (ell if has_ell else ()) + tuple(singles)
    else:
        output = ()
        for x in eq.output:
            output = output + (ell if x == ELLIPSIS else (x,))
    return Spec(tuple(inputs), output)


def equation_for(kind: str, ranks: Sequence[int | None]) -> str | None:
    """The einsum equation of a matmul-family op (einsum_rules.md section 2)."""
    if kind == "linear":
        return "...i,oi->...o"
    if kind == "matmul":
        if len(ranks) != 2:
            return None
        # An unknown rank is taken to be >= 2 (a matrix or a batch of them): the ellipsis then stands
        # for the batch dims, and judge_axis tries the plausible widths.
        a, b = ranks
        if a == 1:
            return {1: "k,k->", 2: "k,kn->n"}.get(b, "k,...kn->...n")  # type: ignore[arg-type]
        if b == 1:
            return "mk,k->m" if a == 2 else "...mk,k->...m"
        if b == 2:
            return "...mk,kn->...mn"
        return "...mk,...kn->...mn"
    return kind  # a fixed equation


@dataclass(frozen=True)
class LayoutIssue:
    """A problem that only the shard dims reveal."""

    kind: str  # "split" (SPMD108), "mixed" (SPMD109), "diag" (SPMD109)
    label: str
    operand: int  # for split: the operand holding the label whole


@dataclass(frozen=True)
class Outcome:
    result: AxisType | AxisError
    issue: LayoutIssue | None = None


def _sharded_label(spec: Spec, k: int, dim: int) -> str | None:
    term = spec.inputs[k]
    d = dim if dim >= 0 else len(term) + dim
    if 0 <= d < len(term):
        return term[d]
    return None


def _judge_spec(spec: Spec, types: Sequence[AxisType], ops: Sequence[Operand], site: Site) -> Outcome:
    base = infer_axis(ops, Linearity.MULTILINEAR)
    if isinstance(base, AxisError):
        return Outcome(base)
    if base is not Kind.V:
        return Outcome(AxisType(base))
    # S refinement applies only if every V operand carries a shard dim.
    varying = [k for k, t in enumerate(types) if t.kind is Kind.V]
    if any(types[k].shard is None for k in varying):
        # An operand of unknown layout: the local shapes only match if it is split on the same labels as
        # the others, so a label contracted while sharded in another operand is still a pending sum.
        for k in varying:
            lab = _sharded_label(spec, k, types[k].shard) if types[k].shard is not None else None
            if lab is not None and lab not in spec.output:
                return Outcome(AxisType(Kind.V, pending=site))
        return Outcome(AxisType(Kind.V))
    labels: dict[int, str] = {}
    for k in varying:
        lab = _sharded_label(spec, k, types[k].shard)  # type: ignore[arg-type]
        if lab is None:
            return Outcome(AxisType(Kind.V))
        labels[k] = lab
    for k, lab in labels.items():
        if spec.inputs[k].count(lab) > 1:
            return Outcome(AxisType(Kind.V), LayoutIssue("diag", lab, k))
    distinct = set(labels.values())
    for lab in sorted(distinct):
        for k in range(len(types)):
            if spec.contains(k, lab) and labels.get(k) != lab:
                # operand k holds the label whole (even if it is sharded on another one): shapes cannot match
                return Outcome(AxisType(Kind.V), LayoutIssue("split", lab, k))
    if len(distinct) > 1:
        return Outcome(AxisType(Kind.V), LayoutIssue("mixed", ",".join(sorted(distinct)), -1))
    (lab,) = distinct
    if lab in spec.output:
        return Outcome(AxisType(Kind.V, shard=spec.output.index(lab)))
    return Outcome(AxisType(Kind.V, pending=site))


def judge_axis(
    eq: Equation,
    ranks: Sequence[int | None],
    types: Sequence[AxisType],
    ops: Sequence[Operand],
    site: Site,
) -> Outcome:
    """One mesh axis of an einsum. Unknown ranks are tried, and only an unambiguous answer kept."""
    spec = expand(eq, ranks)
    if spec is not None:
        return _judge_spec(spec, types, ops, site)
    unknown = [k for k, r in enumerate(ranks) if r is None and ELLIPSIS in eq.inputs[k]]
    choices = []
    for k in unknown:
        fixed = len(eq.inputs[k]) - 1
        shard = types[k].shard if types[k].kind is Kind.V else None
        if shard is None:
            lo = fixed
        elif shard < 0:
            lo = max(fixed, -shard)  # the annotation rules out ranks where S(d) is out of range
        else:
            lo = max(fixed, shard + 1)
        if lo > MAX_TENSOR_RANK:  # no tensor has that many dims: do not label them
            return Outcome(AxisType(Kind.V))
        choices.append(range(lo, lo + 3))
    trials: list[tuple[Outcome, bool]] = []  # (outcome, some ellipsis stands for no dim)
    for combo in itertools.product(*choices):
        trial = list(ranks)
        for k, r in zip(unknown, combo):
            trial[k] = r
        try:
            trial_spec = expand(eq, trial)
        except EinsumError:
            continue
        if trial_spec is not None:
            outcome = _judge_spec(trial_spec, types, ops, site)
            empty = any(r == len(eq.inputs[k]) - 1 for k, r in zip(unknown, combo))
            trials.append((outcome, len(trial_spec.output), empty))
    if not trials:
        return Outcome(AxisType(Kind.V))
    # The rank is a guess: a shard dim may be the same counted from the left (a leading batch dim) or from
    # the right (the output features) in every guess. Use whichever reading all guesses share.
    for keep_empty in (True, False):
        chosen = [(o, n) for o, n, empty in trials if keep_empty or not empty]  # an ellipsis is usually >= 1 dim
        for from_right in (False, True):
            outcomes = [_count_from(o, n, from_right) for o, n in chosen]
            if outcomes and _agree(outcomes):
                return outcomes[0]
    outcomes = [_count_from(o, n, True) for o, n, empty in trials if not empty] or [
        _count_from(o, n, True) for o, n, _ in trials
    ]
    if _agree(outcomes):
        return outcomes[0]
    clean = [o for o in outcomes if o.issue is None and not isinstance(o.result, AxisError)]
    if clean and _agree(clean):
        return clean[0]
    first = outcomes[0].result
    if isinstance(first, AxisError):
        return outcomes[0]
    return Outcome(AxisType(first.kind))


def _count_from(outcome: Outcome, out_rank: int, from_right: bool) -> Outcome:
    result = outcome.result
    if from_right and isinstance(result, AxisType) and result.shard is not None:
        return Outcome(AxisType(Kind.V, shard=result.shard - out_rank), outcome.issue)
    return outcome


def _agree(outcomes: list[Outcome]) -> bool:
    """Same verdict: labels of ellipsis dims differ between candidate ranks, and do not matter."""

    def verdict(o: Outcome) -> tuple:
        return (o.result, o.issue.kind if o.issue else None)

    return all(verdict(o) == verdict(outcomes[0]) for o in outcomes)

"""Write a soundness violation found by the fuzzer as a regression fixture (fixtures/fuzz_regressions/).

The fixture is the generated program itself (it already follows the fixture convention, so
tests/test_fixtures.py checks its diagnostics and tests/test_ground_truth.py runs it on ranks), with a
docstring that says what is wrong and, on the mutated lines, the diagnostic spmdcheck *should*
report (``EXPECTED``). Where the right line or code is a judgement call (a dropped reduction is
reported where the pending sum is used, not where the collective is missing), the line gets a
``# fuzz-mutation: <kind>`` marker instead, and the expected diagnostic has to be placed by hand
before the fixture is committed (e.g. raw_autograd: the raw all_reduce behaves as all_reduce(P -> I), so the
diagnostic belongs where the I value is used as R -- see fixtures/fuzz_regressions/).
"""
from __future__ import annotations

import hashlib
import pathlib
import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from .programs import ALL_MUTATIONS as MUTATIONS
from .runner import Outcome

if TYPE_CHECKING:
    from .metamorphic import Comparison

# mutation kind -> (severity, code) expected on the mutated line, for a pending sum in spmdcheck's local
# view (V + pending: warnings SPMD201) and for a declared Partial (errors).
EXPECTED: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "nonlinear_pending": (("warning", "SPMD201"), ("error", "SPMD101")),
    "affine_pending": (("warning", "SPMD201"), ("error", "SPMD104")),
    "bias_before_reduce": (("warning", "SPMD201"), ("error", "SPMD104")),
    "square_pending": (("warning", "SPMD201"), ("error", "SPMD105")),
    "wrong_gather_dim": (("error", "SPMD305"), ("error", "SPMD305")),
    "double_reduce": (("error", "SPMD302"), ("error", "SPMD302")),
    "reduce_for_copy": (("error", "SPMD302"), ("error", "SPMD302")),
    "copy_for_reduce": (("error", "SPMD301"), ("error", "SPMD301")),
    "scatter_on_R": (("error", "SPMD301"), ("error", "SPMD301")),
    "partial_unreduced": (("error", "SPMD104"), ("error", "SPMD104")),
    "invariant_mix": (("error", "SPMD102"), ("error", "SPMD102")),
    "invariant_weight": (("error", "SPMD102"), ("error", "SPMD102")),
    "drop_convert": (("error", "SPMD102"), ("error", "SPMD102")),
    "inplace_affine_pending": (("warning", "SPMD201"), ("error", "SPMD104")),
    "inplace_partial": (("error", "SPMD104"), ("error", "SPMD104")),
}


def fixture_text(o: Outcome) -> str:
    prog = o.program
    lines = prog.source.splitlines()
    doc_end = next(i for i, ln in enumerate(lines) if ln.startswith('"""Generated'))
    kinds = sorted(set(prog.mutations))
    what = "; ".join(f"{k}: {MUTATIONS[k]}" for k in kinds) or "no mutation (correct by construction)"
    doc = [
        '"""Found by differential fuzzing (tests/fuzz, docs/ground_truth.md "Differential fuzzing").',
        "",
        f"Mutation: {what}.",
        "",
        "spmdcheck is silent on this program, but on N ranks it does not compute what",
        "it computes on one rank:",
        *(f"    {w.short()}" for w in o.verdict.worlds),
        "",
        "The diagnostics written on the lines below are the ones spmdcheck should report.",
        '"""',
    ]
    out = lines[:doc_end] + doc + lines[doc_end + 1:]
    offset = len(doc) - 1
    marked: set[str] = set()
    for ln in prog.mutation_lines():
        tag = prog.tag_at(ln)
        kind = tag.split(":")[1]
        form = tag.split(":", 2)[-1]
        if form.startswith("alias") and kind in marked:
            continue  # the line that stands for a left-out step: the diagnostic is on the mutated step itself
        i = ln - 1 + offset
        if kind == "mean_then_reduce" and i + 1 < len(out) and "all_reduce(" in out[i + 1]:
            out[i + 1] = f"{out[i + 1]}  # warning: SPMD202"  # the reduction of per-rank means
        elif kind in EXPECTED and not form.startswith("alias"):
            partial = "src=V, dst=P" in lines[ln - 2] if ln >= 2 else False
            sev, c = EXPECTED[kind][1 if partial else 0]
            out[i] = f"{out[i]}  # {sev}: {c}"
        else:
            out[i] = f"{out[i]}  # fuzz-mutation: {kind}"
        marked.add(kind)
    return "\n".join(out) + "\n"


def save_fixture(o: Outcome, directory: str | pathlib.Path, name: str | None = None) -> pathlib.Path:
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    kinds = "_".join(sorted(set(o.program.mutations))) or "correct"
    digest = hashlib.sha1(o.program.source.encode()).hexdigest()[:8]
    stem = name or f"fuzz_{digest}_bug_{re.sub(r'[^a-z0-9_]', '_', kinds)}"
    path = directory / f"{stem}.py"
    path.write_text(fixture_text(o), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- metamorphic counterexamples
def certainly_right(program) -> bool:  # noqa: ANN001 - a fuzz.programs.Program
    """The program's own diagnostics are the right ones beyond doubt: none on a correct-by-construction program
    (the fuzz runs assert that those compute the reference), or exactly one finding per mutated line, of a code
    ``EXPECTED`` names for its kind, and nothing else (no cascade, no judgement call on where a finding goes)."""
    from spmdcheck.api import Settings, check_source

    diags = check_source(program.source, "<fuzz>/program.py", Settings(mesh=program.mesh))
    if not program.mutated:
        return not diags
    want: dict[int, set[str]] = {}
    for ln in program.mutation_lines():
        kind, form = program.tag_at(ln).split(":")[1], program.tag_at(ln).split(":", 2)[-1]
        if form.startswith("alias"):
            continue
        if kind not in EXPECTED:
            return False
        want[ln] = {code for _, code in EXPECTED[kind]}
    got = Counter(d.line for d in diags)
    return bool(want) and set(got) == set(want) and all(got[ln] == 1 for ln in got) and all(
        d.code in want[d.line] for d in diags)


def save_metamorphic(c: Comparison, directory: str | pathlib.Path) -> pathlib.Path | None:
    """Write a rewrite whose diagnostics differ from its program's as a fixture folder
    ``<directory>/metamorphic_<kind>_<digest>/`` (the rewrite's files), with the program's diagnostics written on
    the lines they moved to: the verdict the rewrite must get. Only when ``certainly_right(program)``; else None."""
    from spmdcheck.diagnostics.codes import CODES

    if not certainly_right(c.program):
        return None
    digest = hashlib.sha1("".join(c.rewritten.files.values()).encode()).hexdigest()[:8]
    folder = pathlib.Path(directory) / f"metamorphic_{c.rewritten.kind}_{digest}"
    marks: dict[tuple[str, int], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for code, line in c.before:
        path, new_line = c.rewritten.where(line)
        marks[(path, new_line)][CODES[code].severity].append(code)
    doc_path, doc_line = c.rewritten.where(2)
    what = ", ".join(sorted(set(c.program.mutations))) or "correct by construction"
    for path, text in c.rewritten.files.items():
        lines = text.splitlines()
        for (p, n), by_sev in marks.items():
            if p == path:
                lines[n - 1] += "".join(f"  # {sev}: {', '.join(sorted(set(codes)))}"
                                        for sev, codes in sorted(by_sev.items()))
        if path == doc_path:
            lines[doc_line - 1] = (f'"""Metamorphic counterexample ({c.rewritten.kind} rewrite of a generated program, '
                                   f'{what}): {c.rewritten.note}."""')
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(lines) + "\n" if lines else "", encoding="utf-8")
    return folder

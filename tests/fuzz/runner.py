"""Judge generated programs: spmdcheck's verdict against the execution verdict of the ground-truth harness.

* spmdcheck's verdict uses the same definitions as the fixture sweep (tests/ground_truth/corpus.py):
  **silent** = no error-severity diagnostic and no warning of ``CLAIMS_WRONG`` (SPMD201, SPMD109);
  **flagged** = not silent. A flagged program **claims wrong values** when a code of ``CLAIMS_WRONG``
  is among its diagnostics (other errors, e.g. SPMD402 on the annotated result, flag it without
  making that claim).
* the execution verdict is ``Harness.judge`` unchanged: the one-rank run with the global tensors is the
  reference (every generated input has a global meaning: no V), N = 2 and 4, the harness's
  reassembly by the declared types, its tolerances and its cross-rank invariants. **matches** = match
  at every N; **wrong** = differs, crashes or hangs at some N.

Soundness: silent => matches. A program that is silent and does not match is a **violation**.
Precision: of the flagged programs, the share whose run is wrong. A flagged program whose run
matches is a **false positive**, grouped by (diagnostic code, generator tag of the reported line).
"""
from __future__ import annotations

import hashlib
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ground_truth.corpus import CLAIMS_WRONG
from ground_truth.harness import Harness, Verdict
from ground_truth.spec import read_program

from .programs import Program


@dataclass
class Outcome:
    program: Program
    path: str
    diagnostics: list[tuple[int, str, str, str]]  # (line, code, severity, message)
    verdict: Verdict
    check_seconds: float
    run_seconds: float

    @property
    def codes(self) -> set[str]:
        return {c for _, c, _, _ in self.diagnostics}

    @property
    def errors(self) -> set[str]:
        return {c for _, c, s, _ in self.diagnostics if s == "error"}

    @property
    def silent(self) -> bool:
        return not self.errors and not (self.codes & CLAIMS_WRONG)

    @property
    def flagged(self) -> bool:
        return not self.silent

    @property
    def claims_wrong(self) -> bool:
        return bool(self.codes & CLAIMS_WRONG)

    @property
    def runnable(self) -> bool:
        return self.verdict.runnable

    @property
    def matches(self) -> bool:
        return self.verdict.matches

    @property
    def wrong(self) -> bool:
        return self.verdict.wrong

    @property
    def violation(self) -> bool:
        """spmdcheck silent, and the run does not match the reference at every N."""
        return self.silent and not self.matches

    @property
    def false_positive(self) -> bool:
        return self.flagged and self.runnable and self.matches

    def fp_classes(self) -> list[tuple[str, str]]:
        """(code, pattern) for each diagnostic that makes it flagged; the pattern is the generator's tag of
        the reported line, without the variable parts."""
        out = []
        for line, code, sev, _ in self.diagnostics:
            if sev == "error" or code in CLAIMS_WRONG:
                tag = self.program.tag_at(line)
                out.append((code, pattern_of(tag)))
        return sorted(set(out))

    def summary(self) -> str:
        diags = ", ".join(f"{c}@{ln}" + ("" if s == "error" else "(w)") for ln, c, s, _ in self.diagnostics)
        return (f"spmdcheck: {diags or 'silent'}\nexecution: {self.verdict.summary()}\n"
                f"mutations: {', '.join(self.program.mutations) or 'none'}")


def pattern_of(tag: str) -> str:
    """'ok:column:F.linear(x, w) [oi]' -> 'ok:column:F.linear(x, w)'; keeps the kind and the form."""
    return tag.split(" [")[0]


def program_path(program: Program) -> str:
    return f"<fuzz>/{hashlib.sha1(program.source.encode()).hexdigest()[:16]}.py"


def check(program: Program, registry=None) -> list[tuple[int, str, str, str]]:  # noqa: ANN001
    from spmdcheck.api import Settings, check_source

    diags = check_source(program.source, program_path(program), Settings(mesh=program.mesh), registry)
    return [(d.line, d.code, d.severity, d.message) for d in diags]


def judge(harness: Harness, program: Program, registry=None) -> Outcome:  # noqa: ANN001
    """spmdcheck's verdict and the execution verdict of one program (the harness's caches are dropped after
    it, so a long run does not keep every program's tensors)."""
    path = program_path(program)
    t0 = time.perf_counter()
    diags = check(program, registry)
    t1 = time.perf_counter()
    spec = read_program(program.source, path)
    try:
        verdict = harness.judge(spec, seed_key=path)
    finally:
        harness._cache.clear()  # noqa: SLF001 - per-program cache entries would only grow
    return Outcome(program, path, diags, verdict, t1 - t0, time.perf_counter() - t1)


# --------------------------------------------------------------------------- statistics
@dataclass
class Stats:
    outcomes: list[Outcome] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    seconds: float = 0.0

    def add(self, o: Outcome) -> None:
        if o.path in self.seen:  # hypothesis may replay a program: count each once
            return
        self.seen.add(o.path)
        self.outcomes.append(o)

    @property
    def programs(self) -> int:
        return len(self.outcomes)

    def count(self, pred) -> int:  # noqa: ANN001
        return sum(1 for o in self.outcomes if pred(o))

    @property
    def flagged(self) -> int:
        return self.count(lambda o: o.flagged and o.runnable)

    @property
    def true_positives(self) -> int:
        return self.count(lambda o: o.flagged and o.runnable and o.wrong)

    @property
    def precision(self) -> float | None:
        return self.true_positives / self.flagged if self.flagged else None

    @property
    def violations(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.runnable and o.violation]

    @property
    def false_positives(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.false_positive]

    @property
    def generator_bugs(self) -> list[Outcome]:
        """Correct-by-construction programs whose run does not match: the generator's idea of correct is wrong."""
        return [o for o in self.outcomes if not o.program.mutated and (not o.runnable or not o.matches)]

    def fp_classes(self) -> dict[tuple[str, str], list[Outcome]]:
        groups: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
        for o in self.false_positives:
            for key in o.fp_classes() or [("?", "no line")]:
                groups[key].append(o)
        return dict(sorted(groups.items(), key=lambda kv: -len(kv[1])))

    def violation_classes(self) -> dict[str, list[Outcome]]:
        groups: dict[str, list[Outcome]] = defaultdict(list)
        for o in self.violations:
            key = "+".join(sorted(set(o.program.mutations))) or "correct by construction"
            groups[key].append(o)
        return dict(sorted(groups.items(), key=lambda kv: -len(kv[1])))

    def as_dict(self) -> dict:
        return {
            "programs": self.programs,
            "mutated": self.count(lambda o: o.program.mutated),
            "not_runnable": self.count(lambda o: not o.runnable),
            "silent": self.count(lambda o: o.silent),
            "flagged": self.flagged,
            "flagged_wrong": self.true_positives,
            "precision": self.precision,
            "violations": len(self.violations),
            "false_positives": len(self.false_positives),
            "generator_bugs": len(self.generator_bugs),
            "seconds": round(self.seconds, 1),
        }

    def report(self, examples: bool = True) -> str:
        d = self.as_dict()
        prec = f"{d['precision']:.3f}" if d["precision"] is not None else "n/a"
        lines = [
            f"programs: {d['programs']} ({d['mutated']} mutated, {d['programs'] - d['mutated']} correct by "
            f"construction; {d['not_runnable']} not runnable), {d['seconds']}s",
            f"spmdcheck silent: {d['silent']}; flagged: {d['flagged']} (run wrong: {d['flagged_wrong']})",
            f"precision: {prec}",
            f"soundness violations (silent, run wrong): {d['violations']}",
            f"false positives (flagged, run matches): {d['false_positives']}",
            f"generator bugs (correct by construction, run does not match): {d['generator_bugs']}",
        ]
        execution = Counter(w.outcome for o in self.outcomes for w in o.verdict.worlds)
        lines.append("execution outcomes per (program, N): " + ", ".join(f"{k} {v}" for k, v in execution.items()))
        codes = Counter(c for o in self.outcomes for c in o.codes)
        lines.append("codes reported: " + ", ".join(f"{k} {v}" for k, v in sorted(codes.items())))
        muts = Counter(m for o in self.outcomes for m in set(o.program.mutations))
        caught = Counter(m for o in self.outcomes if o.flagged for m in set(o.program.mutations))
        lines.append("mutations (flagged/generated): " + ", ".join(
            f"{k} {caught[k]}/{v}" for k, v in sorted(muts.items())))
        if self.violations:
            lines.append("\nsoundness violations by mutation:")
            for key, group in self.violation_classes().items():
                lines.append(f"  {key}: {len(group)}")
                if examples:
                    lines.append(_indent(_example(min(group, key=lambda o: len(o.program.source)))))
        if self.false_positives:
            lines.append("\nfalse-positive classes (code, generator step of the reported line): programs")
            for (code, pattern), group in self.fp_classes().items():
                lines.append(f"  {code} at {pattern}: {len(group)}")
                if examples:
                    lines.append(_indent(_example(min(group, key=lambda o: len(o.program.source))), 6))
        if self.generator_bugs:
            lines.append("\ngenerator bugs:")
            for o in self.generator_bugs[:5]:
                lines.append(_indent(_example(o)))
        return "\n".join(lines)


def _body(o: Outcome) -> str:
    src = o.program.source
    return src[src.index("GLOBAL_SHAPES"):]


def _example(o: Outcome) -> str:
    return f"{o.summary()}\n{_body(o)}"


def _indent(text: str, n: int = 4) -> str:
    return "\n".join(" " * n + ln if ln else ln for ln in text.splitlines())


# --------------------------------------------------------------------------- the search
OVERSAMPLE = 1.3  # hypothesis generates some programs twice (choices that do not change the text)


class SoundnessViolation(AssertionError):
    """spmdcheck is silent on a program whose run does not match the one-rank reference."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        super().__init__("soundness violation: spmdcheck is silent but the run does not match the one-rank "
                         f"reference\n{outcome.summary()}\n{outcome.program.source}")


def fuzz(harness: Harness, stats: Stats, examples: int, seed_value: int, registry=None,  # noqa: ANN001
         kinds: tuple[str, ...] | None = None, stop_at_violation: bool = False, progress=None,  # noqa: ANN001
         max_batches: int = 5, branches: bool = False) -> list[Outcome]:
    """Judge generated programs until ``stats`` holds ``examples`` distinct ones (hypothesis batches seeded
    ``seed_value``, ``seed_value + 1``, ...: reproducible). With ``stop_at_violation``, the first violation
    raises :class:`SoundnessViolation` inside hypothesis, which shrinks it and raises it again for the
    minimal program; the returned list (also filled when raising) ends with that minimal program.
    ``branches``: programs with if/else and in-place steps too (``programs(branches=True)``)."""
    from hypothesis import HealthCheck, given, seed, settings

    from .programs import programs

    failures: list[Outcome] = []
    t0 = time.perf_counter()
    try:
        for k in range(max_batches):
            if stats.programs >= examples:
                break

            @seed(seed_value + k)
            @settings(max_examples=int((examples - stats.programs) * OVERSAMPLE) + 1, database=None, deadline=None,
                      derandomize=False, print_blob=False, report_multiple_bugs=False,
                      suppress_health_check=list(HealthCheck))
            @given(programs(kinds=kinds, branches=branches))
            def run(program: Program) -> None:
                o = judge(harness, program, registry)
                stats.add(o)
                if progress is not None:
                    progress(o)
                if stop_at_violation and o.runnable and o.violation:
                    failures.append(o)
                    raise SoundnessViolation(o)

            run()
    finally:
        stats.seconds += time.perf_counter() - t0
    return failures

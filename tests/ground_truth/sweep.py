"""Run every fixture through spmdcheck, the N-rank execution and spmd-types' runtime checker."""
from __future__ import annotations

import time
from dataclasses import dataclass

from .corpus import Fixture, discover, load, spmdcheck_diagnostics
from .harness import CheckerVerdict, Harness, Verdict


@dataclass
class Record:
    fixture: Fixture
    verdict: Verdict | None
    checker: CheckerVerdict | None
    seconds: float

    @property
    def execution(self) -> str:
        if self.fixture.not_runnable:
            return f"not runnable: {self.fixture.not_runnable}"
        return self.verdict.summary() if self.verdict else "not run"

    @property
    def runnable(self) -> bool:
        return self.fixture.not_runnable is None and self.verdict is not None and self.verdict.runnable

    @property
    def agrees(self) -> bool | None:
        """spmdcheck vs execution: silent => matches; claims wrong => wrong for some N. None: no claim to test."""
        if not self.runnable:
            return None
        fx, v = self.fixture, self.verdict
        if fx.silent:
            return v.matches
        if fx.claims_wrong:
            return v.wrong
        return None  # other errors (contracts, strict-only, shapes): recorded, not asserted

    @property
    def checker_pair(self) -> tuple[str, str] | None:
        """(spmdcheck, spmd-types) when they disagree; None when they agree."""
        if self.checker is None or self.checker.outcome not in ("passed", "raised"):
            return None  # no verdict: the program cannot run at the checker's shapes (recorded, not compared)
        mine = "error" if self.fixture.flagged else "silent"
        theirs = self.checker.outcome
        if theirs == "raised" and mine == "error" or theirs == "passed" and mine == "silent":
            return None
        return mine, theirs


def run_fixture(h: Harness, fx: Fixture, registry=None, checker: bool = True) -> Record:  # noqa: ANN001
    t0 = time.perf_counter()
    load(fx)
    spmdcheck_diagnostics(fx, registry)
    verdict = cverdict = None
    if fx.spec is not None:
        verdict = h.judge(fx.spec, fx.twin, seed_key=fx.family)
        if verdict.not_runnable:
            fx.not_runnable = verdict.not_runnable
        if checker:
            cverdict = h.runtime_check(fx.spec, seed_key=fx.family)
    return Record(fx, verdict, cverdict, time.perf_counter() - t0)


def sweep(h: Harness, fixtures: list[Fixture] | None = None, registry=None, checker: bool = True,  # noqa: ANN001
          progress=None) -> list[Record]:  # noqa: ANN001
    out = []
    for fx in fixtures if fixtures is not None else discover():
        rec = run_fixture(h, fx, registry, checker)
        out.append(rec)
        if progress is not None:
            progress(rec)
    return out

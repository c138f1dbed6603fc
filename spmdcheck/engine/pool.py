"""The programs of a run on forked worker processes (workers.py), started on first need."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from spmdcheck.diagnostics.render import diagnostic_of
from spmdcheck.diagnostics.violations.inputs import InternalError
from spmdcheck.engine.analyse import (
    ANALYSIS_BUDGET_PER_FILE_S,
    ANALYSIS_BUDGET_S,
    check_program,
    check_program_recorded,
)
from spmdcheck.engine.plan import LoadedFile
from spmdcheck.rules.registry import load_registry
from spmdcheck.settings import FileResult, Settings

if TYPE_CHECKING:
    from multiprocessing.pool import Pool

    from spmdcheck.engine.incremental import Selective
    from spmdcheck.rules.stubs import Registry


class ProgramTask(NamedTuple):
    """One program of a run, as a worker receives it."""

    index: int  # its place in the run's list (the results name it, not its texts)
    files: list[LoadedFile]
    recorded: bool  # record what each root depends on (a run with the result cache)
    selective: Selective | None  # the plan of a selective run, if any


class ProgramOutcome(NamedTuple):
    """What a worker sends back for a program: its results and its new record (None: none made)."""

    index: int
    results: list[FileResult]
    record: dict | None


_WORKER_STATE: tuple[Settings, Registry] | None = None  # set in the parent before the workers fork


def _run_task(task: ProgramTask, settings: Settings, registry: Registry | None) -> ProgramOutcome:
    if not task.recorded:
        return ProgramOutcome(task.index, check_program(task.files, settings, registry), None)
    results, record = check_program_recorded(task.files, settings, registry, task.selective)
    return ProgramOutcome(task.index, results, record)


def _check_program_in_worker(task: ProgramTask) -> ProgramOutcome:
    """A program's results with its index: the program itself (all its texts) is not sent back."""
    assert _WORKER_STATE is not None, "set before the fork"
    settings, registry = _WORKER_STATE
    return _run_task(task, settings, registry)


def _program_failed(task: ProgramTask, why: str) -> ProgramOutcome:
    """A program whose worker crashed or overran: SPMD000 on each of its files, and the run goes on."""
    failed = [FileResult(f.path, [diagnostic_of(f.path, InternalError(why))]) for f in task.files]
    return ProgramOutcome(task.index, failed, None)


# A worker is killed only this much later: what it overruns then is not the interpreter (a native parser).
# The interpreter's budget is CPU time, the parent's wall time: a loaded machine stretches the one into
# several times the other, so the parent waits that much more before it kills.
_KILL_GRACE_S = 30.0
_KILL_AFTER_CPU_BUDGETS = 4


def _program_budget(task: ProgramTask) -> float:
    """Seconds a worker may spend on one program before its parent kills it."""
    cpu = ANALYSIS_BUDGET_S + ANALYSIS_BUDGET_PER_FILE_S * len(task.files)
    return _KILL_AFTER_CPU_BUDGETS * cpu + _KILL_GRACE_S


def _import_analysis() -> None:
    """libcst and the analysis, imported once in the parent before the program workers fork (not again in
    every worker); while the pre-pass's workers scan, the parent has nothing else to do."""
    from spmdcheck.analysis import program  # noqa: F401
    from spmdcheck.engine import workers  # noqa: F401


class LazyPool:
    """Forked workers started on first need (an all-cached run never starts them), with the registry
    loaded once in the parent before the fork."""

    def __init__(self, jobs: int, settings: Settings, registry: Registry | None) -> None:
        self.jobs, self.settings, self._registry = jobs, settings, registry
        self.pool: Pool | None = None

    def __enter__(self) -> LazyPool:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = load_registry(self.settings.stub_path)
        return self._registry

    def _start(self) -> bool:
        global _WORKER_STATE
        if self.jobs <= 1:
            return False
        if self.pool is None:
            import multiprocessing as mp

            _WORKER_STATE = (self.settings, self.registry)
            try:
                self.pool = mp.get_context("fork").Pool(self.jobs)
            except (ValueError, OSError):
                self.jobs = 1
                return False
        return True

    def map(self, fn: Callable, items: list) -> list:
        items = list(items)
        if len(items) < 8 or not self._start():
            return [fn(i) for i in items]
        assert self.pool is not None, "started"
        pending = self.pool.map_async(fn, items, 4)
        _import_analysis()  # while the workers scan: the program workers fork with it (see `run_programs`)
        return pending.get()

    def run_programs(
        self,
        programs: list[list[LoadedFile]],
        plans: dict[int, Selective | None] | None = None,
        on_done: Callable[[int], None] | None = None,
    ) -> Iterator[tuple[list[LoadedFile], list[FileResult], dict | None]]:
        """(program, results, record) for each program; `plans` (with a cache): record each program's run,
        selectively where a plan is given (see `check_program_recorded`). `on_done(files)` as each program
        finishes (the command line's progress)."""
        if not programs:
            return
        recorded = plans is not None
        plans = plans or {}
        if len(programs) < 2 or self.jobs <= 1:
            for program in programs:
                task = ProgramTask(0, program, recorded, plans.get(id(program)))
                outcome = _run_task(task, self.settings, self.registry)
                if on_done is not None:
                    on_done(len(outcome.results))
                yield program, outcome.results, outcome.record
            return
        _import_analysis()
        from spmdcheck.engine.workers import run_isolated

        global _WORKER_STATE
        _WORKER_STATE = (self.settings, self.registry)
        # Big programs first; a worker that crashes or hangs costs its program (SPMD000), never the run.
        programs = sorted(programs, key=lambda p: -sum(len(f.text) for f in p))
        tasks = [ProgramTask(i, p, recorded, plans.get(id(p))) for i, p in enumerate(programs)]
        seen = (lambda outcome: on_done(len(outcome.results))) if on_done is not None else None
        done = run_isolated(tasks, _check_program_in_worker, _program_failed, self.jobs, _program_budget, seen)
        for outcome in done:
            yield programs[outcome.index], outcome.results, outcome.record

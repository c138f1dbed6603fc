"""Analysing one planned program: under a time budget, recorded for the result cache, selectively."""

from __future__ import annotations

import collections
import os
import pathlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from spmdcheck.analysis import budget
from spmdcheck.diagnostics.render import Diagnostic, diagnostic_of
from spmdcheck.diagnostics.violations.inputs import InternalError, SyntaxErrorFound
from spmdcheck.engine.check import check_source, check_sources
from spmdcheck.engine.collection import without_cycle_collection
from spmdcheck.engine.plan import BlankedTexts, LoadedFile, load_file, plan_programs, program_graph
from spmdcheck.engine.record import Recorder, program_record
from spmdcheck.settings import FileResult, Settings

if TYPE_CHECKING:
    from spmdcheck.engine.incremental import Selective
    from spmdcheck.rules.stubs import Registry

# CPU seconds one analysis may take: a base and more per file (`analysis.budget`). The interpreter stops
# itself at this budget, in a worker or in a serial run alike, and the program's files degrade to unknown.
ANALYSIS_BUDGET_S = budget.PROGRAM_BUDGET_S
ANALYSIS_BUDGET_PER_FILE_S = budget.FILE_BUDGET_S


def analysis_budget(files: int) -> float:
    return ANALYSIS_BUDGET_S + ANALYSIS_BUDGET_PER_FILE_S * files


def guarded(paths: list[str], run: Callable[[], dict[str, list[Diagnostic]]]) -> list[FileResult]:
    """Run an analysis; a bug of the checker becomes a diagnostic on the files it concerned, and the run goes on.
    An analysis past its budget reports nothing on its files (they are unknown), with a note for --verbose."""
    try:
        with budget.limited(analysis_budget(len(paths))):
            found = run()
        return [FileResult(path, found.get(path, [])) for path in paths]
    except budget.BudgetExceeded as exc:
        note = budget.over_time_note(exc, len(paths))
        return [FileResult(path, notes=[note]) for path in paths]
    except RecursionError:
        return [FileResult(path, [diagnostic_of(path, SyntaxErrorFound("too-deep"))]) for path in paths]
    except Exception as exc:  # noqa: BLE001 - one file's bug in the checker must not stop the run
        # only the innermost frame, and a bounded message: never format a (possibly huge, recursive) traceback
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = f"{pathlib.Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb is not None else "?"
        try:
            text = str(exc)[:300]
        except Exception:  # noqa: BLE001 - an exception whose str() fails
            text = "?"
        crash = InternalError(text, type(exc).__name__, where)
        return [FileResult(path, [diagnostic_of(path, crash)]) for path in paths]


def check_file(path: str, settings: Settings, registry: Registry | None = None) -> FileResult:
    """One file on its own."""
    loaded = load_file(path, settings)
    if isinstance(loaded, FileResult):
        return loaded
    return guarded([path], lambda: {path: check_source(loaded.text, path, settings, registry)})[0]


def check_files(paths: list[str], settings: Settings, registry: Registry | None = None) -> list[FileResult]:
    """Every file, whole-program, in one process."""
    done, programs = plan_programs(paths, settings)
    for files in programs:
        done += check_program(files, settings, registry)
    order = {p: i for i, p in enumerate(paths)}
    return sorted(done, key=lambda r: order.get(r.path, len(order)))


def check_program(files: list[LoadedFile], settings: Settings, registry: Registry | None = None) -> list[FileResult]:
    """Analyse files as one program (see `plan_programs`)."""
    with without_cycle_collection():
        return _check_program(files, settings, registry)


def check_program_recorded(
    files: list[LoadedFile], settings: Settings, registry: Registry | None = None, selective: Selective | None = None
) -> tuple[list[FileResult], dict | None]:
    """`check_program`, recording what each root depends on (incremental.py); with a `selective` plan
    (incremental.Selective), only the roots it names run again, and the whole program runs instead
    when the selective run cannot answer. Returns the results and the new record (None: none made)."""
    from spmdcheck.analysis.roots import ElidedBody
    from spmdcheck.engine import incremental

    with without_cycle_collection():
        bodies = {f.path: len(f.spans) for f in files if f.spans is not None}
        if selective is not None:
            recorder = Recorder(bodies, selective)
            why = "a writer"
            try:
                results = _check_program(files, settings, registry, recorder, selective.elided)
                old = selective.old
                # a root or a top level that wrote what it did not write before: what reads it is unknown
                new_writer = bool(set(recorder.writers) - set(old.writers))
                new_writer |= bool(set(recorder.top_writers) - set(old.top_writers))
                # a writer that wrote otherwise than before: the roots that read it did not run again
                new_writer |= incremental.writes_of(recorder.writes) != incremental.writes_of(old.writes)
                if not new_writer and not _failed(results):
                    tops = f"{recorder.parsed} of {len(files)}" if selective.top_only is not None else "all"
                    ran = f"{len(selective.run_only)} of {len(selective.known)} roots ran again"
                    _trace(f"selective: {ran}, top levels of {tops} files")
                    return results, program_record(files, recorder)
            except ElidedBody as exc:
                why = str(exc) or "it reached a body it left out"  # the whole program answers
            _trace(f"selective run abandoned ({why})")
        recorder = Recorder(bodies)
        _trace(f"whole program of {len(files)} files")
        results = _check_program(files, settings, registry, recorder)
        return results, None if _failed(results) else program_record(files, recorder)


def _trace(message: str) -> None:
    """SPMDCHECK_TRACE=1: say on stderr how each program was answered (tests and benchmarks read it)."""
    if os.environ.get("SPMDCHECK_TRACE"):
        import sys

        print(f"spmdcheck-trace: {message}", file=sys.stderr)


def _failed(results: list[FileResult]) -> bool:
    """An analysis that did not finish (a crash, its budget): nothing of it is recorded."""
    return any(r.notes or any(d.code == "SPMD000" for d in r.diagnostics) for r in results)


def _check_program(
    files: list[LoadedFile],
    settings: Settings,
    registry: Registry | None,
    recorder: Recorder | None = None,
    elided: Mapping[str, str] | None = None,
) -> list[FileResult]:
    paths = [f.path for f in files]
    planned = BlankedTexts(files)
    # a file a selective run left bodies out of is read in that form (made when it is parsed: incremental.LeftOut)
    blanked: Mapping[str, str] = collections.ChainMap(elided, planned) if elided else planned  # type: ignore[arg-type]
    graph = program_graph(files) if all(f.imports is not None for f in files) else None
    libraries = frozenset(f.path for f in files if not f.relevant)
    shallow = frozenset(f.path for f in files if f.shallow)
    return guarded(
        paths,
        lambda: check_sources(
            {f.path: f.source for f in files},
            settings,
            registry,
            blanked=blanked,
            graph=graph,
            libraries=libraries,
            shallow=shallow,
            recorder=recorder,
        ),
    )

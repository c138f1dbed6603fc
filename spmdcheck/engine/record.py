"""What a recorded run keeps of a program (incremental.py): its roots, file diagnostics, outlines."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spmdcheck.analysis.program import SourceUnit
    from spmdcheck.analysis.roots import RootLog
    from spmdcheck.diagnostics.render import Diagnostic, ProgramPositions
    from spmdcheck.engine.incremental import Outline, ProgramRecord, Selective
    from spmdcheck.engine.plan import LoadedFile

@dataclass
class Recorder:
    """A recorded program run (incremental.py): in, the body count of each file and the plan of a
    selective run; out, the new record's roots, file diagnostics and flags."""

    bodies: dict[str, int]
    selective: Selective | None = None
    roots: list = field(default_factory=list)
    file_diags: dict[str, list] = field(default_factory=dict)
    unmapped: list[int] = field(default_factory=list)
    top_writers: list[int] = field(default_factory=list)
    top_files: list[int] = field(default_factory=list)
    top_order: list[int] = field(default_factory=list)
    top_units: list = field(default_factory=list)
    writers: list[tuple] = field(default_factory=list)
    checked: list[tuple] = field(default_factory=list)
    writes: list = field(default_factory=list)  # [writer key, what it wrote] (analysis/writes.py)
    parsed: int = 0  # the files the run parsed (a selective run defers the others: see analysis/program.py)


def start_log(recorder: Recorder, before: dict[str, list[Diagnostic]]) -> RootLog:
    """The log of a recorded run (what each root runs and reads; a selective run's, from its plan), and the
    record's file diagnostics: those made `before` the analysis (syntax, settings)."""
    from spmdcheck.analysis.roots import RootLog
    from spmdcheck.engine import result_cache as caching

    recorder.file_diags = {path: caching.to_plain(diags) for path, diags in before.items()}
    selective = recorder.selective
    if selective is None:
        return RootLog()
    log = RootLog(run_only=selective.run_only, known=selective.known)
    log.recorded_checked = frozenset(selective.old.checked)
    log.recorded_top_files = selective.old.top_files
    log.recorded_top_units = selective.old.top_units
    if selective.top_only is not None:
        log.run_part(selective.top_only, selective.old.top_files, selective.old.top_order)
    return log


def fill_recorder(
    recorder: Recorder,
    log: RootLog,
    positions: ProgramPositions,
    sites: list,
    units: list[SourceUnit],
    wanted: Callable[[str], bool],
) -> None:
    """The new record's roots and flags, from the log of the run (a selective run's merged with its plan's)."""
    from spmdcheck.analysis.roots import TOP
    from spmdcheck.engine import incremental

    selective = recorder.selective
    recorder.roots = root_records(log, positions, sites, wanted)
    recorder.unmapped = sorted(log.unmapped)
    recorder.top_writers = sorted(log.top_writers)
    recorder.top_files, recorder.top_order, recorder.top_units = log.top_files, log.top_order, log.top_units
    parsed = {i for i, unit in enumerate(units) if unit.module is not None}
    recorder.parsed = len(parsed)
    writers, checked = set(log.writers), set(log.checked)
    if selective is not None:  # the roots that did not run write and count as checked as they did
        writers |= set(selective.old.writers) - set(log.order)
        checked |= set(selective.old.checked) - set(log.order)
    recorder.writers, recorder.checked = sorted(writers, key=str), sorted(checked, key=str)
    written = dict(log.writes)
    if selective is not None:  # a writer that did not run wrote as it did
        ran_now = set(log.order)
        for key, ws in incremental.writes_of(selective.old.writes).items():
            if key not in ran_now:
                written.setdefault(key, ws)
    recorder.writes = [
        [list(key), [None if w is None else list(w) for w in ws]]
        for key, ws in sorted(written.items(), key=lambda kv: str(kv[0]))
    ]
    if selective is not None and selective.top_only is not None:
        # a part of the top levels ran: the top level's diagnostics are the recorded ones (an edit inside
        # bodies) or this run's (outside: the recorded top level had none); what it ran and reused, both
        old_top = next(r for r in selective.old.roots if r[0] == TOP)
        fresh_top = next((r for r in recorder.roots if r[0] == TOP), (TOP, [], [], []))
        recorder.roots = [r for r in recorder.roots if r[0] != TOP]
        if selective.fresh_top:
            top_units = sorted({tuple(u) for u in old_top[1]} | {tuple(u) for u in fresh_top[1]})
            providers = sorted({tuple(p) for p in old_top[2]} | {tuple(p) for p in fresh_top[2]}, key=str)
            recorder.roots.insert(0, (TOP, top_units, providers, fresh_top[3]))
        recorder.unmapped = sorted(set(recorder.unmapped) | {i for i in selective.old.unmapped if i not in parsed})
        recorder.top_files, recorder.top_order = selective.old.top_files, selective.old.top_order
        recorder.top_units = selective.old.top_units


def merge_selective(recorder: Recorder, out: dict[str, list[Diagnostic]]) -> None:
    """A selective run's diagnostics: the roots that ran again, with the others' as recorded (and the
    diagnostics made before the analysis of the files that did not change, which were parsed with bodies
    left out), into `out` and the record."""
    from spmdcheck.analysis.roots import ElidedBody, descends
    from spmdcheck.engine import incremental
    from spmdcheck.engine import result_cache as caching

    selective = recorder.selective
    assert selective is not None, "a selective run"
    ran = {r[0] for r in recorder.roots}
    # A root to run again that did not (a re-analysis after a writer, `("again", ...)`, is queued only when the
    # writer's state changes) would keep its recorded diagnostics: stale where its file changed
    for key, _, _, diags in selective.old.roots:
        if key in selective.run_only and not descends(key, ran) and any(d[0] in selective.changed for d in diags):
            raise ElidedBody("a root it had to run again did not run")
    recorder.roots = incremental.merge(selective.old, recorder.roots, ran)
    for path in out:
        if path not in selective.changed:
            recorder.file_diags[path] = selective.old.file_diags.get(path, [])
            out[path] = caching.from_plain(path, recorder.file_diags[path])
    for path, plain in incremental.merged_diagnostics(recorder.roots).items():
        out[path] += caching.from_plain(path, plain)


def root_records(log: RootLog, positions: ProgramPositions, sites: list, wanted: Callable[[str], bool]) -> list:
    """Each root that ran: its key, the bodies it executed, its providers and its diagnostics (plain, of the
    codes `wanted`)."""
    from spmdcheck.engine import result_cache as caching

    out = []
    positions.want([f for key in log.order for f in log.records[key].findings if wanted(f.code)], sites)
    for key in log.order:
        record = log.records[key]
        diags = []
        for finding in record.findings:
            if not wanted(finding.code):
                continue
            rendered = positions.render_one(finding, sites)
            if rendered is not None:
                diag, same = rendered
                diags.append([diag.path, same, caching.to_plain([diag])[0]])
        out.append((key, sorted(record.units), sorted(record.providers, key=str), diags))
    return out


def outline_key(f: LoadedFile) -> str:
    """What a file's outline follows from: its contents, the bodies the pre-pass blanked, its bodies' spans
    ("" when unknown: the outline is made again)."""
    return f"{f.content}:{f.blank}:{f.spans}" if f.content and f.spans is not None else ""


def file_outlines(files: list[LoadedFile], old: ProgramRecord | None = None) -> list[Outline]:
    """Each file's outline, made once (the record of the last run has those of the unchanged files)."""
    from spmdcheck.engine import incremental

    known: dict[str, Outline] = {}
    if old is not None and len(old.keys) == len(old.outlines):
        known = {key: o for key, o in zip(old.keys, old.outlines) if key}
    for f in files:
        if f.outline is None:
            f.outline = known.get(outline_key(f)) or incremental.outline(
                f.text, f.blanked or f.text, f.spans or (), f.statements, f.source.mesh_names
            )
    return [f.outline for f in files]


def program_record(files: list[LoadedFile], recorder: Recorder) -> dict | None:
    from spmdcheck.engine import incremental

    if any(f.spans is None for f in files):
        return None
    return incremental.ProgramRecord(
        [f.path for f in files],
        file_outlines(files),
        [list(f.spans or ()) for f in files],
        recorder.file_diags,
        recorder.roots,
        recorder.unmapped,
        recorder.top_writers,
        recorder.top_files,
        recorder.top_order,
        [outline_key(f) for f in files],
        [incremental.import_key(f.imports) for f in files],
        recorder.writers,
        recorder.checked,
        [list(u) for u in recorder.top_units],
        recorder.writes,
    ).plain()

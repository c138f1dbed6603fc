"""The checker as a library: check a source string or a file with given settings."""

from __future__ import annotations

import collections
import contextlib
import gc
import os
import pathlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spmdcheck import prepass
from spmdcheck.analysis import budget
from spmdcheck.diagnostics.codes import CODES
from spmdcheck.diagnostics.render import Diagnostic, ProgramPositions, make
from spmdcheck.diagnostics.suppression import apply_suppressions
from spmdcheck.frontend.guard import MAX_EXPRESSION_DEPTH, call_with_deep_stack
from spmdcheck.frontend.inline_config import read_inline_config
from spmdcheck.frontend.lines import physical_lines
from spmdcheck.frontend.source import (
    ParseFailure,
    decode_source,
    mesh_names_in,
    parse,
    parse_screened,
    read_source_bytes,
)
from spmdcheck.program.graph import ModuleFile, ModuleGraph, build_graph, module_name_for
from spmdcheck.rules.cache import cached_registry, forget_registries
from spmdcheck.rules.stubs import Registry, load_stub_dirs

if TYPE_CHECKING:  # libcst and the analysis load when a file is analysed: a cached run never needs them
    import libcst as cst

    from spmdcheck.analysis.context import BindObserver, Options
    from spmdcheck.rules.stubs import Registry

SHIPPED_STUBS_CANDIDATES = (
    pathlib.Path(__file__).resolve().parent / "_stubs",  # installed wheel
    pathlib.Path(__file__).resolve().parent.parent / "stubs",  # source checkout / editable install
)


def shipped_stubs() -> pathlib.Path:
    for candidate in SHIPPED_STUBS_CANDIDATES:
        if candidate.is_dir():
            return candidate
    return SHIPPED_STUBS_CANDIDATES[-1]


@dataclass(frozen=True)
class Settings:
    mesh: tuple[str, ...] = ()
    strict: bool = False
    stub_path: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    preview: bool = False  # preview rules (off by default) run too


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    skipped: bool = False


def _cache_dir() -> pathlib.Path:
    base = os.environ.get("SPMDCHECK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "spmdcheck"
    )
    return pathlib.Path(base)


def load_registry(stub_path: tuple[str, ...] = ()) -> Registry:
    """Shipped stubs, then the user's stub directories; cached (in memory and on disk) by the stubs' text."""
    dirs = [shipped_stubs(), *(pathlib.Path(p) for p in stub_path)]
    return cached_registry(dirs, load_stub_dirs, _cache_dir())


load_registry.cache_clear = forget_registries  # type: ignore[attr-defined]


def _selected(code: str, settings: Settings) -> bool:
    def matches(pattern: str) -> bool:
        p = pattern.strip()
        if p.upper() == "ALL":
            return True
        return code.startswith(p.upper()) or CODES[code].name == p.lower()

    if settings.select and not any(matches(p) for p in settings.select):
        return False
    return not any(matches(p) for p in settings.ignore)


def _previewed(code: str, settings: Settings) -> bool:
    """A preview rule runs with `preview`, or when selected by its exact code or name (not a prefix or ALL)."""
    info = CODES[code]
    return (
        not info.preview
        or settings.preview
        or any(p.strip().upper() == code or p.strip().lower() == info.name for p in settings.select)
    )


def check_source(
    text: str,
    path: str = "<string>",
    settings: Settings | None = None,
    registry: Registry | None = None,
    on_bind: BindObserver | None = None,
) -> list[Diagnostic]:
    """One file on its own (its imports of other files are unknown)."""
    return check_sources({path: text}, settings, registry, exists=lambda p: False, on_bind=on_bind)[path]


def check_sources(
    sources: dict[str, str],
    settings: Settings | None = None,
    registry: Registry | None = None,
    exists: Callable[[str], bool] | None = None,
    blanked: dict[str, str] | None = None,
    graph: ModuleGraph | None = None,
    libraries: frozenset[str] = frozenset(),
    on_bind: BindObserver | None = None,
    shallow: frozenset[str] = frozenset(),
    recorder: Recorder | None = None,
) -> dict[str, list[Diagnostic]]:
    """Check files as one program: `sources` maps each path to its text; module names come from the
    paths' package folders (a folder is a package when `<folder>/__init__.py` is one of the keys or
    exists on disk). Returns each path's diagnostics, sorted.

    `blanked`: for some paths, the text with the function bodies the pre-pass proved inert emptied
    (same lines elsewhere); libcst parses that instead. `graph`: the module graph of `sources` when
    the caller has it (the pre-pass read every import already).

    `libraries` are paths the others import that cannot hold a finding by themselves: parsed only
    when an import of them runs, and followed only where typed values flow into them. `on_bind`
    observes every name binding (--show-types, editor hovers). `shallow` paths were proved by the
    pre-pass to need no depth screen before libcst (`guard.shallow`).

    `recorder`: record what each root depends on (incremental.py), or run selectively from a record.

    Runs on a thread with a deep stack (`frontend.guard`): deep but valid syntax trees are analysed.
    """
    return call_with_deep_stack(
        lambda: _check_sources(
            sources, settings, registry, exists, blanked, graph, libraries, on_bind, shallow, recorder
        )
    )


@dataclass
class Recorder:
    """A recorded program run (incremental.py): in, the body count of each file and the plan of a
    selective run; out, the new record's roots, file diagnostics and flags."""

    bodies: dict[str, int]
    selective: object = None  # an incremental.Selective
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


def _file_options(text: str, settings: Settings) -> tuple[Options, list[tuple[int, str]]]:
    """A file's analysis options (its header comments over the settings) and the header's errors."""
    from spmdcheck.analysis.context import Options

    inline = read_inline_config(text)
    options = Options(
        mesh=inline.mesh if inline.mesh is not None else settings.mesh,
        strict=inline.strict if inline.strict is not None else settings.strict,
    )
    return options, list(inline.errors)


def _check_sources(
    sources: dict[str, str],
    settings: Settings | None,
    registry: Registry | None,
    exists: Callable[[str], bool] | None,
    blanked: dict[str, str] | None,
    graph: ModuleGraph | None,
    libraries: frozenset[str],
    on_bind: BindObserver | None,
    shallow: frozenset[str] = frozenset(),
    recorder: Recorder | None = None,
) -> dict[str, list[Diagnostic]]:
    from spmdcheck import cache as caching
    from spmdcheck import incremental
    from spmdcheck.analysis.context import Options
    from spmdcheck.analysis.program import SourceUnit, analyze_program
    from spmdcheck.analysis.roots import TOP, ElidedBody, RootLog
    from spmdcheck.frontend.source import ParseFailure

    settings = settings or Settings()
    registry = registry if registry is not None else load_registry(settings.stub_path)
    if exists is None:
        exists = lambda p: p in sources or os.path.exists(p)  # noqa: E731
    out: dict[str, list[Diagnostic]] = {path: [] for path in sources}
    units: list[SourceUnit] = []
    strict_of: dict[str, bool] = {}
    shallow_libraries: set[int] = set()  # ids of library texts parsed without the screen
    selective: incremental.Selective | None = recorder.selective if recorder is not None else None  # type: ignore[assignment]
    part = selective.top_only if selective is not None else None  # the files a selective run needs (by index)
    def text_to_parse(path: str) -> Callable[[], str]:
        """A file parsed only when an import of it runs: its text, made then (a selective run's is elided)."""

        def made() -> str:
            text = blanked[path] if blanked and path in blanked else sources[path]
            if path in shallow:
                shallow_libraries.add(id(text))
            return text

        return made

    for index, (path, text) in enumerate(sources.items()):
        if path in libraries or (part is not None and index not in part):
            library_text = text_to_parse(path)
        if path not in libraries and part is not None and index not in part:
            # deferred in a selective run: parsed and run when a name of it is read; its diagnostics before the
            # analysis (syntax, settings) are the recorded ones
            options, _ = _file_options(text, settings)
            unit = SourceUnit(path, None, options, module_name_for(path, exists), frozenset(mesh_names_in(text)))
            unit.text, unit.deferred, unit.bodies = library_text, True, recorder.bodies.get(path)  # type: ignore[union-attr]
            units.append(unit)
            strict_of[path] = options.strict
            continue
        if path in libraries:
            units.append(
                SourceUnit(path, None, Options(mesh=settings.mesh), module_name_for(path, exists), text=library_text)
            )
            if recorder is not None:
                units[-1].bodies = recorder.bodies.get(path)
            continue
        source_text = blanked[path] if blanked and path in blanked else text
        parsed, deep = parse_screened(source_text, path in shallow)
        if isinstance(parsed, ParseFailure) and source_text is not text:
            parsed, deep = parse_screened(text, path in shallow)  # never report a syntax error the blanking made
        out[path] += [
            make(
                path,
                "SPMD001",
                f"expression nested {d.depth} levels deep (the limit is {MAX_EXPRESSION_DEPTH}): it was not "
                "analysed (read as an unknown value); the rest of the file was checked",
                d.line,
                d.column,
            )
            for d in deep
        ]
        if isinstance(parsed, ParseFailure):
            if part is not None:
                raise ElidedBody  # file indices would no longer match the record's: the whole program answers
            out[path].append(
                make(
                    path,
                    "SPMD001",
                    f"syntax error: {parsed.message}; the file was not checked",
                    parsed.line,
                    parsed.column,
                )
            )
            continue
        options, errors = _file_options(text, settings)
        out[path] += [make(path, "SPMD005", message, line) for line, message in errors]
        units.append(SourceUnit(path, parsed, options, module_name_for(path, exists), frozenset(mesh_names_in(text))))
        if recorder is not None:
            units[-1].bodies = recorder.bodies.get(path)
        strict_of[path] = options.strict
    if len(sources) <= 1:
        graph = None
    elif graph is None:
        graph = build_graph(sources, exists)

    def parse_library(text: str) -> cst.Module | None:
        parsed = parse(text, id(text) in shallow_libraries)
        return None if isinstance(parsed, ParseFailure) else parsed

    log = None
    if recorder is not None:
        recorder.file_diags = {path: caching.to_plain(diags) for path, diags in out.items()}
        log = RootLog(run_only=selective.run_only, known=selective.known) if selective else RootLog()
        if selective is not None:
            log.recorded_checked = frozenset(selective.old.checked)
            log.recorded_top_files = selective.old.top_files
            log.recorded_top_units = selective.old.top_units
        if selective is not None and part is not None:
            log.run_part(part, selective.old.top_files, selective.old.top_order)
    result = analyze_program(units, registry, graph, parse_library, on_bind, log)

    def wanted(code: str) -> bool:
        """A finding of a code the settings leave out is never shown: its file's positions are not worth
        resolving (a whole-module pass of libcst's, for the one preview finding of a big file)."""
        return _selected(code, settings) and _previewed(code, settings)

    positions = ProgramPositions()
    for unit in units:
        if unit.module is not None:
            positions.add(result.contexts[unit.path], unit.path, unit.module)
    if log is not None and recorder is not None:
        recorder.roots = _root_records(log, positions, result.program.sites, wanted)
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
        if selective is not None and part is not None:
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
    if selective is not None and recorder is not None:
        # the roots that ran again, with the others' diagnostics as recorded (and the diagnostics made
        # before the analysis of the files that did not change, which were parsed with bodies left out)
        ran = {r[0] for r in recorder.roots}
        recorder.roots = incremental.merge(selective.old, recorder.roots, ran)
        for path in out:
            if path not in selective.changed:
                recorder.file_diags[path] = selective.old.file_diags.get(path, [])
                out[path] = caching.from_plain(path, recorder.file_diags[path])
        for path, plain in incremental.merged_diagnostics(recorder.roots).items():
            out[path] += caching.from_plain(path, plain)
    else:
        findings = [f for f in result.program.findings if wanted(f.code)]
        for path, diags in positions.render(findings, result.program.sites).items():
            out[path] += diags
    for path in out:

        def enabled(code: str, strict: bool = strict_of.get(path, settings.strict)) -> bool:
            info = CODES[code]
            return _selected(code, settings) and (strict or not info.strict_only) and _previewed(code, settings)

        out[path] = apply_suppressions(path, sources[path], out[path], enabled)
        if out[path]:  # the code frames, from the text as decoded (never read again)
            text_lines = physical_lines(sources[path])
            for d in out[path]:
                d.attach_frame(text_lines)
    return {
        path: sorted(
            (d for d in diags if _selected(d.code, settings) and _previewed(d.code, settings)), key=Diagnostic.sort_key
        )
        for path, diags in out.items()
    }


def _root_records(log: object, positions: ProgramPositions, sites: list, wanted: Callable[[str], bool]) -> list:
    """Each root that ran: its key, the bodies it executed, its providers and its diagnostics (plain, of the
    codes `wanted`)."""
    from spmdcheck import cache as caching

    out = []
    for key in log.order:  # type: ignore[attr-defined]
        record = log.records[key]  # type: ignore[attr-defined]
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


def check_file(path: str, settings: Settings, registry: Registry | None = None) -> FileResult:
    """One file on its own."""
    loaded = load_file(path, settings)
    if isinstance(loaded, FileResult):
        return loaded
    return _guarded([path], lambda: {path: check_source(loaded.text, path, settings, registry)})[0]


@dataclass
class LoadedFile:
    path: str
    text: str
    relevant: bool  # can hold a finding by itself (types, collectives, ranks); else only as an import
    blanked: str | None = None  # the text with inert function bodies emptied (the pre-pass), to parse
    imports: frozenset[str] | None = None  # module names its imports may refer to (the pre-pass)
    module: str = ""  # its module name (the pre-pass)
    blank: tuple[tuple[int, int], ...] = ()  # the line spans emptied in `blanked`
    cuts: tuple[tuple[int, int], ...] | None = None  # comments no analysis reads (prepass.comment_cuts)
    shallow: bool = False  # no expression too deep for libcst (guard.shallow): parsed without the screen
    spans: tuple[tuple[int, int], ...] | None = None  # every function body's lines (the pre-pass), if known
    statements: tuple | None = None  # its module-level statements (prepass.statements), if known
    content: str = ""  # its content hash, in a cached run
    outline: object = None  # its incremental.Outline, once made


def _outline_key(f: LoadedFile) -> str:
    """What a file's outline follows from: its contents, the bodies the pre-pass blanked, its bodies' spans
    ("" when unknown: the outline is made again)."""
    return f"{f.content}:{f.blank}:{f.spans}" if f.content and f.spans is not None else ""


def _outlines(files: list[LoadedFile], old: object = None) -> list:
    """Each file's outline, made once (the record of the last run has those of the unchanged files)."""
    from spmdcheck import incremental

    known: dict[str, object] = {}
    if isinstance(old, incremental.ProgramRecord) and len(old.keys) == len(old.outlines):
        known = {key: o for key, o in zip(old.keys, old.outlines) if key}
    for f in files:
        if f.outline is None:
            f.outline = known.get(_outline_key(f)) or incremental.outline(
                f.text, f.blanked or f.text, f.spans or (), f.statements
            )
    return [f.outline for f in files]


def load_file(path: str, settings: Settings) -> LoadedFile | FileResult:
    """Read and decode a file; a FileResult when there is nothing to analyse (or it cannot be read)."""
    try:
        data = read_source_bytes(path)
    except OSError as exc:
        return FileResult(path, [make(path, "SPMD005", f"cannot read file: {exc.strerror}")])
    text = decode_source(data)
    if isinstance(text, ParseFailure):
        return FileResult(path, [make(path, "SPMD001", text.message, text.line, text.column)])
    return LoadedFile(path, text, relevant=True)


def _guarded(paths: list[str], run: Callable[[], dict[str, list[Diagnostic]]]) -> list[FileResult]:
    """Run an analysis; a bug of the checker becomes a diagnostic on the files it concerned, and the run goes on."""
    try:
        with budget.limited(_ANALYSIS_BUDGET_S + _ANALYSIS_BUDGET_PER_FILE_S * len(paths)):
            found = run()
        return [FileResult(path, found.get(path, [])) for path in paths]
    except budget.BudgetExceeded as exc:
        return [FileResult(path, [make(path, "SPMD000", f"{exc}; the file was not checked")]) for path in paths]
    except RecursionError:
        return [FileResult(path, [make(path, "SPMD001", "file is too deeply nested to analyse")]) for path in paths]
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
        message = f"internal error: {type(exc).__name__}: {text} (at {where})"
        return [FileResult(path, [make(path, "SPMD000", message)]) for path in paths]


def plan_programs(
    paths: list[str],
    settings: Settings,
    registry: Registry | None = None,
    mapper: Callable = map,
    scans: list[prepass.FileScan | None] | None = None,
    plans: dict[str, tuple[bool, tuple[tuple[int, int], ...]]] | None = None,
    focus: frozenset[str] | None = None,
) -> tuple[list[FileResult], list[list[LoadedFile]]]:
    """Read the files and group them into programs: the relevant files and the checked files they import,
    split into the connected parts of the import graph (each part is analysed as one program).

    With a `focus` (the files to report; the others are their project context), only the focus files
    and the files that import one of them, directly or not, start programs: code that never imports a
    focus file cannot call it, and its findings would not be reported.

    The pre-pass (`scan_files`, run through `mapper` on worker processes, unless its `scans` are
    given, and `taint`, unless its `plans` are) decides which files are relevant and blanks inert
    function bodies; with
    SPMDCHECK_NO_PREPASS=1 every file is relevant.
    """
    done: list[FileResult] = []
    loaded: dict[str, LoadedFile] = {}
    if prepass.enabled():
        if scans is None:
            scans = scan_files(paths, settings, registry, mapper, for_cache=False)  # no cache: see `scan_files`
        if plans is None:
            plans = taint(scans)
        graph = _graph_of([s for s in scans if s is not None])
        for path, scan in zip(paths, scans):
            item = load_file(path, settings)
            if isinstance(item, FileResult) or scan is None:
                done.append(item if isinstance(item, FileResult) else FileResult(path, skipped=True))
                continue
            item.relevant, blank = plans[path]
            item.imports, item.module, item.cuts, item.shallow = scan.imports, scan.module, scan.cuts, scan.shallow
            item.statements = scan.statements
            item.spans = scan.spans()
            if blank:
                item.blanked = prepass.blank_bodies(item.text, blank)
                item.blank = blank
            loaded[path] = item
    else:
        for path in paths:
            item = load_file(path, settings)
            if isinstance(item, FileResult):
                done.append(item)
            else:
                loaded[path] = item
        graph = build_graph({p: f.text for p, f in loaded.items()})
    name_of = {m.path: m.name for m in graph.modules.values()}
    path_of = {m.name: m.path for m in graph.modules.values()}
    starts = set(loaded) if focus is None else _importers_closure(graph, name_of, path_of, focus)
    wanted: set[str] = set()
    for path, item in loaded.items():
        if item.relevant and path in starts:
            wanted.add(path)
            if path in name_of:
                wanted.update(path_of[n] for n in graph.imports_closure(name_of[path]))
    done += [FileResult(p, skipped=True) for p in loaded if p not in wanted]
    # connected parts (imports in either direction) among the wanted files
    parent = {p: p for p in wanted}

    def find(p: str) -> str:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    for path in wanted:
        for target in graph.edges.get(name_of.get(path, ""), ()):
            other = path_of.get(target)
            if other in parent:
                parent[find(path)] = find(other)
    groups: dict[str, list[LoadedFile]] = {}
    for path in sorted(wanted):
        groups.setdefault(find(path), []).append(loaded[path])
    return done, list(groups.values())


def _importers_closure(
    graph: ModuleGraph, name_of: dict[str, str], path_of: dict[str, str], focus: frozenset[str]
) -> set[str]:
    """The focus paths and the paths of every module that imports one of them, directly or not."""
    importers: dict[str, set[str]] = {}
    for source, targets in graph.edges.items():
        for target in targets:
            importers.setdefault(target, set()).add(source)
    seen = {name_of[p] for p in focus if p in name_of}
    todo = list(seen)
    while todo:
        for source in importers.get(todo.pop(), ()):
            if source not in seen:
                seen.add(source)
                todo.append(source)
    return set(focus) | {path_of[n] for n in seen if n in path_of}


# Objects (net of those freed) that may wait for the cycle collector between programs: about 200 MB.
_CYCLE_GARBAGE_BUDGET = 2_000_000
_defer_collection = False  # set by a process that ends with its run (the command line, and its workers)
_collection_deferred = False  # the collector is off only because garbage waits below the budget


def defer_cycle_collection() -> None:
    """For a process that exits when its run ends (the command line): a program's garbage may wait for
    the cycle collector (see `_without_cycle_collection`). Worker processes forked later inherit it."""
    global _defer_collection
    _defer_collection = True


@contextlib.contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Parsing and analysing allocate millions of objects that live until the end of a program and
    form few cycles; CPython's cycle collector would walk them again and again (a fifth of the run).
    It is off meanwhile, and catches up afterwards. A program's data is left in cycles (its scopes and
    functions refer to each other), and a collection after every program walks it all again (a
    twentieth of a run): in a process that exits with its run (`defer_cycle_collection`), the
    collector stays off until the objects waiting exceed `_CYCLE_GARBAGE_BUDGET`, so memory stays
    bounded and a worker that exits first never pays for it."""
    global _collection_deferred
    was_enabled = gc.isenabled() or _collection_deferred
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            _collection_deferred = _defer_collection and gc.get_count()[0] < _CYCLE_GARBAGE_BUDGET
            if not _collection_deferred:
                gc.enable()


def check_program(files: list[LoadedFile], settings: Settings, registry: Registry | None = None) -> list[FileResult]:
    """Analyse files as one program (see `plan_programs`)."""
    with _without_cycle_collection():
        return _check_program(files, settings, registry)


def check_program_recorded(
    files: list[LoadedFile], settings: Settings, registry: Registry | None = None, selective: object = None
) -> tuple[list[FileResult], dict | None]:
    """`check_program`, recording what each root depends on (incremental.py); with a `selective` plan
    (incremental.Selective), only the roots it names run again, and the whole program runs instead
    when the selective run cannot answer. Returns the results and the new record (None: none made)."""
    from spmdcheck import incremental
    from spmdcheck.analysis.roots import ElidedBody

    with _without_cycle_collection():
        bodies = {f.path: len(f.spans) for f in files if f.spans is not None}
        if selective is not None:
            recorder = Recorder(bodies, selective)
            why = "a writer"
            try:
                results = _check_program(files, settings, registry, recorder, selective.elided)  # type: ignore[attr-defined]
                old = selective.old  # type: ignore[attr-defined]
                # a root or a top level that wrote what it did not write before: what reads it is unknown
                new_writer = bool(set(recorder.writers) - set(old.writers))
                new_writer |= bool(set(recorder.top_writers) - set(old.top_writers))
                # a writer that wrote otherwise than before: the roots that read it did not run again
                new_writer |= incremental.writes_of(recorder.writes) != incremental.writes_of(old.writes)
                if not new_writer and not _failed(results):
                    plan: incremental.Selective = selective  # type: ignore[assignment]
                    tops = f"{recorder.parsed} of {len(files)}" if plan.top_only is not None else "all"
                    ran = f"{len(plan.run_only)} of {len(plan.known)} roots ran again"
                    _trace(f"selective: {ran}, top levels of {tops} files")
                    return results, _program_record(files, recorder)
            except ElidedBody:
                why = "it reached a body it left out"  # the whole program answers
            _trace(f"selective run abandoned ({why})")
        recorder = Recorder(bodies)
        _trace(f"whole program of {len(files)} files")
        results = _check_program(files, settings, registry, recorder)
        return results, None if _failed(results) else _program_record(files, recorder)


def _trace(message: str) -> None:
    """SPMDCHECK_TRACE=1: say on stderr how each program was answered (tests and benchmarks read it)."""
    if os.environ.get("SPMDCHECK_TRACE"):
        import sys

        print(f"spmdcheck-trace: {message}", file=sys.stderr)


def _failed(results: list[FileResult]) -> bool:
    return any(d.code == "SPMD000" for r in results for d in r.diagnostics)


def _program_record(files: list[LoadedFile], recorder: Recorder) -> dict | None:
    from spmdcheck import incremental

    if any(f.spans is None for f in files):
        return None
    return incremental.ProgramRecord(
        [f.path for f in files],
        _outlines(files),
        [list(f.spans or ()) for f in files],
        recorder.file_diags,
        recorder.roots,
        recorder.unmapped,
        recorder.top_writers,
        recorder.top_files,
        recorder.top_order,
        [_outline_key(f) for f in files],
        [incremental.import_key(f.imports) for f in files],
        recorder.writers,
        recorder.checked,
        [list(u) for u in recorder.top_units],
        recorder.writes,
    ).plain()


def _check_program(
    files: list[LoadedFile],
    settings: Settings,
    registry: Registry | None,
    recorder: Recorder | None = None,
    elided: Mapping[str, str] | None = None,
) -> list[FileResult]:
    paths = [f.path for f in files]
    planned = {f.path: f.blanked for f in files if f.blanked is not None}
    # a file a selective run left bodies out of is read in that form (made when it is parsed: incremental.LeftOut)
    blanked: Mapping[str, str] = collections.ChainMap(elided, planned) if elided else planned  # type: ignore[arg-type]
    graph = _program_graph(files) if all(f.imports is not None for f in files) else None
    libraries = frozenset(f.path for f in files if not f.relevant)
    shallow = frozenset(f.path for f in files if f.shallow)
    return _guarded(
        paths,
        lambda: check_sources(
            {f.path: f.text for f in files},
            settings,
            registry,
            blanked=blanked,
            graph=graph,
            libraries=libraries,
            shallow=shallow,
            recorder=recorder,
        ),
    )


def _program_graph(files: list[LoadedFile]) -> ModuleGraph:
    """What `build_graph` makes of the program's texts, from the imports the pre-pass found."""
    graph = ModuleGraph()
    modules = [module_name_for(f.path, os.path.exists) for f in files]
    for module in modules:
        graph.modules.setdefault(module.name, module)
    for module, f in zip(modules, files):
        if graph.modules.get(module.name) is module:
            graph.edges[module.name] = {n for n in f.imports or () if n in graph.modules and n != module.name}
    return graph


def scan_files(
    paths: list[str],
    settings: Settings,
    registry: Registry | None,
    mapper: Callable = map,
    seeds: frozenset[str] | None = None,
    for_cache: bool = True,
) -> list[prepass.FileScan | None]:
    """The pre-pass over `paths`, before the taint (None for a file that cannot be read); `seeds`
    (from the cache) spare loading the registry. `for_cache`: also what only the result cache reads (each
    file's comment cuts and module-level statements: `prepass.scan`); a run without the cache does without."""
    if not paths:
        return []
    if seeds is None:
        seeds = seed_words_for(settings, registry)
    return list(mapper(_scan_path, [(p, seeds, for_cache) for p in paths]))


def taint(scans: list[prepass.FileScan | None]) -> dict[str, tuple[bool, tuple[tuple[int, int], ...]]]:
    """`prepass.spread` over the scans of a run: each file's relevance and the spans to blank in it."""
    present = [s for s in scans if s is not None]
    prepass.spread(present)
    return {s.path: (s.relevant or s.whole, prepass.plan(s).blank) for s in present}


def _cached_prepass(
    files: list[str],
    settings: Settings,
    registry: Registry | None,
    mapper: Callable,
    store: object,
    hashes: dict[str, str],
) -> tuple[list[prepass.FileScan | None], dict[str, tuple[bool, tuple[tuple[int, int], ...]]]]:
    """The pre-pass with the result cache: a file scanned before (same content) is not read again,
    and when no file's scan changed (every scan hash as in the last run: an edit of comments only),
    the last run's taint is reused without reading the scans' units."""
    from spmdcheck import cache as caching

    assert isinstance(store, caching.ResultCache)
    before = {f: store.index.get(f) for f in files}  # the last scans (their units, for `_words_only`)
    summaries: dict[str, tuple[str, object]] = {}
    for f, h in hashes.items():
        entry = store.scan_summary(f, h)
        if entry is not None:
            summaries[f] = entry
    seeds_cache: list[frozenset[str]] = []

    def seeds() -> frozenset[str]:
        if not seeds_cache:
            if store.seeds is None:
                store.set_seeds(sorted(seed_words_for(settings, registry)))
            seeds_cache.append(frozenset(store.seeds or ()))
        return seeds_cache[0]

    def fresh_scans(paths: list[str]) -> dict[str, prepass.FileScan | None]:
        found = dict(zip(paths, scan_files(paths, settings, registry, mapper, seeds() if paths else None)))
        for f, scan in found.items():
            if scan is not None and f in hashes:
                small, units = prepass.scan_to_plain(scan)
                scan_hash = prepass.scan_hash(small, units)
                store.store_scan(f, hashes[f], scan_hash, small, units)
                summaries[f] = (scan_hash, small)
        return found

    fresh = fresh_scans([f for f in files if f not in summaries])
    scan_hashes = {f: summaries[f][0] for f in files if f in summaries}
    taint_key = caching.tree_key(scan_hashes)
    key, known = store.taint
    if key == taint_key:
        try:
            plans = {f: (bool(known[f][0]), tuple((int(a), int(b)) for a, b in known[f][1])) for f in scan_hashes}
            respanned = _respan(plans, known, fresh)
            scans = [
                fresh.get(f) or (prepass.scan_from_plain(f, summaries[f][1]) if f in summaries else None) for f in files
            ]
            if all(s is not None for f, s in zip(files, scans) if f in summaries):
                if respanned:
                    store.set_taint(key, respanned)
                return scans, plans
        except (KeyError, TypeError, ValueError, IndexError):
            pass
    reused = _words_only(store, files, fresh, before, summaries, seeds)
    if reused is not None:
        return reused
    scans = []
    missing: list[str] = []
    for f in files:
        scan = fresh.get(f)
        if scan is None and f in summaries:
            units = store.scan_units(f, hashes[f])
            scan = prepass.scan_from_plain(f, summaries[f][1], units) if units is not None else None
            if scan is None:
                missing.append(f)
        scans.append(scan)
    if missing:  # units lost or damaged: scan those files again
        again = fresh_scans(missing)
        scans = [again[f] if f in again else s for f, s in zip(files, scans)]
    plans = taint(scans)
    matters = {s.path: [i for i, u in enumerate(s.units) if u.matters] for s in scans if s is not None}
    new_key = caching.tree_key({f: summaries[f][0] for f in files if f in summaries})
    store.set_taint(
        new_key,
        {f: [relevant, [list(b) for b in blank], matters.get(f, [])] for f, (relevant, blank) in plans.items()},
    )
    vocabulary: set[str] = set()
    for scan in scans:
        for unit in scan.units if scan is not None else ():
            vocabulary.update(unit.binds, unit.attrs)
            if unit.method is not None:
                vocabulary.add(unit.method)
    store.set_vocabulary(new_key, sorted(vocabulary))
    return scans, plans


def _words_only(
    store: object,
    files: list[str],
    fresh: dict[str, prepass.FileScan | None],
    before: dict[str, object],
    summaries: dict[str, tuple[str, object]],
    seeds: Callable[[], frozenset[str]],
) -> tuple[list[prepass.FileScan | None], dict[str, tuple[bool, tuple[tuple[int, int], ...]]]] | None:
    """The last taint again, when the files scanned anew differ from their last scans only in identifiers
    that are no seed and that no unit anywhere binds, calls as a method or reads as `self.<attr>`: the
    taint meets words only there (prepass.spread), so no unit's taint can change. None otherwise."""
    from spmdcheck import cache as caching

    assert isinstance(store, caching.ResultCache)
    key, known = store.taint
    if not key or set(known) != {f for f in files if f in summaries}:
        return None
    changed = [f for f in files if f in fresh and fresh[f] is not None]
    if not changed or len(changed) > 8:
        return None
    vocabulary = store.vocabulary()
    if vocabulary is None:
        return None
    meaningful = vocabulary | seeds()
    for f in changed:
        entry = before.get(f)
        if not isinstance(entry, tuple) or f not in known:
            return None
        old_units = store.scan_units(f, entry[0])
        _, new_units = prepass.scan_to_plain(fresh[f])  # type: ignore[arg-type]
        if not isinstance(old_units, list) or len(old_units) != len(new_units):
            return None
        for old, new in zip(old_units, new_units):
            if not isinstance(old, list) or len(old) != len(new) or old[:1] + old[3:] != new[:1] + new[3:]:
                return None
            if not meaningful.isdisjoint(set(old[1]) ^ set(new[1])):
                return None
    try:
        plans = {f: (bool(known[f][0]), tuple((int(a), int(b)) for a, b in known[f][1])) for f in known}
        respanned = _respan(plans, known, fresh) or dict(known)
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    scans = [fresh.get(f) or (prepass.scan_from_plain(f, summaries[f][1]) if f in summaries else None) for f in files]
    if not all(s is not None for f, s in zip(files, scans) if f in summaries):
        return None
    new_key = caching.tree_key({f: summaries[f][0] for f in files if f in summaries})
    store.set_taint(new_key, respanned)
    store.set_vocabulary(new_key, sorted(vocabulary))
    return scans, plans


def _respan(
    plans: dict[str, tuple[bool, tuple[tuple[int, int], ...]]],
    known: dict[str, list],
    fresh: dict[str, prepass.FileScan | None],
) -> dict[str, list] | None:
    """The spans to blank in the files scanned anew (an edit that kept their taint may move their bodies),
    from the units that mattered, in `plans`; the taint to store for them (None: no file was scanned)."""
    stored = None
    for f, scan in fresh.items():
        if scan is not None and f in plans:
            blank = prepass.blank_spans(scan, map(int, known[f][2]))
            plans[f] = (plans[f][0], blank)
            stored = stored or dict(known)
            stored[f] = [plans[f][0], [list(b) for b in blank], known[f][2]]
    return stored


def seed_words_for(settings: Settings, registry: Registry | None = None) -> frozenset[str]:
    registry = registry if registry is not None else load_registry(settings.stub_path)
    return prepass.seed_words(registry, bool(settings.mesh))


def _scan_path(item: tuple[str, frozenset[str], bool]) -> prepass.FileScan | None:
    path, seeds, for_cache = item
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError:
        return None  # load_file reports it
    with _without_cycle_collection():
        return prepass.scan(path, data, seeds, for_cache=for_cache)


def _graph_of(scans: list[prepass.FileScan]) -> ModuleGraph:
    """The module graph from the pre-pass's imports (what `build_graph` computes, without parsing again)."""
    graph = ModuleGraph()
    files = [ModuleFile(s.module, s.path, os.path.basename(s.path) == "__init__.py") for s in scans]
    for module in files:
        graph.modules.setdefault(module.name, module)
    for module, scan in zip(files, scans):
        if graph.modules.get(module.name) is module:
            graph.edges[module.name] = {n for n in scan.imports if n in graph.modules and n != module.name}
    return graph


def check_files(paths: list[str], settings: Settings, registry: Registry | None = None) -> list[FileResult]:
    """Every file, whole-program, in one process."""
    done, programs = plan_programs(paths, settings)
    for files in programs:
        done += check_program(files, settings, registry)
    order = {p: i for i, p in enumerate(paths)}
    return sorted(done, key=lambda r: order.get(r.path, len(order)))


def run_check(
    files: list[str],
    settings: Settings,
    registry: Registry | None,
    jobs: int,
    result_cache: object = None,
    focus: frozenset[str] | None = None,
) -> list[FileResult]:
    """The command line's run: the pre-pass, then each program (a connected part of the import graph)
    on a pool of `jobs` processes; with a `cache.ResultCache`, unchanged programs are not analysed
    again and an unchanged tree is answered from the cache alone. With a `focus` (see
    `plan_programs`), only the programs that can reach a focus file are analysed."""
    from spmdcheck import cache as caching

    store: caching.ResultCache | None = result_cache  # type: ignore[assignment]
    hashes: dict[str, str] = {}
    if store is not None:
        for f in files:
            try:
                hashes[f] = caching.content_hash(pathlib.Path(f).read_bytes())
            except OSError:
                pass
        tree = caching.tree_key(hashes) + ("" if prepass.enabled() else "-whole")
        if focus is not None:  # a focused run leaves the other files unchecked: it answers only itself
            tree += "-focus-" + caching.tree_key(dict.fromkeys(focus, ""))
        if tree == store.tree and len(hashes) == len(files) and all(f in store.results for f in files):
            return [
                FileResult(f, caching.from_plain(f, store.results[f][1]), skipped=store.results[f][0]) for f in files
            ]
    jobs = max(1, min(jobs or (os.cpu_count() or 1), len(files)))
    with _LazyPool(jobs if len(files) >= 8 else 1, settings, registry) as pool:
        scans = plans = None
        if prepass.enabled() and store is not None:
            scans, plans = _cached_prepass(files, settings, registry, pool.map, store, hashes)
        done, programs = plan_programs(files, settings, registry, pool.map, scans, plans, focus)
        todo: list[list[LoadedFile]] = []
        keys: dict[int, str] = {}
        programs_seen: dict[str, dict] = {}
        exact_keys: dict[int, str] = {}
        for program in programs:
            if store is not None and all(f.path in hashes for f in program):
                # Keyed on what the analysis reads (edits of comments and inert bodies keep the key), else,
                # for a program whose results quote more than that (a syntax error), on the exact contents.
                analysed = caching.program_key(
                    (f.path, f.module, f.relevant, f.blank, _analysed_digest(f, hashes[f.path], store)
                     or hashes[f.path])
                    for f in program
                )
                exact = caching.program_key((f.path, f.module, f.relevant, f.blank, hashes[f.path]) for f in program)
                for key in (analysed, exact):
                    cached = store.programs.get(key)
                    if cached is not None and all(f.path in cached for f in program):
                        done += [FileResult(f.path, caching.from_plain(f.path, cached[f.path])) for f in program]
                        programs_seen[key] = cached
                        break
                else:
                    keys[id(program)], exact_keys[id(program)] = analysed, exact
                    for f in program:
                        f.content = hashes[f.path]
                    todo.append(program)
                continue
            todo.append(program)
        # Big programs first, so one large program does not end the run alone on one core.
        todo.sort(key=lambda p: -sum(len(f.blanked or f.text) for f in p))
        plans: dict[int, object] = {}
        shapes: dict[int, str] = {}
        if store is not None:
            for program in todo:
                if id(program) in keys:
                    shapes[id(program)], plans[id(program)] = _selective_plan(program, store, hashes)
        for program, results, record in pool.run_programs(todo, plans if store is not None else None):
            done += results
            if record is not None and id(program) in shapes:
                store.store_record(shapes[id(program)], record)
            key = keys.get(id(program))
            codes = {d.code for r in results for d in r.diagnostics}
            if key is not None and "SPMD000" not in codes:
                key = exact_keys[id(program)] if "SPMD001" in codes else key
                programs_seen[key] = {r.path: caching.to_plain(r.diagnostics) for r in results}
        if store is not None:
            store.prune_records(_shape(p) for p in programs)
    order = {p: i for i, p in enumerate(files)}
    done.sort(key=lambda r: order.get(r.path, len(order)))
    if store is not None:
        complete = len(hashes) == len(files) and not any(d.code == "SPMD000" for r in done for d in r.diagnostics)
        store.finish(
            tree if complete else "",
            {r.path: (r.skipped, caching.to_plain(r.diagnostics)) for r in done} if complete else {},
            programs_seen,
        )
    return done


def _shape(program: list[LoadedFile]) -> str:
    """What names a program across edits of its files' contents: its files, their modules and relevance."""
    from spmdcheck import cache as caching

    return caching.program_key((f.path, f.module, f.relevant, None, "") for f in program)


def _selective_plan(program: list[LoadedFile], store: object, hashes: dict[str, str]) -> tuple[str, object]:
    """The program's shape (its files) and, when its last record allows, the plan of a selective run."""
    from spmdcheck import cache as caching
    from spmdcheck import incremental

    assert isinstance(store, caching.ResultCache)
    shape = _shape(program)
    plain = store.record(shape)
    record = incremental.ProgramRecord.from_plain(plain) if plain is not None else None
    if record is None:
        return shape, None
    # a file unchanged since the record has its body spans there (they follow from its contents alone)
    recorded = {p: (key.split(":", 1)[0], spans) for p, key, spans in zip(record.paths, record.keys, record.spans)}
    for f in program:
        if f.spans is None and f.path in hashes:  # the taint was reused: the file's units were not read
            content, spans = recorded.get(f.path, ("", []))
            if content == hashes[f.path]:
                f.spans = tuple(tuple(span) for span in spans)  # type: ignore[misc]
                continue
            summary = store.scan_summary(f.path, hashes[f.path])
            units = store.scan_units(f.path, hashes[f.path]) if summary is not None else None
            scan = prepass.scan_from_plain(f.path, summary[1], units) if units is not None else None
            f.spans = scan.spans() if scan is not None else None
    if any(f.spans is None for f in program):
        return shape, None
    outlines = _outlines(program, record)
    planned = [f.blanked or f.text for f in program]
    index = {f.path: i for i, f in enumerate(program)}
    graph = _program_graph(program)
    by_name = {m.name: index[m.path] for m in graph.modules.values() if m.path in index}
    importers: dict[int, set[int]] = {}
    for name, targets in graph.edges.items():
        for target in targets:
            # importing a.b.c runs (and binds) the packages a and a.b too: their names reach the importer
            parts = target.split(".")
            for k in range(1, len(parts) + 1):
                package = ".".join(parts[:k])
                if name in by_name and package in by_name:
                    importers.setdefault(by_name[package], set()).add(by_name[name])
    spans = [list(f.spans or ()) for f in program]
    imports = [incremental.import_key(f.imports) for f in program]
    paths = [f.path for f in program]
    return shape, incremental.plan_selective(record, paths, outlines, planned, spans, importers, imports)


def _analysed_digest(f: LoadedFile, content: str = "", store: object = None) -> str | None:
    """`prepass.analysed_digest` of a planned file; None without the pre-pass's comment cuts. With a result
    cache and the file's content hash, the digest of the last run is reused when the same bodies were blank."""
    if f.cuts is None:
        return None
    key = f"{content}:{f.blank}" if content else ""
    known = getattr(store, "digests", {})
    if key and known.get(f.path, ("", ""))[0] == key:
        return known[f.path][1]
    digest = prepass.analysed_digest(f.text, f.blanked, f.cuts, f.blank)
    if key:
        store.note_digest(f.path, key, digest)  # type: ignore[union-attr]
    return digest


_WORKER_STATE: tuple[Settings, Registry | None] | None = None


def _run_task(
    task: tuple, settings: Settings, registry: Registry | None
) -> tuple[int, list[FileResult], dict | None]:
    """One program of a run: (index, files, recorded, selective plan) -> (index, results, record)."""
    index, files, recorded, selective = task
    if not recorded:
        return index, check_program(files, settings, registry), None
    results, record = check_program_recorded(files, settings, registry, selective)
    return index, results, record


def _check_program_in_worker(task: tuple) -> tuple[int, list[FileResult], dict | None]:
    """A program's results with its index: the program itself (all its texts) is not sent back."""
    settings, registry = _WORKER_STATE  # type: ignore[misc]
    return _run_task(task, settings, registry)


def _program_failed(task: tuple, why: str) -> tuple[int, list[FileResult], None]:
    """A program whose worker crashed or overran: SPMD000 on each of its files, and the run goes on."""
    failed = [FileResult(f.path, [make(f.path, "SPMD000", f"{why}; the file was not checked")]) for f in task[1]]
    return task[0], failed, None


# Seconds one analysis may take (generous: a guard against hangs, not a performance target). The
# interpreter stops itself at this budget (`analysis.budget`), in a worker or in a serial run alike.
_ANALYSIS_BUDGET_S = 120.0
_ANALYSIS_BUDGET_PER_FILE_S = 5.0
# A worker is killed only this much later: what it overruns then is not the interpreter (a native parser)
_KILL_GRACE_S = 30.0


def _program_budget(task: tuple) -> float:
    """Seconds a worker may spend on one program before its parent kills it."""
    return _ANALYSIS_BUDGET_S + _ANALYSIS_BUDGET_PER_FILE_S * len(task[1]) + _KILL_GRACE_S


def _import_analysis() -> None:
    """libcst and the analysis, imported once in the parent before the program workers fork (not again in
    every worker); while the pre-pass's workers scan, the parent has nothing else to do."""
    from spmdcheck import workers  # noqa: F401
    from spmdcheck.analysis import program  # noqa: F401


class _LazyPool:
    """Forked workers started on first need (an all-cached run never starts them), with the registry
    loaded once in the parent before the fork."""

    def __init__(self, jobs: int, settings: Settings, registry: Registry | None) -> None:
        self.jobs, self.settings, self._registry = jobs, settings, registry
        self.pool = None

    def __enter__(self) -> _LazyPool:
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
        pending = self.pool.map_async(fn, items, 4)  # type: ignore[union-attr]
        _import_analysis()  # while the workers scan: the program workers fork with it (see `run_programs`)
        return pending.get()

    def run_programs(self, programs: list[list[LoadedFile]], plans: dict[int, object] | None = None):  # noqa: ANN201
        """(program, results, record) for each program; `plans` (with a cache): record each program's run,
        selectively where a plan is given (see `check_program_recorded`)."""
        if not programs:
            return
        recorded = plans is not None
        plans = plans or {}
        if len(programs) < 2 or self.jobs <= 1:
            for program in programs:
                _, results, record = _run_task(
                    (0, program, recorded, plans.get(id(program))), self.settings, self.registry
                )
                yield program, results, record
            return
        _import_analysis()
        from spmdcheck.workers import run_isolated

        global _WORKER_STATE
        _WORKER_STATE = (self.settings, self.registry)
        # Big programs first; a worker that crashes or hangs costs its program (SPMD000), never the run.
        programs = sorted(programs, key=lambda p: -sum(len(f.text) for f in p))
        tasks = [(i, p, recorded, plans.get(id(p))) for i, p in enumerate(programs)]
        done = run_isolated(tasks, _check_program_in_worker, _program_failed, self.jobs, _program_budget)
        for index, results, record in done:
            yield programs[index], results, record

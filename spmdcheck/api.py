"""The checker as a library: check a source string or a file with given settings."""

from __future__ import annotations

import functools
import hashlib
import os
import pathlib
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from spmdcheck.analysis.context import BindObserver, Options
from spmdcheck.analysis.program import SourceUnit, analyze_program
from spmdcheck.diagnostics.codes import CODES
from spmdcheck.diagnostics.render import Diagnostic, ProgramPositions, make
from spmdcheck.diagnostics.suppression import apply_suppressions
from spmdcheck.frontend.guard import MAX_EXPRESSION_DEPTH, call_with_deep_stack
from spmdcheck.frontend.inline_config import read_inline_config
from spmdcheck.frontend.lines import physical_lines
from spmdcheck.frontend.source import (
    ParseFailure,
    decode_source,
    is_relevant,
    mesh_names_in,
    parse,
    parse_screened,
    read_source_bytes,
    syntax_error,
)
from spmdcheck.program.graph import build_graph, module_name_for
from spmdcheck.rules.cache import CacheError, dump_registry, load_cached_registry
from spmdcheck.rules.stubs import Registry, load_stub_dirs

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


@functools.lru_cache(maxsize=8)
def load_registry(stub_path: tuple[str, ...] = ()) -> Registry:
    """Shipped stubs, then the user's stub directories; cached on disk by the files' stamps."""
    from spmdcheck import __version__

    dirs = [shipped_stubs(), *(pathlib.Path(p) for p in stub_path)]
    stamp = hashlib.sha256(__version__.encode())
    for d in dirs:
        stamp.update(str(d).encode())
        if d.is_dir():
            for p in sorted(d.rglob("*.pyi")):
                st = p.stat()
                stamp.update(f"{p}:{st.st_mtime_ns}:{st.st_size}".encode())
    # plain JSON with a format number and a hash (rules.cache): the folder is user-writable, never unpickle
    cache = _cache_dir() / f"registry-{stamp.hexdigest()[:24]}.json"
    registry = load_cached_registry(cache, stamp.hexdigest())
    if registry is not None:
        return registry
    registry = load_stub_dirs(dirs)
    try:
        dump_registry(registry, cache, stamp.hexdigest())
    except (OSError, CacheError):
        pass  # a read-only home: just no cache
    return registry


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
    libraries: frozenset[str] = frozenset(),
    on_bind: BindObserver | None = None,
) -> dict[str, list[Diagnostic]]:
    """Check files as one program: `sources` maps each path to its text; module names come from the
    paths' package folders (a folder is a package when `<folder>/__init__.py` is one of the keys or
    exists on disk). Returns each path's diagnostics, sorted.

    `libraries` are paths the others import that cannot hold a finding by themselves: parsed only
    when an import of them runs, and followed only where typed values flow into them. `on_bind`
    observes every name binding (--show-types, editor hovers).

    Runs on a thread with a deep stack (`frontend.guard`): deep but valid syntax trees are analysed.
    """
    return call_with_deep_stack(lambda: _check_sources(sources, settings, registry, exists, libraries, on_bind))


def _check_sources(
    sources: dict[str, str],
    settings: Settings | None,
    registry: Registry | None,
    exists: Callable[[str], bool] | None,
    libraries: frozenset[str],
    on_bind: BindObserver | None,
) -> dict[str, list[Diagnostic]]:
    settings = settings or Settings()
    registry = registry if registry is not None else load_registry(settings.stub_path)
    if exists is None:
        exists = lambda p: p in sources or os.path.exists(p)  # noqa: E731
    out: dict[str, list[Diagnostic]] = {path: [] for path in sources}
    units: list[SourceUnit] = []
    lines: dict[str, list[str]] = {}
    strict_of: dict[str, bool] = {}
    for path, text in sources.items():
        if path in libraries:
            units.append(SourceUnit(path, None, Options(mesh=settings.mesh), module_name_for(path, exists), text=text))
            continue
        parsed, deep = parse_screened(text)
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
        inline = read_inline_config(text)
        options = Options(
            mesh=inline.mesh if inline.mesh is not None else settings.mesh,
            strict=inline.strict if inline.strict is not None else settings.strict,
        )
        out[path] += [make(path, "SPMD005", message, line) for line, message in inline.errors]
        units.append(SourceUnit(path, parsed, options, module_name_for(path, exists), frozenset(mesh_names_in(text))))
        strict_of[path] = options.strict
        lines[path] = physical_lines(text)
    graph = build_graph(sources, exists) if len(sources) > 1 else None

    def parse_library(text: str) -> cst.Module | None:
        parsed = parse(text)
        return None if isinstance(parsed, ParseFailure) else parsed

    result = analyze_program(units, registry, graph, parse_library, on_bind)
    positions = ProgramPositions()
    for unit in units:
        if unit.module is not None:
            unit_lines = lines.get(unit.path) or physical_lines(unit.text or "")
            positions.add(result.contexts[unit.path], unit.path, unit.module, unit_lines)
    for path, diags in positions.render(result.program.findings, result.program.sites).items():
        out[path] += diags
    for path in out:

        def enabled(code: str, strict: bool = strict_of.get(path, settings.strict)) -> bool:
            info = CODES[code]
            return _selected(code, settings) and (strict or not info.strict_only) and _previewed(code, settings)

        out[path] = apply_suppressions(path, sources[path], out[path], enabled)
        text_lines = lines.get(path) or physical_lines(sources[path])
        for d in out[path]:  # the code frames, from the text as decoded (never read again)
            d.attach_frame(text_lines)
    return {
        path: sorted(
            (d for d in diags if _selected(d.code, settings) and _previewed(d.code, settings)), key=Diagnostic.sort_key
        )
        for path, diags in out.items()
    }


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


def load_file(path: str, settings: Settings) -> LoadedFile | FileResult:
    """Read and decode a file; a FileResult when there is nothing to analyse (or it cannot be read)."""
    try:
        data = read_source_bytes(path)
    except OSError as exc:
        return FileResult(path, [make(path, "SPMD005", f"cannot read file: {exc.strerror}")])
    # a file naming an spmdcheck code (in a suppression comment) is checked, so an unused one is reported
    relevant = is_relevant(data, bool(settings.mesh)) or b"SPMD" in data
    if not relevant:
        failure = syntax_error(data)
        if failure is None:
            text = decode_source(data)
            return FileResult(path, skipped=True) if isinstance(text, ParseFailure) else LoadedFile(path, text, False)
        return FileResult(
            path,
            [
                make(
                    path,
                    "SPMD001",
                    f"syntax error: {failure.message}; the file was not checked",
                    failure.line,
                    failure.column,
                )
            ],
        )
    text = decode_source(data)
    if isinstance(text, ParseFailure):
        return FileResult(path, [make(path, "SPMD001", text.message, text.line, text.column)])
    return LoadedFile(path, text, relevant=True)


def _guarded(paths: list[str], run: Callable[[], dict[str, list[Diagnostic]]]) -> list[FileResult]:
    """Run an analysis; a bug of the checker becomes a diagnostic on the files it concerned, and the run goes on."""
    try:
        found = run()
        return [FileResult(path, found.get(path, [])) for path in paths]
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


def plan_programs(paths: list[str], settings: Settings) -> tuple[list[FileResult], list[list[LoadedFile]]]:
    """Read the files and group them into programs: the relevant files and the checked files they import,
    split into the connected parts of the import graph (each part is analysed as one program)."""
    done: list[FileResult] = []
    loaded: dict[str, LoadedFile] = {}
    for path in paths:
        item = load_file(path, settings)
        if isinstance(item, FileResult):
            done.append(item)
        else:
            loaded[path] = item
    graph = build_graph({p: f.text for p, f in loaded.items()})
    name_of = {m.path: m.name for m in graph.modules.values()}
    path_of = {m.name: m.path for m in graph.modules.values()}
    wanted: set[str] = set()
    for path, item in loaded.items():
        if item.relevant:
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


def check_program(files: list[LoadedFile], settings: Settings, registry: Registry | None = None) -> list[FileResult]:
    """Analyse files as one program (see `plan_programs`)."""
    paths = [f.path for f in files]
    libraries = frozenset(f.path for f in files if not f.relevant)
    return _guarded(
        paths, lambda: check_sources({f.path: f.text for f in files}, settings, registry, libraries=libraries)
    )


def check_files(paths: list[str], settings: Settings, registry: Registry | None = None) -> list[FileResult]:
    """Every file, whole-program, in one process."""
    done, programs = plan_programs(paths, settings)
    for files in programs:
        done += check_program(files, settings, registry)
    order = {p: i for i, p in enumerate(paths)}
    return sorted(done, key=lambda r: order.get(r.path, len(order)))

"""Planning a run: read the files, run the pre-pass, group the relevant files into programs."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from spmdcheck.analysis import budget
from spmdcheck.diagnostics.render import diagnostic_of
from spmdcheck.diagnostics.violations.inputs import ConfigError, SyntaxErrorFound
from spmdcheck.engine.collection import without_cycle_collection
from spmdcheck.frontend.source import ParseFailure
from spmdcheck.frontend.source_file import SourceFile
from spmdcheck.program import prepass
from spmdcheck.program.graph import ModuleFile, ModuleGraph, build_graph, module_name_for
from spmdcheck.rules.registry import load_registry
from spmdcheck.settings import FileResult, Settings

if TYPE_CHECKING:
    from spmdcheck.engine.incremental import Outline
    from spmdcheck.rules.stubs import Registry


class FilePlan(NamedTuple):
    """What the pre-pass's taint decided for a file."""

    relevant: bool  # it can hold a finding by itself (else it is analysed only as an import of one)
    blank: tuple[tuple[int, int], ...]  # the line spans of the bodies to empty before libcst parses it


@dataclass
class LoadedFile:
    """A file of a run, as planning leaves it: its source (read once) and what the pre-pass found."""

    path: str
    source: SourceFile
    relevant: bool  # can hold a finding by itself (types, collectives, ranks); else only as an import
    imports: frozenset[str] | None = None  # module names its imports may refer to (the pre-pass)
    module: str = ""  # its module name (the pre-pass)
    blank: tuple[tuple[int, int], ...] = ()  # the line spans emptied in `blanked`
    cuts: tuple[tuple[int, int], ...] | None = None  # comments no analysis reads (prepass.comment_cuts)
    shallow: bool = False  # no expression too deep for libcst (guard.shallow): parsed without the screen
    spans: tuple[tuple[int, int], ...] | None = None  # every function body's lines (the pre-pass), if known
    statements: tuple | None = None  # its module-level statements (prepass.statements), if known
    content: str = ""  # its content hash, in a cached run
    outline: Outline | None = None  # made once (engine.record.file_outlines)
    _blanked: str | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        return self.source.text

    @property
    def blanked(self) -> str | None:
        """The text with the `blank` bodies emptied, to parse; None when none is. Made on first read: a warm run
        answered from the cache reads it only for the files that changed (their digest), not for every file."""
        if self._blanked is None and self.blank:
            self._blanked = prepass.blank_bodies(self.text, self.blank)
        return self._blanked

    def planned_text(self) -> str:
        """The text the analysis parses: `blanked`, or the text when no body is emptied."""
        return self.blanked or self.text


class BlankedTexts(Mapping[str, str]):
    """path -> `LoadedFile.blanked` of the files with bodies emptied, each made when first read (a selective
    run parses few of them)."""

    def __init__(self, files: Iterable[LoadedFile]) -> None:
        self._files = {f.path: f for f in files if f.blank}

    def __getitem__(self, path: str) -> str:
        return self._files[path].planned_text()

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def load_file(path: str, settings: Settings) -> LoadedFile | FileResult:
    """Read and decode a file; a FileResult when there is nothing to analyse (or it cannot be read)."""
    try:
        source = SourceFile.read(path)
    except OSError as exc:
        return FileResult(path, [diagnostic_of(path, ConfigError("unreadable", exc.strerror))])
    if isinstance(source, ParseFailure):
        return FileResult(
            path, [diagnostic_of(path, SyntaxErrorFound("undecodable", source.message), source.line, source.column)]
        )
    return LoadedFile(path, source, relevant=True)


def plan_programs(
    paths: list[str],
    settings: Settings,
    registry: Registry | None = None,
    mapper: Callable = map,
    scans: list[prepass.FileScan | None] | None = None,
    plans: dict[str, FilePlan] | None = None,
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
    too_large: set[str] = set()
    if prepass.enabled():
        if scans is None:
            scans = scan_files(paths, settings, registry, mapper, for_cache=False)  # no cache: see `scan_files`
        if plans is None:
            plans = taint(scans)
        for path, scan in zip(paths, scans):
            item = load_file(path, settings)
            if isinstance(item, FileResult) or scan is None:
                done.append(item if isinstance(item, FileResult) else FileResult(path, skipped=True))
                continue
            item.relevant, blank = plans[path].relevant, plans[path].blank
            item.imports, item.module, item.cuts, item.shallow = scan.imports, scan.module, scan.cuts, scan.shallow
            item.statements = scan.statements
            item.spans = scan.spans()
            item.blank = blank
            # emptying a body can lengthen its first line by at most len("pass") - 1: the parse budget is only
            # measured on a text that could exceed it
            parsed_chars = len(item.text)
            if parsed_chars + 3 * len(blank) > budget.MAX_PARSED_CHARS:
                parsed_chars = len(item.blanked or item.text)
            if parsed_chars > budget.MAX_PARSED_CHARS and scan.shallow:
                # over the size budget (CPython read it: a syntax error is still reported by the analysis):
                # unknown, as a module outside the program; no file imports it in the analysis
                done.append(FileResult(path, notes=[budget.too_large_note(parsed_chars)]))
                too_large.add(path)
                continue
            loaded[path] = item
        graph = graph_of_scans([s for s in scans if s is not None and s.path not in too_large])
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


def program_graph(files: list[LoadedFile]) -> ModuleGraph:
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
    seeds: prepass.SeedWords | None = None,
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


def taint(scans: list[prepass.FileScan | None]) -> dict[str, FilePlan]:
    """`prepass.spread` over the scans of a run: each file's relevance and the spans to blank in it."""
    present = [s for s in scans if s is not None]
    prepass.spread(present)
    return {s.path: FilePlan(s.relevant or s.whole, prepass.plan(s).blank) for s in present}


def seed_words_for(settings: Settings, registry: Registry | None = None) -> prepass.SeedWords:
    registry = registry if registry is not None else load_registry(settings.stub_path)
    return prepass.SeedWords(prepass.seed_words(registry, bool(settings.mesh)), prepass.layout_words(registry))


def _scan_path(item: tuple[str, prepass.SeedWords, bool]) -> prepass.FileScan | None:
    path, seeds, for_cache = item
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError:
        return None  # load_file reports it
    with without_cycle_collection():
        return prepass.scan(path, data, seeds.types, for_cache=for_cache, layout=seeds.layouts)


def graph_of_scans(scans: list[prepass.FileScan]) -> ModuleGraph:
    """The module graph from the pre-pass's imports (what `build_graph` computes, without parsing again)."""
    graph = ModuleGraph()
    files = [ModuleFile(s.module, s.path, os.path.basename(s.path) == "__init__.py") for s in scans]
    for module in files:
        graph.modules.setdefault(module.name, module)
    for module, scan in zip(files, scans):
        if graph.modules.get(module.name) is module:
            graph.edges[module.name] = {n for n in scan.imports if n in graph.modules and n != module.name}
    return graph

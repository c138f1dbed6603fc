"""One program's analysis from its texts: parse each file, analyse them together, render, suppress, sort."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from spmdcheck.diagnostics.codes import CODES
from spmdcheck.diagnostics.render import Diagnostic, ProgramPositions, diagnostic_of
from spmdcheck.diagnostics.suppression import apply_suppressions
from spmdcheck.diagnostics.violations.inputs import ConfigError, SyntaxErrorFound
from spmdcheck.engine.record import Recorder, fill_recorder, merge_selective, start_log
from spmdcheck.frontend.guard import MAX_EXPRESSION_DEPTH, call_with_deep_stack
from spmdcheck.frontend.source import parse, parse_screened
from spmdcheck.frontend.source_file import SourceFile
from spmdcheck.program.graph import ModuleFile, ModuleGraph, build_graph, module_name_for
from spmdcheck.rules.registry import load_registry
from spmdcheck.settings import Settings, previewed, selected

if TYPE_CHECKING:  # libcst and the analysis load when a file is analysed: a cached run never needs them
    import libcst as cst

    from spmdcheck.analysis.context import BindObserver, Options
    from spmdcheck.analysis.program import SourceUnit
    from spmdcheck.rules.stubs import Registry


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
    sources: Mapping[str, str | SourceFile],
    settings: Settings | None = None,
    registry: Registry | None = None,
    exists: Callable[[str], bool] | None = None,
    blanked: Mapping[str, str] | None = None,
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


def _file_options(source: SourceFile, settings: Settings) -> tuple[Options, list[tuple[int, str]]]:
    """A file's analysis options (its header comments over the settings) and the header's errors."""
    from spmdcheck.analysis.context import Options

    inline = source.header
    options = Options(
        mesh=inline.mesh if inline.mesh is not None else settings.mesh,
        strict=inline.strict if inline.strict is not None else settings.strict,
    )
    return options, list(inline.errors)


def source_files(sources: Mapping[str, str | SourceFile]) -> dict[str, SourceFile]:
    """Each path's SourceFile: the one planning made, or one made here from a text."""
    return {path: s if isinstance(s, SourceFile) else SourceFile(path, s) for path, s in sources.items()}


def _check_sources(
    sources: Mapping[str, str | SourceFile],
    settings: Settings | None,
    registry: Registry | None,
    exists: Callable[[str], bool] | None,
    blanked: Mapping[str, str] | None,
    graph: ModuleGraph | None,
    libraries: frozenset[str],
    on_bind: BindObserver | None,
    shallow: frozenset[str] = frozenset(),
    recorder: Recorder | None = None,
) -> dict[str, list[Diagnostic]]:
    from spmdcheck.analysis.program import analyze_program

    settings = settings or Settings()
    registry = registry if registry is not None else load_registry(settings.stub_path)
    files = source_files(sources)
    if exists is None:
        exists = lambda p: p in files or os.path.exists(p)  # noqa: E731
    reader = _UnitReader(files, settings, exists, blanked or {}, libraries, shallow, recorder)
    units = reader.read()
    out = reader.out
    if len(files) <= 1:
        graph = None
    elif graph is None:
        graph = build_graph({path: f.text for path, f in files.items()}, exists)
    log = start_log(recorder, out) if recorder is not None else None
    result = analyze_program(units, registry, graph, reader.parse_library, on_bind, log)

    def wanted(code: str) -> bool:
        """A finding of a code the settings leave out is never shown: its file's positions are not worth
        resolving (a whole-module pass of libcst's, for the one preview finding of a big file)."""
        return selected(code, settings) and previewed(code, settings)

    positions = ProgramPositions()
    for unit in units:
        if unit.module is not None:
            positions.add(result.contexts[unit.path], unit.path, unit.module)
    if log is not None and recorder is not None:
        fill_recorder(recorder, log, positions, result.program.sites, units, wanted)
    if recorder is not None and recorder.selective is not None:
        merge_selective(recorder, out)
    else:
        findings = [f for f in result.program.findings if wanted(f.code)]
        for path, diags in positions.render(findings, result.program.sites).items():
            out[path] += diags
    return _shown(out, files, settings, reader.strict_of)


class _UnitReader:
    """The program's files as the analysis takes them (SourceUnits), and the diagnostics made before it
    (syntax, expressions too deep, header settings), per path in `out`."""

    def __init__(
        self,
        files: dict[str, SourceFile],
        settings: Settings,
        exists: Callable[[str], bool],
        blanked: Mapping[str, str],
        libraries: frozenset[str],
        shallow: frozenset[str],
        recorder: Recorder | None,
    ) -> None:
        self.files, self.settings, self.exists, self.blanked = files, settings, exists, blanked
        self.libraries, self.shallow, self.recorder = libraries, shallow, recorder
        selective = recorder.selective if recorder is not None else None
        self.part = selective.top_only if selective is not None else None  # the files a selective run needs
        self.out: dict[str, list[Diagnostic]] = {path: [] for path in files}
        self.strict_of: dict[str, bool] = {}
        self.shallow_libraries: set[int] = set()  # ids of library texts parsed without the screen

    def read(self) -> list[SourceUnit]:
        from spmdcheck.analysis.context import Options
        from spmdcheck.analysis.program import SourceUnit

        units: list[SourceUnit] = []
        for index, (path, source) in enumerate(self.files.items()):
            left_out = self.part is not None and index not in self.part
            if path in self.libraries:
                unit = SourceUnit(
                    path, None, Options(mesh=self.settings.mesh), self._module(path), text=self._text_to_parse(path)
                )
            elif left_out:
                # deferred in a selective run: parsed and run when a name of it is read; its diagnostics before
                # the analysis (syntax, settings) are the recorded ones
                options, _ = _file_options(source, self.settings)
                unit = SourceUnit(path, None, options, self._module(path), source.mesh_names)
                unit.text, unit.deferred = self._text_to_parse(path), True
                self.strict_of[path] = options.strict
            else:
                parsed_unit = self._parsed(path, source)
                if parsed_unit is None:
                    continue
                unit = parsed_unit
            if self.recorder is not None:
                unit.bodies = self.recorder.bodies.get(path)
            units.append(unit)
        return units

    def _module(self, path: str) -> ModuleFile:
        return module_name_for(path, self.exists)

    def _parsed(self, path: str, source: SourceFile) -> SourceUnit | None:
        """A checked file, parsed now; None (and its diagnostic) when it does not parse."""
        from spmdcheck.analysis.program import SourceUnit
        from spmdcheck.analysis.roots import ElidedBody
        from spmdcheck.frontend.source import ParseFailure

        text = source.text
        source_text = self.blanked.get(path, text)
        parsed, deep = parse_screened(source_text, path in self.shallow)
        if isinstance(parsed, ParseFailure) and source_text is not text:
            parsed, deep = parse_screened(text, path in self.shallow)  # never report a syntax error the blanking made
        out = self.out[path]
        out += [
            diagnostic_of(
                path,
                SyntaxErrorFound("deep-expression", depth=d.depth, limit=MAX_EXPRESSION_DEPTH),
                d.line,
                d.column,
            )
            for d in deep
        ]
        if isinstance(parsed, ParseFailure):
            if self.part is not None:
                raise ElidedBody  # file indices would no longer match the record's: the whole program answers
            out.append(diagnostic_of(path, SyntaxErrorFound("syntax", parsed.message), parsed.line, parsed.column))
            return None
        options, errors = _file_options(source, self.settings)
        out += [diagnostic_of(path, ConfigError("setting", message), line) for line, message in errors]
        self.strict_of[path] = options.strict
        return SourceUnit(path, parsed, options, self._module(path), source.mesh_names)

    def _text_to_parse(self, path: str) -> Callable[[], str]:
        """A file parsed only when an import of it runs: its text, made then (a selective run's is elided)."""

        def made() -> str:
            text = self.blanked[path] if path in self.blanked else self.files[path].text
            if path in self.shallow:
                self.shallow_libraries.add(id(text))
            return text

        return made

    def parse_library(self, text: str) -> cst.Module | None:
        from spmdcheck.frontend.source import ParseFailure

        parsed = parse(text, id(text) in self.shallow_libraries)
        return None if isinstance(parsed, ParseFailure) else parsed


def _shown(
    out: dict[str, list[Diagnostic]], files: dict[str, SourceFile], settings: Settings, strict_of: dict[str, bool]
) -> dict[str, list[Diagnostic]]:
    """Each file's diagnostics as shown: suppressions applied, the settings' codes only, with code frames, sorted."""
    for path in out:

        def enabled(code: str, strict: bool = strict_of.get(path, settings.strict)) -> bool:
            info = CODES[code]
            return selected(code, settings) and (strict or not info.strict_only) and previewed(code, settings)

        out[path] = apply_suppressions(path, files[path].text, out[path], enabled)
        if out[path]:  # the code frames, from the text as decoded (never read again)
            text_lines = files[path].lines
            for d in out[path]:
                d.attach_frame(text_lines)
    return {
        path: sorted(
            (d for d in diags if selected(d.code, settings) and previewed(d.code, settings)), key=Diagnostic.sort_key
        )
        for path, diags in out.items()
    }

"""What the language server computes for one open document, without any LSP library.

Positions: the checker's are 1-based lines and code-point columns; LSP's are
0-based lines and UTF-16 code-unit characters. The conversions live here.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import pathlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from spmdcheck.diagnostics.render import Diagnostic, SuggestionOut, diagnostic_of
from spmdcheck.diagnostics.violations.inputs import InternalError
from spmdcheck.engine.buffers import DiskTexts, check_in_program
from spmdcheck.engine.typeinfo import Binding, BindingCollector, TypedFile, infer_source
from spmdcheck.fixes.apply import fix_text
from spmdcheck.frontend.guard import quiet_ast_parse
from spmdcheck.rules.registry import load_registry
from spmdcheck.settings import Settings

IMPORT_LINE = "import spmd_types"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def utf16_column(line: str, column0: int) -> int:
    """Code-point offset -> UTF-16 code units (what LSP counts by default)."""
    return len(line[:column0].encode("utf-16-le")) // 2


def codepoint_column(line: str, utf16: int) -> int:
    units = 0
    for i, ch in enumerate(line):
        if units >= utf16:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


@dataclass(frozen=True)
class Span:
    """0-based, UTF-16 columns: an LSP range."""

    start_line: int
    start_char: int
    end_line: int
    end_char: int


@dataclass(frozen=True)
class Edit:
    span: Span
    new_text: str


@dataclass(frozen=True)
class QuickFix:
    title: str
    diagnostic: Diagnostic
    edits: tuple[Edit, ...]


@dataclass
class Analysis:
    text: str
    result: TypedFile
    lines: list[str] = field(default_factory=list)
    program: frozenset[str] = frozenset()  # the paths analysed with it (its program): a change there re-checks it

    def __post_init__(self) -> None:
        self.lines = self.text.splitlines()

    def span(self, line: int, column: int, end_line: int, end_column: int) -> Span:
        """Checker position (1-based) -> LSP range."""

        def at(ln: int, col: int) -> tuple[int, int]:
            text = self.lines[ln - 1] if 0 < ln <= len(self.lines) else ""
            return ln - 1, utf16_column(text, max(col - 1, 0))

        start, end = at(line, column), at(end_line, end_column)
        return Span(*start, *end)

    def diagnostic_span(self, d: Diagnostic) -> Span:
        return self.span(d.line, d.column, d.end_line, d.end_column)

    def quick_fixes(self, within: Span) -> list[QuickFix]:
        """The checker's suggestions for the diagnostics touching `within`, each as the edits it makes."""
        out = []
        for d in self.result.diagnostics:
            if not _overlaps(self.diagnostic_span(d), within):
                continue
            for s in d.suggestions:
                if s.span is None:
                    continue
                edits = self._edits_for(d, s)
                if edits:
                    out.append(QuickFix(s.message, d, edits))
        return out

    def _edits_for(self, d: Diagnostic, s: SuggestionOut) -> tuple[Edit, ...]:
        single = replace(d, suggestions=[s])
        fixed, count = fix_text(self.text, [single], IMPORT_LINE)
        if not count or fixed == self.text:
            return ()
        return tuple(_line_edits(self.text, fixed))

    def hover(self, line0: int, char0: int) -> str | None:
        """Markdown for the name under the cursor: its forward and gradient types."""
        if not 0 <= line0 < len(self.lines):
            return None
        text = self.lines[line0]
        col = codepoint_column(text, char0)
        word = _word_at(text, col)
        if word is None:
            return None
        name, start = word
        line1, col1 = line0 + 1, start + 1
        binding = _binding_at(self.result.bindings, name, line1, col1)
        where = ""
        if binding is None:
            binding = _reaching_binding(self.result.bindings, self.text, name, line1, col1)
            if binding is None:
                return None
            where = f" (as bound at line {binding.line})"
        view = binding.view
        return (
            f"**`{binding.name}`**{where}\n\n"
            f"SPMD type: `{view.forward}`\n\n"
            f"gradient: `{view.gradient}`\n\n"
            f"requires grad: {view.requires_grad}"
        )


def _overlaps(a: Span, b: Span) -> bool:
    return (a.start_line, a.start_char) <= (b.end_line, b.end_char) and (b.start_line, b.start_char) <= (
        a.end_line,
        a.end_char,
    )


def _line_edits(old: str, new: str) -> list[Edit]:
    """Whole-line edits turning `old` into `new` (line-granular, so no UTF-16 arithmetic is needed)."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        edits.append(Edit(Span(i1, 0, i2, 0), "".join(b[j1:j2])))
    return edits


def _word_at(text: str, col: int) -> tuple[str, int] | None:
    """The dotted name under code-point column `col` (0-based) and its start; `self.w` on `w` is `self.w`."""
    for m in _IDENTIFIER.finditer(text):
        if m.start() <= col <= m.end():
            return m.group(0), m.start()
    return None


def _binding_at(bindings: list[Binding], name: str, line: int, col: int) -> Binding | None:
    for b in bindings:
        if b.name == name and b.line == line and b.column == col:
            return b
    return None


def _function_ranges(source: str) -> list[tuple[int, int]]:
    try:
        tree = quiet_ast_parse(source)
    except (SyntaxError, ValueError):
        return []
    return [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _innermost(ranges: list[tuple[int, int]], line: int) -> tuple[int, int] | None:
    containing = [r for r in ranges if r[0] <= line <= r[1]]
    return min(containing, key=lambda r: r[1] - r[0]) if containing else None


def _reaching_binding(bindings: list[Binding], source: str, name: str, line: int, col: int) -> Binding | None:
    """At a use of `name`: its last binding before the use in the same function (module level: outside any)."""
    ranges = _function_ranges(source)
    scope = _innermost(ranges, line)
    best = None
    for b in bindings:
        if b.name != name or (b.line, b.column) >= (line, col) or _innermost(ranges, b.line) != scope:
            continue
        if best is None or (b.line, b.column) > (best.line, best.column):
            best = b
    return best


def _check_arguments(path: str) -> argparse.Namespace:
    """What `spmdcheck check PATH` is given: an editor checks a file as that command does."""
    from spmdcheck.cli.parser import build_parser

    return build_parser().parse_args(["check", path])


def settings_for(path: str | None) -> Settings:
    """The settings `spmdcheck check PATH` would use: the closest config file, defaults when it is broken."""
    from spmdcheck.cli.project import file_settings
    from spmdcheck.config.resolve import ConfigResolver

    if path is None:
        return Settings()
    return file_settings(ConfigResolver().for_path(pathlib.Path(path)), _check_arguments(path), path)


def context_for(path: str, settings: Settings) -> list[str]:
    """The other files `spmdcheck check PATH` analyses with it (its packages' files: `cli.project`)."""
    from spmdcheck.cli.project import project_context
    from spmdcheck.config.resolve import ConfigResolver

    resolver = ConfigResolver()
    primary = resolver.for_path(pathlib.Path(path))
    if not primary.project_context:
        return []
    return project_context([path], settings, resolver, _check_arguments(path), primary)


def analyse(
    text: str, path: str | None, buffers: Mapping[str, str] | None = None, disk: DiskTexts | None = None
) -> Analysis:
    """Check an editor buffer with the rest of its program, the other open buffers (`buffers`, by path) over
    the disk's files, as the command line checks the saved file (never raises: a checker bug becomes an
    SPMD000 diagnostic)."""
    shown = path or "<unsaved>"
    try:
        settings = settings_for(path)
        registry = load_registry(settings.stub_path)
        if path is None:
            result = infer_source(text, shown, settings, registry)
            return Analysis(text, result)
        collector = BindingCollector()
        context = context_for(path, settings)
        diagnostics, program = check_in_program(path, text, settings, registry, context, buffers, collector, disk)
        result = TypedFile(shown, diagnostics, collector.bindings(path))
        return Analysis(text, result, program=frozenset(program))
    except Exception as exc:  # noqa: BLE001 - the editor session must survive a checker bug
        result = TypedFile(shown, [diagnostic_of(shown, InternalError(str(exc), type(exc).__name__))])
    return Analysis(text, result)

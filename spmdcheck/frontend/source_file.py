"""One file's text, decoded once, with what the run reads from it made once (as mypy's State, ruff's Locator).

Planning makes it (`engine.plan.load_file`, or `engine.check.check_sources` from a text it is given); the
analysis takes its header settings and mesh axis names, the outline of a recorded run and the result cache's
digest take its axis names, and the report's code frames take its lines: each is computed on first use and
kept, never read again from the text.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from spmdcheck.config.resolve import check_mesh
from spmdcheck.frontend.lines import PHYSICAL_LINE, physical_lines
from spmdcheck.frontend.source import ParseFailure, decode_source, read_source_bytes

_MESH_NAMES = re.compile(r"mesh_dim_names\s*=\s*[\(\[]([^\)\]]*)[\)\]]")
_SET_MESH_KEYS = re.compile(r"set_current_mesh\(\s*\{([^}]*)\}")
_STRING = re.compile(r"""["']([A-Za-z_][\w]*)["']""")


class SourceFile:
    __slots__ = ("path", "text", "_lines", "_header", "_mesh_names")

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text  # as Python decodes the file (BOM and coding cookie applied)
        self._lines: list[str] | None = None
        self._header: InlineConfig | None = None
        self._mesh_names: frozenset[str] | None = None

    @classmethod
    def read(cls, path: str) -> SourceFile | ParseFailure:
        """The file at `path`, decoded (a ParseFailure when it cannot be); raises OSError when unreadable."""
        text = decode_source(read_source_bytes(path))
        return text if isinstance(text, ParseFailure) else cls(path, text)

    @property
    def lines(self) -> list[str]:
        """Its physical lines, as Python counts them (frontend/lines.py)."""
        if self._lines is None:
            self._lines = physical_lines(self.text)
        return self._lines

    @property
    def header(self) -> InlineConfig:
        """The settings its header comments write (`# spmdcheck: mesh = [...]`: `read_inline_config`)."""
        if self._header is None:
            self._header = read_inline_config(self.text)
        return self._header

    @property
    def mesh_names(self) -> frozenset[str]:
        """The axis names of the meshes it builds (a text scan: `mesh_names_in`)."""
        if self._mesh_names is None:
            self._mesh_names = frozenset(mesh_names_in(self.text))
        return self._mesh_names

    def __repr__(self) -> str:
        return f"SourceFile({self.path!r}, {len(self.text)} characters)"


def mesh_names_in(text: str) -> set[str]:
    """Axis names of meshes built in this file, found by a text scan (before analysis needs them)."""
    names: set[str] = set()
    for pattern in (_MESH_NAMES, _SET_MESH_KEYS):
        for m in pattern.finditer(text):
            names.update(_STRING.findall(m.group(1)))
    return names



# File-level settings written in the file itself (its header), like mypy's `# mypy:` comments:
#
#     # spmdcheck: mesh = ["dp", "tp"]
#     # spmdcheck: strict
#
# Only comment lines before the first statement count, so a comment deep in the code cannot change how the
# whole file is checked.
_LINE = re.compile(r"^#\s*spmdcheck:\s*(?P<body>.+?)\s*$")
_IGNORE = re.compile(r"^ignore(-file)?(\[|\s|$)")  # suppressions: diagnostics/suppression.py


_BOOLEANS = {"true": True, "false": False}


@dataclass(frozen=True)
class InlineConfig:
    mesh: tuple[str, ...] | None = None
    strict: bool | None = None
    errors: tuple[tuple[int, str], ...] = ()  # (line, message) of comments that cannot be read


def read_inline_config(text: str) -> InlineConfig:
    mesh: tuple[str, ...] | None = None
    strict: bool | None = None
    errors: list[tuple[int, str]] = []
    # the first physical lines (frontend/lines.py's pattern; `strip` below drops each line's end)
    for lineno, raw in enumerate(PHYSICAL_LINE.findall(text[:20000])[:40], start=1):
        line = raw.strip()
        if not line:
            continue
        if not line.startswith("#"):
            break
        m = _LINE.match(line)
        if m is None or _IGNORE.match(m.group("body")):
            continue
        key, sep, value = m.group("body").partition("=")
        key = key.strip()
        if key == "strict" and not sep:
            strict = True
        elif key == "strict" and sep:
            flag = _BOOLEANS.get(value.strip().lower())
            if flag is None:
                errors.append((lineno, f"`# spmdcheck: strict = ...` wants true or false, got {value.strip()!r}"))
            else:
                strict = flag
        elif key == "mesh" and sep:
            try:
                names = ast.literal_eval(value.strip())
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                names = None
            problem = check_mesh(names)
            if problem is None:
                mesh = tuple(names)
            else:
                errors.append((lineno, f"`# spmdcheck: mesh = {value.strip()}`: {problem}"))
        else:
            errors.append((lineno, f"unknown file setting `{m.group('body')}` (known: mesh = [...], strict)"))
    return InlineConfig(mesh, strict, tuple(errors))

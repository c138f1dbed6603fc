"""File-level settings written in the file itself, like mypy's `# mypy:` comments.

    # spmdcheck: mesh = ["dp", "tp"]
    # spmdcheck: strict

Only comment lines before the first statement count (the file's header), so a
comment deep in the code cannot change how the whole file is checked.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from spmdcheck.config import check_mesh

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
    for lineno, raw in enumerate(text.splitlines()[:40], start=1):
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

"""Source lines of reported files, read once per file, for code frames and fingerprints."""

from __future__ import annotations

import io
import re
import tokenize

_LINE_END = re.compile(r"\r\n|\r|\n")


class SourceLines:
    """Lines of each reported file (1-based access); text given up front (stdin) wins over the disk."""

    def __init__(self, preloaded: dict[str, str] | None = None) -> None:
        self._lines: dict[str, list[str]] = {p: split_lines(t) for p, t in (preloaded or {}).items()}

    def lines(self, path: str) -> list[str]:
        cached = self._lines.get(path)
        if cached is None:
            cached = self._lines[path] = _read_lines(path)
        return cached

    def line(self, path: str, number: int) -> str:
        lines = self.lines(path)
        return lines[number - 1] if 0 < number <= len(lines) else ""


def split_lines(text: str) -> list[str]:
    """Lines as Python numbers them: only \\n, \\r\\n and \\r end a line (not a form feed)."""
    lines = _LINE_END.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return []
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return split_lines(data.decode(encoding, errors="replace"))
    except (SyntaxError, LookupError):  # a bad coding cookie: show what UTF-8 makes of it
        return split_lines(data.decode("utf-8", errors="replace"))

"""Physical lines as Python counts them: only \\n, \\r\\n and \\r end a line.

`str.splitlines` also breaks at form feeds, \\x1c-\\x1e, \\x85, \\u2028 and \\u2029; a file holding one
of those would shift every later line number against the parser's positions (a `# noqa` read from the
wrong line, a fix written onto the wrong one).
"""

from __future__ import annotations

import re

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def physical_lines(text: str, keepends: bool = False) -> list[str]:
    lines = _LINE.findall(text)
    if keepends:
        return lines
    return [line.rstrip("\r\n") for line in lines]

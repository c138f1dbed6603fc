"""Physical lines as Python counts them: only \\n, \\r\\n and \\r end a line.

`str.splitlines` also breaks at form feeds, \\x1c-\\x1e, \\x85, \\u2028 and \\u2029; a file holding one
of those would shift every later line number against the parser's positions (a `# noqa` read from the
wrong line, a fix written onto the wrong one).
"""

from __future__ import annotations

import re

PHYSICAL_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # one line, with its end


def physical_lines(text: str, keepends: bool = False) -> list[str]:
    lines = PHYSICAL_LINE.findall(text)
    if keepends:
        return lines
    return [line.rstrip("\r\n") for line in lines]

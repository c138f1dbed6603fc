"""Text from the checked files, made safe to print on a terminal.

File names, source lines and messages quoting code can hold terminal escapes (ESC [ 2J clears the
screen), bidirectional overrides (U+202E shows `gnp.exe` for `exe.png`) and line breaks (a file name
with a newline would split one diagnostic into two lines). `printable` writes every such character as
its Python escape (\\x1b, \\u202e, \\n), so what is shown is what is in the file.
"""

from __future__ import annotations

import re

# C0 and C1 controls except tab, DEL, the bidirectional marks, embeddings, overrides and isolates, and
# the Unicode line and paragraph separators
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def printable(text: str) -> str:
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)

"""The other places a diagnostic's message names: the call chain of a finding reported in a helper
(`called from train.py:35, called from ...`) and sites in other files (`by the reduction at layers.py:115`).

Reports that can point at locations (the editor's related information) read them from the message, where
the renderer wrote them (`render.PositionsTable.render_one`), so every output names the same places.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# `called from PATH:LINE` and `at PATH:LINE`, PATH a Python file as `render.display_path` writes it
_REFERENCE = re.compile(r"\b(called from|at) ((?:[^\s,():]|:(?!\d))+?\.pyi?):(\d+)\b")


@dataclass(frozen=True)
class RelatedLocation:
    path: str
    line: int  # 1-based
    message: str


def related_locations(message: str) -> list[RelatedLocation]:
    """The locations in other files a message names, in its order: the call chain's steps, innermost first."""
    out = []
    step = 0
    for m in _REFERENCE.finditer(message):
        kind, path, line = m.group(1), m.group(2), int(m.group(3))
        if kind == "called from":
            step += 1
            note = f"called from here (step {step} of the call chain)"
        else:
            note = "the site the message names"
        out.append(RelatedLocation(path, line, note))
    return out

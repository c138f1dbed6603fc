"""Whether the pre-pass runs: read by runs that never scan (a run answered by the result cache keys its tree
on it), so it lives outside the pre-pass package, which imports its scanner and taint with it."""

from __future__ import annotations

import os

DISABLE_ENV = "SPMDCHECK_NO_PREPASS"  # hidden switch: analyse every file whole (tests compare both ways)


def enabled() -> bool:
    return os.environ.get(DISABLE_ENV, "") in ("", "0")

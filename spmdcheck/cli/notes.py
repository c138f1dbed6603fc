"""Informational lines on stderr (what was fixed, written, held back, left out): `-q/--quiet` silences them,
as ruff's does; errors and usage problems are printed whatever `-q` says."""

from __future__ import annotations

import sys

_quiet = False


def set_quiet(quiet: bool) -> None:
    """Set once per `check` from its arguments."""
    global _quiet
    _quiet = quiet


def note(message: str) -> None:
    """`spmdcheck: MESSAGE` on stderr, unless the run is quiet."""
    if not _quiet:
        print(f"spmdcheck: {message}", file=sys.stderr)

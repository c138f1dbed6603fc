"""A time budget for one analysis, checked cooperatively by the interpreter.

A worker process that overruns is killed by its parent (`workers.run_isolated`), but a serial run
(`-j1`, one program, the language server) has no parent to watch it. The interpreter calls `tick()` on
every statement it executes; past the deadline `tick()` raises `BudgetExceeded`, which the caller turns
into a diagnostic for the program's files, and the run goes on. `BudgetExceeded` is a BaseException so
that the analysis' own `except Exception` guards (an unreadable literal is unknown) cannot swallow it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

# the clock is read once every this many statements: a statement costs microseconds, so the budget is
# overrun by milliseconds at most, and the check costs nothing measurable
_CHECK_EVERY = 512

_deadline: float | None = None
_ticks = 0


class BudgetExceeded(BaseException):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"the analysis did not finish within its time budget of {seconds:.0f} s")
        self.seconds = seconds


_seconds = 0.0


@contextmanager
def limited(seconds: float | None) -> Iterator[None]:
    """Within the block, the analysis stops with `BudgetExceeded` after `seconds` (None: no limit)."""
    global _deadline, _seconds, _ticks
    outer = (_deadline, _seconds)
    _deadline = None if seconds is None else time.monotonic() + seconds
    _seconds, _ticks = seconds or 0.0, 0
    try:
        yield
    finally:
        _deadline, _seconds = outer


def tick() -> None:
    global _ticks
    _ticks += 1
    if _ticks % _CHECK_EVERY == 0 and _deadline is not None and time.monotonic() > _deadline:
        raise BudgetExceeded(_seconds)

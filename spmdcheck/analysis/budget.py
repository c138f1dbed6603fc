"""What one analysis may cost, and what happens past it: its files degrade to unknown.

Two budgets bound a run on any input (docs/robustness.md, "Bounded cost"):

- **Size.** A file whose code to parse (after the pre-pass blanked its inert bodies) is over
  `MAX_PARSED_CHARS` characters is not parsed by libcst nor analysed (`engine.plan`): libcst costs seconds
  and most of a gigabyte per megabyte of code, and no hand-written module comes near the limit (the
  largest file of the real-code corpora and torch/distributed, 280,000 characters, is well under it).
  Its imports by other files are unknown values, as a module outside the program is.
- **Time.** An analysis (one program: the files that import each other) may use `program_budget(files)`
  seconds of CPU. The interpreter calls `tick()` on every statement it executes; past the budget `tick()`
  raises `BudgetExceeded`, and the caller (`engine.analyse.guarded`) reports no diagnostic for the program's
  files: what it could not finish is unknown, as unannotated code is. CPU time, not wall time: a loaded
  machine (a CI runner sharing its cores) does not make an analysis run out of budget that a quiet one
  finishes. `BudgetExceeded` is a BaseException so that the analysis' own `except Exception` guards (an
  unreadable literal is unknown) cannot swallow it.

Either way the run is silent about it (exit status and findings as if the file held none), and says so
with `--verbose` (the file result's notes); such a result is never stored in the result cache. A worker
process the interpreter cannot stop (a native parser that hangs) is still killed by its parent
(`engine.workers.run_isolated`), much later, as an SPMD000.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

# A file whose code to parse is longer than this (characters) is not analysed: one at the limit peaks
# at about 700 MB (libcst's tree and the analysis: ~0.9 GB per MB of code, measured in docs/robustness.md)
MAX_PARSED_CHARS = 750_000

# CPU seconds of one analysis: a base, and more for each file of the program (megatron-core's ~500 files
# are one program of a few seconds; one file that runs past half a minute has met a pathology)
PROGRAM_BUDGET_S = 30.0
FILE_BUDGET_S = 2.0

# the clock is read once every this many statements: a statement costs microseconds, so the budget is
# overrun by milliseconds at most, and the check costs nothing measurable
_CHECK_EVERY = 512

_deadline: float | None = None
_ticks = 0


class BudgetExceeded(BaseException):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"the analysis did not finish within its budget of {seconds:.0f} s of CPU time")
        self.seconds = seconds


_seconds = 0.0


def program_budget(files: int) -> float:
    """The CPU seconds an analysis of `files` files may take."""
    return PROGRAM_BUDGET_S + FILE_BUDGET_S * files


def too_large_note(chars: int) -> str:
    """The `--verbose` note of a file over the size budget."""
    return (
        f"not analysed: {chars:,} characters of code to parse, over the budget of {MAX_PARSED_CHARS:,} "
        "(its contents are unknown to the analysis)"
    )


def over_time_note(exc: BudgetExceeded, files: int) -> str:
    """The `--verbose` note of each file of an analysis stopped at its time budget."""
    together = f" (analysed with {files - 1} other file(s))" if files > 1 else ""
    return f"not analysed: {exc}{together}; its findings are unknown"


def cpu_seconds() -> float:
    """The CPU time of this process (every thread: the analysis runs on one of its own)."""
    return time.process_time()


@contextmanager
def limited(seconds: float | None) -> Iterator[None]:
    """Within the block, the analysis stops with `BudgetExceeded` after `seconds` of CPU (None: no limit)."""
    global _deadline, _seconds, _ticks
    outer = (_deadline, _seconds)
    _deadline = None if seconds is None else cpu_seconds() + seconds
    _seconds, _ticks = seconds or 0.0, 0
    try:
        yield
    finally:
        _deadline, _seconds = outer


def tick() -> None:
    global _ticks
    _ticks += 1
    if _ticks % _CHECK_EVERY == 0 and _deadline is not None and cpu_seconds() > _deadline:
        raise BudgetExceeded(_seconds)

"""The cycle collector during analysis: off while a program is analysed, caught up afterwards."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# Objects (net of those freed) that may wait for the cycle collector between programs: about 200 MB.
_CYCLE_GARBAGE_BUDGET = 2_000_000


_defer_collection = False  # set by a process that ends with its run (the command line, and its workers)


_collection_deferred = False  # the collector is off only because garbage waits below the budget


def defer_cycle_collection() -> None:
    """For a process that exits when its run ends (the command line): a program's garbage may wait for
    the cycle collector (see `without_cycle_collection`). Worker processes forked later inherit it."""
    global _defer_collection
    _defer_collection = True


@contextlib.contextmanager
def without_cycle_collection() -> Iterator[None]:
    """Parsing and analysing allocate millions of objects that live until the end of a program and
    form few cycles; CPython's cycle collector would walk them again and again (a fifth of the run).
    It is off meanwhile, and catches up afterwards. A program's data is left in cycles (its scopes and
    functions refer to each other), and a collection after every program walks it all again (a
    twentieth of a run): in a process that exits with its run (`defer_cycle_collection`), the
    collector stays off until the objects waiting exceed `_CYCLE_GARBAGE_BUDGET`, so memory stays
    bounded and a worker that exits first never pays for it."""
    global _collection_deferred
    was_enabled = gc.isenabled() or _collection_deferred
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            _collection_deferred = _defer_collection and gc.get_count()[0] < _CYCLE_GARBAGE_BUDGET
            if not _collection_deferred:
                gc.enable()

"""The cycle collector during analysis: off while a program is analysed, caught up afterwards."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from collections.abc import Iterator

# Objects (net of those freed) that may wait for the cycle collector between programs. A program's data is
# one lump of cyclic garbage once it is analysed (a big package's: two million objects, a quarter of a GB);
# a fixed budget near that size makes one program cost a collection of it or not by a few percent of its
# size. So, as a JVM sizes its heap, garbage may take a share of the machine's memory, split between the
# processes a run may use (each worker defers on its own), and never less than the floor.
_GARBAGE_SHARE_OF_MEMORY = 1 / 16
_BYTES_PER_OBJECT = 128  # a tracked object with the untracked data it holds (measured on real code: 90-120)
_CYCLE_GARBAGE_FLOOR = 2_000_000  # about 250 MB


@functools.cache
def cycle_garbage_budget() -> int:
    """The objects that may wait for the cycle collector in one process (see the constants above)."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): the floor
        return _CYCLE_GARBAGE_FLOOR
    processes = (os.cpu_count() or 1) + 1  # the workers and their parent
    share = int(memory * _GARBAGE_SHARE_OF_MEMORY / processes / _BYTES_PER_OBJECT)
    return max(_CYCLE_GARBAGE_FLOOR, share)


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
    collector stays off until the objects waiting exceed `cycle_garbage_budget()`, so memory stays
    bounded and a worker that exits first never pays for it."""
    global _collection_deferred
    was_enabled = gc.isenabled() or _collection_deferred
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            _collection_deferred = _defer_collection and gc.get_count()[0] < cycle_garbage_budget()
            if not _collection_deferred:
                gc.enable()

"""A process pool that survives its workers: a crash or a hang costs one task, never the run.

`multiprocessing.Pool` waits forever for a task whose worker died (a segfault in a native parser, the
out-of-memory killer), and has no time limit per task. Here each worker is a forked process fed one
task at a time over a pipe; the parent watches the pipes and the processes together, so a worker that
dies or overruns its task's time budget is killed, its task becomes a failure result (made by the
caller's `on_failure`), a fresh worker takes its place, and the other tasks go on.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_TASKS: Sequence = ()
_WORK: Callable | None = None


def _serve(conn: Connection) -> None:
    """The worker's loop: receive a task index, send back its result (or the exception's description)."""
    while True:
        try:
            index = conn.recv()
        except (EOFError, OSError):
            return
        if index is None:
            return
        try:
            result = (True, _WORK(_TASKS[index]))  # type: ignore[misc]
        except BaseException as exc:  # noqa: BLE001 - reported to the parent as this task's failure
            result = (False, f"{type(exc).__name__}: {str(exc)[:300]}")
        try:
            conn.send(result)
        except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be pickled
            conn.send((False, f"cannot send the result: {type(exc).__name__}"))


class _Worker(Generic[T]):
    def __init__(self, ctx: mp.context.BaseContext) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.task: int | None = None
        self.started = 0.0

    def give(self, index: int) -> None:
        self.task, self.started = index, time.monotonic()
        self.conn.send(index)

    def stop(self, kill: bool = False) -> None:
        if kill and self.process.is_alive():
            os.kill(self.process.pid, signal.SIGKILL)
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.process.join(timeout=5)
        self.conn.close()


def run_isolated(
    tasks: Sequence[T],
    work: Callable[[T], R],
    on_failure: Callable[[T, str], R],
    jobs: int,
    budget: Callable[[T], float],
    on_result: Callable[[R], None] | None = None,
) -> list[R]:
    """`work(task)` for every task on `jobs` forked workers; the results in completion order.

    A task whose worker dies, raises, or runs longer than `budget(task)` seconds gives `on_failure(task, why)`.
    `on_result` sees each result as it comes (the command line's progress).
    """
    global _TASKS, _WORK
    ctx = mp.get_context("fork")
    _TASKS, _WORK = tasks, work
    results: list[R] = []
    pending = list(range(len(tasks)))[::-1]
    workers = [_Worker(ctx) for _ in range(max(1, min(jobs, len(tasks))))]
    try:
        for w in workers:
            if pending:
                w.give(pending.pop())
        while any(w.task is not None for w in workers):
            busy = [w for w in workers if w.task is not None]
            now = time.monotonic()
            deadline = min(w.started + budget(tasks[w.task]) for w in busy)  # type: ignore[index]
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=max(0.0, deadline - now))
            for i, w in enumerate(workers):
                if w.task is None:
                    continue
                task = tasks[w.task]
                failure = None
                if w.conn in ready:
                    try:
                        ok, value = w.conn.recv()
                    except (EOFError, OSError):
                        ok, value = False, _death(w)
                    if ok:
                        results.append(value)
                    else:
                        failure = value
                elif w.process.sentinel in ready:
                    failure = _death(w)
                elif time.monotonic() - w.started > budget(task):
                    failure = f"the analysis did not finish within its time budget of {budget(task):.0f} s"
                else:
                    continue
                if failure is not None:
                    results.append(on_failure(task, failure))
                if on_result is not None:
                    on_result(results[-1])
                if failure is not None:
                    if not w.process.is_alive() or "time budget" in failure or "died" in failure:
                        w.stop(kill=True)
                        w = workers[i] = _Worker(ctx)
                w.task = None
                if pending:
                    w.give(pending.pop())
    finally:
        for w in workers:
            w.stop(kill=w.task is not None)
        _TASKS, _WORK = (), None
    return results


def _death(worker: _Worker) -> str:
    worker.process.join(timeout=5)
    code = worker.process.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the worker process died ({name}) while analysing this file"
    return f"the worker process died (exit status {code}) while analysing this file"

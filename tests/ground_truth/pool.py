"""A persistent pool of rank processes for one world size.

The ranks join a gloo group over 127.0.0.1 once and then run program after
program. A program that does not answer on every rank within the timeout is a
hang (or a crash that left the other ranks waiting in a collective): the pool
is killed and started again, and the caller gets the answers it did receive.

Processes come from a ``forkserver`` that has imported torch once, so a
rebuild costs a fork and a rendezvous, not a fresh torch import.
"""
from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pickle
import socket
import sys
import time
from dataclasses import dataclass, field

from . import worker

_CTX = None


def _context():  # noqa: ANN202
    global _CTX
    if _CTX is None:
        ctx = mp.get_context("forkserver")
        here = os.path.dirname(os.path.abspath(__file__))
        tests_dir = os.path.dirname(here)
        if tests_dir not in sys.path:  # the forkserver imports this package by the parent's name for it
            sys.path.insert(0, tests_dir)
        ctx.set_forkserver_preload(["torch", "torch.distributed", "spmd_types", worker.__name__])
        _CTX = ctx
    return _CTX


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PoolStats:
    started: int = 0
    programs: int = 0
    hangs: int = 0
    start_seconds: float = 0.0
    run_seconds: float = 0.0
    rebuild_reasons: list[str] = field(default_factory=list)


class RankPool:
    """``world`` rank processes of one ``kind``: "gloo" (real collectives) or
    "fake" (one process holding rank 0 of a fake group, for spmd-types' checker)."""

    def __init__(self, world: int, kind: str = "gloo", start_timeout: float = 120.0) -> None:
        self.world, self.kind = world, kind
        self.start_timeout = start_timeout
        self.procs: list = []
        self.conns: list = []
        self.stats = PoolStats()
        self._job = 0

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        ranks = self.world if self.kind == "gloo" else 1

        def args_of(rank: int, port: int) -> tuple:
            return self.kind, rank, self.world, port

        self.spawn(_context(), worker.rank_main, args_of, ranks, self.kind)

    def spawn(self, ctx, target, args_of, ranks: int, label: str) -> None:  # noqa: ANN001
        """Start `ranks` processes running `target(*args_of(rank, port), conn)` and wait until each says it is
        ready (this pool's spmd_types workers, and the twin runners' ranks: twins.py)."""
        t0 = time.perf_counter()
        port = free_port()
        self.procs, self.conns = [], []
        for rank in range(ranks):
            parent, child = ctx.Pipe()
            p = ctx.Process(
                target=target,
                args=(*args_of(rank, port), child),
                daemon=True,
                name=f"gt-{label.lower()}{self.world}-r{rank}",
            )
            p.start()
            child.close()
            self.procs.append(p)
            self.conns.append(parent)
        deadline = time.monotonic() + self.start_timeout
        for rank, conn in enumerate(self.conns):
            left = deadline - time.monotonic()
            if left <= 0 or not conn.poll(left):
                self.close()
                raise RuntimeError(f"rank {rank} of the {label} pool (world {self.world}) did not start")
            msg = pickle.loads(conn.recv_bytes())
            if msg.get("status") != "ready":
                self.close()
                raise RuntimeError(f"rank {rank} failed to start: {msg.get('error', {}).get('message')}")
        self.stats.started += 1
        self.stats.start_seconds += time.perf_counter() - t0

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send_bytes(pickle.dumps("stop"))
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 2.0
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        self.kill()

    def kill(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(5.0)
        for conn in self.conns:
            try:
                conn.close()
            except OSError:
                pass
        self.procs, self.conns = [], []

    def rebuild(self, reason: str) -> None:
        self.stats.rebuild_reasons.append(reason)
        self.kill()
        self.start()

    @property
    def alive(self) -> bool:
        return bool(self.procs) and all(p.is_alive() for p in self.procs)

    # ------------------------------------------------------------------ running
    def run(self, jobs: list[dict], timeout: float) -> tuple[list[dict | None], bool]:
        """Send one job per rank; return each rank's answer (None: no answer) and
        whether the pool had to be rebuilt (a hang, or a rank that died)."""
        if not self.alive:
            self.kill()
            self.start()
        assert len(jobs) == len(self.conns)
        t0 = time.perf_counter()
        self._job += 1
        self.stats.programs += 1
        for conn, job in zip(self.conns, jobs):
            conn.send_bytes(pickle.dumps(job))
        answers: list[dict | None] = [None] * len(self.conns)
        pending = {id(c): i for i, c in enumerate(self.conns)}
        deadline = time.monotonic() + timeout
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready = mpc.wait([self.conns[i] for i in pending.values()], timeout=left)
            for conn in ready:
                i = pending.pop(id(conn))
                try:
                    answers[i] = pickle.loads(conn.recv_bytes())
                except (EOFError, OSError):
                    answers[i] = None
        broken = bool(pending) or any(a is None for a in answers)
        if broken:
            self.stats.hangs += 1
            self.rebuild("no answer from rank(s) " + ", ".join(str(i) for i, a in enumerate(answers) if a is None))
        self.stats.run_seconds += time.perf_counter() - t0
        return answers, broken

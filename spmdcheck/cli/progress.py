"""A status line on stderr while a long check runs (files planned, parsed, analysed), as a terminal shows it.

Shown only when stderr is a terminal, not with `-q`, and only once the run has lasted a second (a warm or
small run prints nothing). The engine reports events (`run_check(progress=...)`: the files planned, the files
read and scanned, each program's files analysed as the parent receives its results); a background thread
redraws the line four times a second. The thread writes with `os.write` on the descriptor, holding no lock
of Python's streams: the worker processes fork while it runs, and a child must not inherit a stream lock held
by it. The line is erased before the report is written.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator

SHOW_AFTER_S = 1.0  # a run shorter than this prints no progress
REDRAW_EVERY_S = 0.25  # at most four redraws a second
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_ERASE = "\r\x1b[2K"


class Progress:
    """The counts of a run, updated by the engine's events; `__call__(event, count)` is its callback."""

    def __init__(self, fd: int, files: int) -> None:
        self.fd, self.started = fd, time.monotonic()
        self.planned, self.parsed, self.analysed = files, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._redraw_loop, name="spmdcheck-progress", daemon=True)
        self._drawn = False

    def __call__(self, event: str, count: int) -> None:
        """`planned`/`parsed`: how many files (the run's, with the project context); `analysed`: how many more."""
        if event == "planned":
            self.planned = count
        elif event == "parsed":
            self.parsed = count
        elif event == "analysed":
            self.analysed += count

    def line(self, frame: int) -> str:
        elapsed = time.monotonic() - self.started
        stage = (
            f"{self.analysed}/{self.planned} analysed" if self.parsed else "reading and scanning"
        )
        text = f"{_SPINNER[frame % len(_SPINNER)]} spmdcheck: {self.planned} files planned"
        if self.parsed:
            text += f" · {self.parsed} parsed"
        text += f" · {stage} · {elapsed:.0f} s"
        width = shutil.get_terminal_size((80, 24)).columns
        return text[: max(10, width - 1)]

    def _redraw_loop(self) -> None:
        frame = 0
        if self._stop.wait(max(0.0, SHOW_AFTER_S - (time.monotonic() - self.started))):
            return
        while not self._stop.is_set():
            self._write(_ERASE + "\x1b[2m" + self.line(frame) + "\x1b[0m")
            self._drawn = True
            frame += 1
            self._stop.wait(REDRAW_EVERY_S)

    def _write(self, text: str) -> None:
        try:
            os.write(self.fd, text.encode("utf-8", "replace"))
        except OSError:
            self._stop.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if self._drawn:
            self._write(_ERASE)


def wanted(args: argparse.Namespace, stream: object = None) -> bool:
    """Progress is for a person watching a terminal: not with -q, stdin, or a stderr that is no TTY."""
    stream = stream if stream is not None else sys.stderr
    if args.quiet or args.paths == ["-"] or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def progress_for(args: argparse.Namespace, files: int) -> Iterator[Progress | None]:
    """A running Progress for a check of `files` files when one is wanted (else None), erased at the end."""
    if not wanted(args):
        yield None
        return
    try:
        sys.stderr.flush()
        progress = Progress(sys.stderr.fileno(), files)
    except (OSError, ValueError, AttributeError):
        yield None
        return
    progress.start()
    try:
        yield progress
    finally:
        progress.stop()

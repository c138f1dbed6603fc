"""Benchmark: spmdcheck over a tree versus the floor, libcst parsing the same files.

    python benchmarks/bench.py [ROOT] [--jobs N] [--repeat K]

ROOT defaults to the installed torch/distributed package. Prints, for the same
file list: libcst parse of every file (1 process and N processes), and
`spmdcheck check` (N processes, including start-up). Median of K runs.
This is a measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import pathlib
import statistics
import subprocess
import sys
import time


def _parse(path: str) -> None:
    import libcst

    try:
        libcst.parse_module(pathlib.Path(path).read_bytes())
    except Exception:  # noqa: BLE001 - files libcst rejects count as parsed: the floor is the attempt
        pass


def parse_all(files: list[str], jobs: int) -> None:
    if jobs <= 1:
        for f in files:
            _parse(f)
        return
    with mp.get_context("fork").Pool(jobs) as pool:
        list(pool.imap_unordered(_parse, files, chunksize=4))


def default_root() -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import torch.distributed, os; print(os.path.dirname(torch.distributed.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def timed(fn, repeat: int) -> tuple[float, float, float]:  # noqa: ANN001
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs), min(runs), max(runs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    root = args.root or default_root()
    files = sorted(str(p) for p in pathlib.Path(root).rglob("*.py"))
    lines = sum(pathlib.Path(f).read_bytes().count(b"\n") for f in files)
    print(f"corpus: {root}: {len(files)} files, {lines} lines; jobs={args.jobs}; median of {args.repeat} (min-max)")
    rows = [
        ("libcst parse, 1 process", lambda: parse_all(files, 1)),
        (f"libcst parse, {args.jobs} processes", lambda: parse_all(files, args.jobs)),
        (
            f"spmdcheck check, {args.jobs} processes (whole command)",
            lambda: subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "spmdcheck",
                    "check",
                    root,
                    "--output-format",
                    "json",
                    "--jobs",
                    str(args.jobs),
                    "--no-respect-gitignore",
                ],
                capture_output=True,
                check=False,
            ),
        ),
        (
            "spmdcheck check, 1 process (whole command)",
            lambda: subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "spmdcheck",
                    "check",
                    root,
                    "--output-format",
                    "json",
                    "--jobs",
                    "1",
                    "--no-respect-gitignore",
                ],
                capture_output=True,
                check=False,
            ),
        ),
    ]
    for name, fn in rows:
        med, lo, hi = timed(fn, args.repeat)
        print(f"{name:<52} {med:7.2f} s  ({lo:.2f}-{hi:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

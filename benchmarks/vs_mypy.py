"""Benchmark: spmdcheck cold and warm against mypy and the parsers' floors, on one tree, in one run.

    python benchmarks/vs_mypy.py [ROOT] [--jobs N] [--repeat K]

ROOT defaults to the installed torch/distributed package. The tree is copied to a temporary folder:
the warm-edit rows edit its files. "a median file" is the median-size module (it may hold nothing the
checker analyses); "a checked file" is the median-size file of the largest program the checker forms
(a comment there keeps the program's cache key; a new statement at the end of the file changes it, and
that program, the worst case of one edit, is analysed again whole; a new statement inside one of its
functions has only the roots that reach that function analysed again: spmdcheck/engine/incremental.py).
Every row is a fresh command (interpreter start-up included), timed for wall clock and for CPU summed
over the command and its workers; rows are interleaved within each repetition so machine load hits
them alike. Printed: medians of K, and the ratios to mypy (`mypy --no-incremental --follow-imports=skip`
on the same files).
This is a measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import ast
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench import default_root  # the same default tree as bench.py (run as scripts: their folder is on sys.path)

_PARSE = """
import sys, pathlib
import {module}
for path in pathlib.Path(sys.argv[1]).read_text().splitlines():
    try:
        {call}(pathlib.Path(path).read_bytes())
    except Exception:
        pass
"""


def checked_file(files: list[str]) -> str:
    """The median-size file of the largest program spmdcheck forms of `files` (its own planning)."""
    from spmdcheck.engine.plan import plan_programs
    from spmdcheck.settings import Settings

    _, programs = plan_programs(files, Settings())
    largest = max(programs, key=lambda p: sum(len(f.text) for f in p), default=[])
    members = sorted((f.path for f in largest), key=lambda f: pathlib.Path(f).stat().st_size)
    return members[len(members) // 2] if members else files[len(files) // 2]


def timed(cmd: list[str], cwd: pathlib.Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, cpu) of one command; cpu is user+sys of it and every process it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-mypy", action="store_true")
    args = ap.parse_args()
    source = pathlib.Path(args.root or default_root()).resolve()
    work = pathlib.Path(tempfile.mkdtemp(prefix="spmdcheck-bench-"))
    tree = work / source.name
    shutil.copytree(source, tree, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    files = sorted(str(p) for p in tree.rglob("*.py"))
    listing = work / "files.txt"
    listing.write_text("\n".join(files))
    lines = sum(pathlib.Path(f).read_bytes().count(b"\n") for f in files)
    modules = [f for f in files if not f.endswith("__init__.py")]
    edited = sorted(modules, key=lambda f: pathlib.Path(f).stat().st_size)[len(modules) // 2]  # a median module
    checked = checked_file(files)
    env = dict(os.environ)
    for name in ("SPMDCHECK_NO_CACHE", "SPMDCHECK_NO_PREPASS", "PYTHONDONTWRITEBYTECODE"):
        env.pop(name, None)  # as on a user's machine: bytecode cached, the cache and the pre-pass on
    py = sys.executable
    check = [py, "-m", "spmdcheck", "check", str(tree), "--output-format", "json", "--no-respect-gitignore"]
    check += ["--jobs", str(args.jobs)]
    originals = {f: pathlib.Path(f).read_bytes() for f in (edited, checked)}
    counter = iter(range(10**9))

    # Edits accumulate, as a user's do: each row edits the file as the previous row left it (an edit undone
    # would be answered by the cached results of the state before it).
    def append(path: str, line: str):  # noqa: ANN202
        def edit() -> None:
            target = pathlib.Path(path)
            target.write_bytes(target.read_bytes() + line.format(next(counter)).encode())

        return edit

    def in_body(path: str):  # noqa: ANN202
        """A statement inserted before the last statement of the file's first function with a body of its own
        lines (what most edits are: inside a function), a different one each time."""

        def edit() -> None:
            target = pathlib.Path(path)
            text = target.read_text(encoding="utf-8")
            fn = next(
                (
                    n
                    for n in ast.walk(ast.parse(text))
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.body[0].lineno > n.lineno
                ),
                None,
            )
            if fn is None:
                return
            lines = text.splitlines(keepends=True)
            at = fn.body[-1].lineno - 1
            indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
            target.write_text("".join([*lines[:at], f"{indent}_edit = {next(counter)}\n", *lines[at:]]), "utf-8")

        return edit

    rows: list[tuple[str, list[str], object]] = [
        ("ast.parse, 1 process", [py, "-c", _PARSE.format(module="ast", call="ast.parse"), str(listing)], None),
        (
            "libcst parse, 1 process",
            [py, "-c", _PARSE.format(module="libcst", call="libcst.parse_module"), str(listing)],
            None,
        ),
        (f"spmdcheck cold (--no-cache), -j{args.jobs}", [*check, "--no-cache"], None),
        (f"spmdcheck warm, unchanged tree, -j{args.jobs}", check, None),
        (f"spmdcheck warm, comment added to a median file, -j{args.jobs}", check, append(edited, "# edit {}\n")),
        (f"spmdcheck warm, comment added to a checked file, -j{args.jobs}", check, append(checked, "# edit {}\n")),
        (f"spmdcheck warm, code added to a checked file, -j{args.jobs}", check, append(checked, "_edit = {}\n")),
        (f"spmdcheck warm, code added in a function of a checked file, -j{args.jobs}", check, in_body(checked)),
    ]
    if not args.no_mypy:
        rows.append(
            (
                "mypy --no-incremental --follow-imports=skip",
                [py, "-m", "mypy", "--no-incremental", "--follow-imports=skip", "--no-error-summary", str(tree)],
                None,
            )
        )
    for _, cmd, _ in rows:  # once untimed: bytecode compiled, the result cache filled
        subprocess.run(cmd, cwd=work, env=env, capture_output=True, check=False)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in rows}
    for _ in range(args.repeat):
        for name, cmd, before in rows:
            if callable(before):
                before()
            results[name].append(timed(cmd, work, env))
    for path, data in originals.items():
        pathlib.Path(path).write_bytes(data)
    print(
        f"tree: {source} ({len(files)} files, {lines} lines); {os.cpu_count()} cores; spmdcheck -j{args.jobs}; "
        f"median of {args.repeat}; median file: {os.path.relpath(edited, tree)}; "
        f"checked file: {os.path.relpath(checked, tree)}; "
        f"load average at the end: {os.getloadavg()[0]:.1f}"
    )
    ref = results.get("mypy --no-incremental --follow-imports=skip")
    ref_wall = statistics.median(w for w, _ in ref) if ref else None
    ref_cpu = statistics.median(c for _, c in ref) if ref else None
    print(f"{'':<60} {'wall s':>8} {'cpu s':>8} {'wall/mypy':>10} {'cpu/mypy':>9}")
    for name, runs in results.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        ratios = f"{wall / ref_wall:10.2f} {cpu / ref_cpu:9.2f}" if ref_wall else ""
        print(f"{name:<60} {wall:8.2f} {cpu:8.2f} {ratios}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

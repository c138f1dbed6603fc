"""Profile: the analysis of each folder of a corpus, in process, for one or more checkouts.

    python benchmarks/profile_folders.py [--corpus megatron-core|torch-distributed ...]
        [--spmdcheck-root DIR ...] [--folder NAME ...] [--repeat K] [--no-cpu] [--pstats DIR]

Each top-level folder of the corpus (and the corpus root's own files, as `.`) is checked on its own,
whole-program, in one process (`check_files`: the pre-pass, then each program the folder's imports make),
once under cProfile for the number of function calls, and `--repeat` times without it for the process's
CPU time (user+sys). Every checkout runs in its own child process with `PYTHONPATH` set to it, so two
checkouts of different layouts (`--spmdcheck-root /tmp/spmdcheck-before --spmdcheck-root .`) are compared
on the same files; the timed runs of the checkouts alternate, folder by folder.

The call counts are deterministic: on a shared machine they are the yardstick, and the CPU times (noisy
there) only a second look. The analysis runs on a thread of its own (`frontend.guard.call_with_deep_stack`):
the profiler is started inside that thread (`threading.Thread.run` is wrapped), so its calls are counted.
At the end, the work each checkout did, counted in the same profiles: statements executed and expressions
evaluated (calls of the engine's `exec_stmt` and `eval`, named so in every layout), and CPU per thousand
statements: a checkout that follows more code (a feature) is slower for that alone, and per statement
the engines compare like with like.
`--pstats DIR` writes each profile (`DIR/<checkout>-<corpus>-<folder>.pstats`) for `python -m pstats`.
A measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

CORPUS_ROOT = pathlib.Path("/root/.cache/spmdcheck-corpus")


def corpus_dir(name: str) -> pathlib.Path:
    """The folder a corpus name stands for (torch/distributed: the installed torch's)."""
    if name == "megatron-core":
        return CORPUS_ROOT / "megatron" / "megatron" / "core"
    if name == "torch-distributed":
        out = subprocess.run(
            [sys.executable, "-c", "import torch, os; print(os.path.dirname(torch.__file__))"],
            capture_output=True,
            text=True,
            check=True,
        )
        return pathlib.Path(out.stdout.strip()) / "distributed"
    return pathlib.Path(name)


def folders_of(root: pathlib.Path, only: list[str]) -> dict[str, list[str]]:
    """Each top-level folder's Python files (sorted), and the root's own files as `.`; `*` (asked for by
    name) is the whole corpus, as `spmdcheck check -j1` analyses it."""
    groups: dict[str, list[str]] = {}
    if "*" in only:
        groups["*"] = sorted(str(p) for p in root.rglob("*.py"))
    own = sorted(str(p) for p in root.glob("*.py"))
    if own:
        groups["."] = own
    for sub in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))):
        files = sorted(str(p) for p in sub.rglob("*.py"))
        if files:
            groups[sub.name] = files
    if only:
        groups = {name: files for name, files in groups.items() if name in only}
    return groups


# ---- the child: one checkout, in process ----


def _child(mode: str, files: list[str], pstats_out: str | None) -> dict:
    import cProfile
    import pstats
    import threading
    import time

    import spmdcheck.api as api

    settings = api.Settings()
    registry = api.load_registry(settings.stub_path)
    profiles: list[cProfile.Profile] = []
    if mode == "calls":
        plain_run = threading.Thread.run

        def profiled_run(self: threading.Thread) -> None:
            profile = cProfile.Profile()
            profiles.append(profile)
            profile.enable()
            try:
                plain_run(self)
            finally:
                profile.disable()

        threading.Thread.run = profiled_run  # type: ignore[method-assign]
        main = cProfile.Profile()
        profiles.append(main)
        main.enable()
    t0 = time.process_time()
    results = api.check_files(files, settings, registry)
    cpu = time.process_time() - t0
    out: dict = {
        "cpu": cpu,
        "findings": sum(len(r.diagnostics) for r in results),
        "notes": sum(len(getattr(r, "notes", ())) for r in results),
        "where": os.path.dirname(os.path.dirname(api.__file__)),
    }
    if mode == "calls":
        main.disable()
        stats = pstats.Stats(profiles[0])
        for profile in profiles[1:]:
            stats.add(profile)
        out["calls"] = sum(entry[1] for entry in stats.stats.values())  # type: ignore[attr-defined]
        # the work done, by the engine's own units (the same names in every layout since the first): statements
        # executed and expressions evaluated, counted as calls of `exec_stmt` and `eval`
        for unit, name in (("statements", "exec_stmt"), ("expressions", "eval")):
            out[unit] = sum(e[1] for (_, _, fn), e in stats.stats.items() if fn == name)  # type: ignore[attr-defined]
        if pstats_out:
            stats.dump_stats(pstats_out)
    return out


def run_child(root: str, mode: str, files: list[str], pstats_out: str | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=root, PYTHONHASHSEED="0")  # set orders fixed: the counts repeat
    spec = json.dumps({"mode": mode, "files": files, "pstats": pstats_out})
    done = subprocess.run(
        [sys.executable, __file__, "--child"], input=spec, env=env, capture_output=True, text=True, cwd=root
    )
    if done.returncode != 0:
        raise SystemExit(f"child failed in {root}:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if os.path.realpath(result["where"]) != os.path.realpath(root):
        raise SystemExit(f"the child imported spmdcheck from {result['where']}, not {root}")
    return result


def main() -> int:
    if sys.argv[1:] == ["--child"]:
        spec = json.loads(sys.stdin.read())
        print(json.dumps(_child(spec["mode"], spec["files"], spec["pstats"])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", action="append", help="megatron-core, torch-distributed or a folder (repeatable)")
    ap.add_argument("--spmdcheck-root", action="append", help="a checkout to measure (repeatable; default .)")
    ap.add_argument(
        "--folder", action="append", default=[], help="only this top-level folder (repeatable; `*`: the whole corpus)"
    )
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per checkout and folder (median)")
    ap.add_argument("--no-cpu", action="store_true", help="call counts only")
    ap.add_argument("--no-calls", action="store_true", help="CPU times only")
    ap.add_argument("--pstats", help="write each profile into this folder")
    args = ap.parse_args()
    roots = [os.path.abspath(r) for r in (args.spmdcheck_root or ["."])]
    labels = [pathlib.Path(r).name or r for r in roots]
    if args.pstats:
        os.makedirs(args.pstats, exist_ok=True)
    header = ["corpus", "folder", "files"]
    for label in labels:
        header += [f"calls {label}"] * (not args.no_calls) + [f"cpu {label}"] * (not args.no_cpu)
    if len(roots) == 2:
        header += ["calls ratio"] * (not args.no_calls) + ["cpu ratio"] * (not args.no_cpu)
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    totals = {label: [0, 0.0] for label in labels}
    work = {label: [0, 0] for label in labels}  # statements executed, expressions evaluated
    for corpus in args.corpus or ["megatron-core", "torch-distributed"]:
        for folder, files in folders_of(corpus_dir(corpus), args.folder).items():
            calls: dict[str, int] = {}
            cpus: dict[str, list[float]] = {label: [] for label in labels}
            if not args.no_calls:
                for root, label in zip(roots, labels):
                    out = None
                    if args.pstats:
                        name = {".": "top", "*": "all"}.get(folder, folder)
                        out = os.path.join(args.pstats, f"{label}-{corpus}-{name}.pstats")
                    result = run_child(root, "calls", files, out)
                    calls[label] = result["calls"]
                    work[label][0] += result["statements"]
                    work[label][1] += result["expressions"]
                    if result["notes"]:
                        print(f"note: {label} {folder}: {result['notes']} file notes (over budget?)", file=sys.stderr)
            if not args.no_cpu:
                for _ in range(args.repeat):  # the checkouts alternate: the machine's load falls on both alike
                    for root, label in zip(roots, labels):
                        cpus[label].append(run_child(root, "cpu", files)["cpu"])
            row = [corpus, folder, str(len(files))]
            for label in labels:
                if not args.no_calls:
                    row.append(f"{calls[label]:,}")
                    totals[label][0] += calls[label]
                if not args.no_cpu:
                    median = statistics.median(cpus[label])
                    row.append(f"{median:.2f}")
                    totals[label][1] += median
            if len(roots) == 2:
                first, second = labels
                if not args.no_calls:
                    row.append(f"{calls[second] / max(calls[first], 1):.3f}")
                if not args.no_cpu:
                    ratio = statistics.median(cpus[second]) / max(statistics.median(cpus[first]), 1e-9)
                    row.append(f"{ratio:.3f}")
            print("| " + " | ".join(row) + " |", flush=True)
    row = ["all", "", ""]
    for label in labels:
        row += [f"{totals[label][0]:,}"] * (not args.no_calls) + [f"{totals[label][1]:.2f}"] * (not args.no_cpu)
    if len(roots) == 2:
        first, second = labels
        if not args.no_calls:
            row.append(f"{totals[second][0] / max(totals[first][0], 1):.3f}")
        if not args.no_cpu:
            row.append(f"{totals[second][1] / max(totals[first][1], 1e-9):.3f}")
    print("| " + " | ".join(row) + " |")
    if not args.no_calls:
        _print_work(labels, work, totals, not args.no_cpu)
    return 0


def _print_work(labels: list[str], work: dict[str, list[int]], totals: dict[str, list], cpu: bool) -> None:
    """The work each checkout did and its cost per unit: a checkout that executes more code (a feature that
    follows more calls) takes longer for that reason alone; per statement, the engines compare like with like."""
    print("\n| checkout | statements executed | expressions evaluated |" + " CPU s per 1k statements |" * cpu)
    print("|---|---|---|" + "---|" * cpu)
    first = labels[0]
    for label in labels:
        statements, expressions = work[label]
        row = [label, f"{statements:,}", f"{expressions:,}"]
        if cpu:
            row.append(f"{1000 * totals[label][1] / max(statements, 1):.4f}")
        if label != first:
            row[1] += f" ({statements / max(work[first][0], 1):.3f}x)"
            row[2] += f" ({expressions / max(work[first][1], 1):.3f}x)"
            if cpu:
                per = totals[label][1] / max(statements, 1)
                row[3] += f" ({per / max(totals[first][1] / max(work[first][0], 1), 1e-12):.3f}x)"
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    raise SystemExit(main())

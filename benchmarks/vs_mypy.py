"""Benchmark: spmdcheck against mypy as its users run it, cold against cold and warm against warm, interleaved.

    python benchmarks/vs_mypy.py [TREE] [--jobs N] [--repeat K] [--spmdcheck-root DIR ...]

TREE is a folder, or `torch-distributed` (the default: the installed torch's `torch/distributed`), or
`megatron-core` (megatron-core 0.16.1's `megatron/core`, from the real-code corpus cache of
tests/realcode/corpus.py, downloaded with `pip download` if missing). mypy must be installed
(`pip install mypy`) unless `--no-mypy`.

What is compared (the exact commands are printed with the results):

* mypy as a project that type-checks this code without its dependencies runs it:
  `python -m mypy --follow-imports=skip --ignore-missing-imports TREE`. Cold, with no incremental cache
  read or written (`--cache-dir=/dev/null`); warm, with its default `.mypy_cache/`.
* spmdcheck: `python -m spmdcheck check TREE --output-format json --no-respect-gitignore --jobs N`. Cold
  with `--no-cache` (reads and writes no result cache); warm with its `.spmdcheck_cache/`.
* The parsers' floors for reference: libcst's and CPython's `ast` parse of every file of the tree, one
  process.

Cold rows run on the unchanged tree. Warm rows come after an untimed warm-up (each tool's cache filled,
bytecode compiled) and run in groups: the tree unchanged, then after a one-line edit applied to the tree
(a comment appended to a median-size module; a comment appended to, a statement appended to, and a
statement inserted in a function of, a *checked file*: the median-size file of the largest program
spmdcheck forms). Edits accumulate as a user's do, and every tool's warm run sees each edit once.

Within each repetition the tools alternate (their order rotates from one repetition to the next), so
machine load falls on all of them alike. Every tool has its own copy of the tree in its own folder (the
caches never meet). Each row is a fresh command (interpreter start-up included), timed for wall clock and
for CPU: user+sys of the command and every process it waited for (`os.wait4`: spmdcheck's workers
included). Printed: median (min-max) of K, and each row's ratios to the mypy row of its group.

Two checkouts of spmdcheck side by side (e.g. before and after a refactor), in one interleaved run with
mypy and the parsers: `--spmdcheck-root OLD --spmdcheck-root NEW`, each run with PYTHONPATH=that folder
(an old commit without touching any worktree: `git archive COMMIT | tar -x -C /tmp/old`). Each checkout
then also gets its ratios to the first one. Without `--spmdcheck-root`, the checkout holding this script.

This is a measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import ast
import os
import pathlib
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench import default_root  # the same default tree as bench.py (run as scripts: their folder is on sys.path)

CHECKOUT = pathlib.Path(__file__).resolve().parent.parent

_PARSE = """
import sys, pathlib
import {module}
for path in pathlib.Path(sys.argv[1]).read_text().splitlines():
    try:
        {call}(pathlib.Path(path).read_bytes())
    except Exception:
        pass
"""

# The median-size file of the largest program the checkout's own planning forms, printed relative to the tree;
# nothing printed when this checkout's planning API differs (the caller falls back to a median module).
_CHECKED_FILE = """
import pathlib, sys
files = pathlib.Path(sys.argv[1]).read_text().splitlines()
try:
    try:  # the driver laid out by layer
        from spmdcheck.engine.plan import plan_programs
        from spmdcheck.settings import Settings
    except ImportError:  # checkouts before it
        from spmdcheck.api import Settings, plan_programs
    _, programs = plan_programs(files, Settings())
except Exception:
    sys.exit(0)
largest = max(programs, key=lambda p: sum(len(f.text) for f in p), default=[])
members = sorted((f.path for f in largest), key=lambda f: pathlib.Path(f).stat().st_size)
if members:
    print(pathlib.Path(members[len(members) // 2]).resolve().relative_to(pathlib.Path(sys.argv[2]).resolve()))
"""

MYPY = ["-m", "mypy", "--follow-imports=skip", "--ignore-missing-imports"]
MYPY_COLD = [*MYPY, "--cache-dir=/dev/null"]  # mypy's documented way to neither read nor write its cache


@dataclass
class Tool:
    """One command line, run in its own folder on its own copy of the tree."""

    label: str
    argv: list[str]
    cwd: pathlib.Path
    env: dict[str, str]
    kind: str  # "spmdcheck", "mypy" or "parse": what its ratios are taken against
    runs: list[tuple[float, float]] = field(default_factory=list)  # (wall, cpu) seconds

    def shown(self, tree: str) -> str:
        """The command as a user would type it in the tool's folder, its copy of the tree named TREE."""
        return " ".join("TREE" if a == tree else shlex.quote(a) for a in ["python", *self.argv[1:]])


@dataclass
class Group:
    """Tools timed one after another after one change of the tree (or none)."""

    title: str
    tools: list[Tool]
    edit: Callable[[], None] | None = None


def resolve_tree(name: str | None) -> pathlib.Path:
    if name in (None, "torch-distributed"):
        return pathlib.Path(default_root()).resolve()
    if name == "megatron-core":
        sys.path.insert(0, str(CHECKOUT / "tests" / "realcode"))
        import corpus  # tests/realcode/corpus.py: the pinned release, fetched with `pip download` if missing

        megatron = next(c for c in corpus.CORPORA if c.name == "megatron")
        return corpus.ensure(megatron).resolve() / "core"
    return pathlib.Path(name).resolve()


def checkout_label(root: pathlib.Path, taken: set[str]) -> str:
    """`spmdcheck@<commit>` (`+dirty` when its spmdcheck/ has uncommitted changes), else the folder's name."""
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0 and head.stdout.strip():
        name = head.stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "spmdcheck"], capture_output=True, text=True
        )
        name += "+dirty" if dirty.stdout.strip() else ""
    else:
        name = root.name
    label, n = f"spmdcheck@{name}", 2
    while label in taken:
        label, n = f"spmdcheck@{name}#{n}", n + 1
    taken.add(label)
    return label


def checkout_env(root: pathlib.Path, base: dict[str, str], cwd: pathlib.Path) -> dict[str, str]:
    """The environment that runs `root`'s spmdcheck; refuses a root whose package another one shadows (asked
    from `cwd`, a folder with no package of its own: `python -c` and `-m` put the working folder first)."""
    env = {**base, "PYTHONPATH": str(root)}
    where = subprocess.run(
        [sys.executable, "-c", "import spmdcheck, os; print(os.path.dirname(spmdcheck.__file__))"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    found = where.stdout.strip()
    if where.returncode != 0 or pathlib.Path(found).resolve() != (root / "spmdcheck").resolve():
        sys.exit(f"vs_mypy: with PYTHONPATH={root}, spmdcheck is imported from {found or where.stderr.strip()}")
    return env


def run_timed(tool: Tool) -> tuple[float, float]:
    """(wall, cpu) of one run; cpu is user+sys of the command and of every process it waited for."""
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: read after the exit, it can never fill and stall
        t0 = time.perf_counter()
        proc = subprocess.Popen(tool.argv, cwd=tool.cwd, env=tool.env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read()[-4000:].decode(errors="replace").strip()
    if proc.returncode not in (0, 1):  # 0 clean, 1 findings; anything else did not do the work being timed
        sys.exit(f"vs_mypy: `{shlex.join(tool.argv)}` ({tool.label}) in {tool.cwd} exited {proc.returncode}:\n{tail}")
    return wall, usage.ru_utime + usage.ru_stime


def one_line_edits(trees: list[pathlib.Path], median: str, checked: str) -> list[tuple[str, Callable[[], None]]]:
    """The warm groups' edits, each applied alike to every tool's copy (relative paths `median`, `checked`)."""
    counter = iter(range(10**9))

    def rewrite(rel: str, change: Callable[[str], str]) -> Callable[[], None]:
        def edit() -> None:
            text = change((trees[0] / rel).read_text(encoding="utf-8"))
            for tree in trees:
                (tree / rel).write_text(text, encoding="utf-8")

        return edit

    def in_body(text: str) -> str:
        """A statement inserted before the last statement of the file's first function with a body of its own
        lines (what most edits are: inside a function), a different one each time."""
        fn = next(
            (
                n
                for n in ast.walk(ast.parse(text))
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.body[0].lineno > n.lineno
            ),
            None,
        )
        if fn is None:
            return text + f"_edit = {next(counter)}\n"
        lines = text.splitlines(keepends=True)
        at = fn.body[-1].lineno - 1
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        return "".join([*lines[:at], f"{indent}_edit = {next(counter)}\n", *lines[at:]])

    return [
        ("warm, a comment appended to a median file", rewrite(median, lambda t: t + f"# edit {next(counter)}\n")),
        ("warm, a comment appended to a checked file", rewrite(checked, lambda t: t + f"# edit {next(counter)}\n")),
        ("warm, a statement appended to a checked file", rewrite(checked, lambda t: t + f"_edit = {next(counter)}\n")),
        ("warm, a statement inserted in a function of a checked file", rewrite(checked, in_body)),
    ]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} ({min(values):.2f}-{max(values):.2f})"


def report(groups: list[Group]) -> None:
    """Per group: each tool's wall and CPU, median (min-max), with ratios to the group's mypy row and, for a
    second checkout, to the first."""
    width = max(len(t.label) for group in groups for t in group.tools)
    for group in groups:
        rows = [t for t in group.tools if t.runs]
        mypy = next((t for t in rows if t.kind == "mypy"), None)
        first = next((t for t in rows if t.kind == "spmdcheck"), None)
        print(f"\n{group.title}")
        heads = f"{'wall s med (min-max)':>22} {'cpu s med (min-max)':>22} {'wall/mypy':>9} {'cpu/mypy':>8}"
        print(f"  {'':<{width}} {heads}")
        for tool in rows:
            wall = [w for w, _ in tool.runs]
            cpu = [c for _, c in tool.runs]
            line = f"  {tool.label:<{width}} {spread(wall):>22} {spread(cpu):>22}"
            if mypy is not None and tool is not mypy:
                line += f" {statistics.median(wall) / statistics.median(w for w, _ in mypy.runs):9.2f}"
                line += f" {statistics.median(cpu) / statistics.median(c for _, c in mypy.runs):8.2f}"
            if first is not None and tool.kind == "spmdcheck" and tool is not first:
                first_wall = statistics.median(w for w, _ in first.runs)
                first_cpu = statistics.median(c for _, c in first.runs)
                line += f"   vs {first.label}: wall {statistics.median(wall) / first_wall:.3f}"
                line += f" cpu {statistics.median(cpu) / first_cpu:.3f}"
            print(line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", nargs="?", help="a folder, `torch-distributed` (default) or `megatron-core`")
    ap.add_argument("--jobs", type=int, default=2, help="spmdcheck --jobs (default 2)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs of every row (default 5)")
    ap.add_argument(
        "--spmdcheck-root",
        action="append",
        type=pathlib.Path,
        help="a checkout of spmdcheck to time (PYTHONPATH=it); repeat to compare checkouts in one run",
    )
    ap.add_argument("--no-mypy", action="store_true", help="leave mypy out")
    ap.add_argument("--no-warm", action="store_true", help="cold rows only")
    ap.add_argument("--checked-file", help="the file the checked-file edits change, relative to the tree")
    args = ap.parse_args()

    source = resolve_tree(args.tree)
    roots = [r.resolve() for r in (args.spmdcheck_root or [CHECKOUT])]
    base = dict(os.environ)
    for name in ("SPMDCHECK_NO_CACHE", "SPMDCHECK_NO_PREPASS", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "MYPYPATH"):
        base.pop(name, None)  # as on a user's machine: bytecode cached, the cache and the pre-pass on
    work = pathlib.Path(tempfile.mkdtemp(prefix="spmdcheck-vs-mypy-"))
    try:
        return measure(args, source, roots, base, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(
    args: argparse.Namespace, source: pathlib.Path, roots: list[pathlib.Path], base: dict[str, str], work: pathlib.Path
) -> int:
    py = sys.executable
    taken: set[str] = set()
    checkouts = [(checkout_label(root, taken), checkout_env(root, base, work)) for root in roots]
    slots = [f"spmdcheck-{i}" for i in range(len(roots))] + ([] if args.no_mypy else ["mypy"])
    trees = []
    for slot in slots:  # one copy per tool, each in a folder of its own: the caches never meet
        (work / slot).mkdir()
        trees.append(work / slot / source.name)
        shutil.copytree(source, trees[-1], ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    files = sorted(str(p) for p in trees[0].rglob("*.py"))
    listing = work / "files.txt"
    listing.write_text("\n".join(files))
    lines = sum(pathlib.Path(f).read_bytes().count(b"\n") for f in files)
    modules = [f for f in files if not f.endswith("__init__.py")]
    median = os.path.relpath(sorted(modules, key=lambda f: pathlib.Path(f).stat().st_size)[len(modules) // 2], trees[0])
    checked, how = args.checked_file, "given"
    if checked is None:
        found = subprocess.run(
            [py, "-c", _CHECKED_FILE, str(listing), str(trees[0])],
            cwd=work,
            env=checkouts[0][1],
            capture_output=True,
            text=True,
        ).stdout.strip()
        # a checkout whose planning API differs cannot be asked: the median file (--checked-file pins one)
        checked, how = (found, f"planned by {checkouts[0][0]}") if found else (median, "the median file")
    check = ["check", source.name, "--output-format", "json", "--no-respect-gitignore", "--jobs", str(args.jobs)]

    cold: list[Tool] = []
    warm: list[Tool] = []
    for i, (label, env) in enumerate(checkouts):
        where = work / slots[i]
        cold.append(Tool(f"{label} --no-cache", [py, "-m", "spmdcheck", *check, "--no-cache"], where, env, "spmdcheck"))
        warm.append(Tool(f"{label}", [py, "-m", "spmdcheck", *check], where, env, "spmdcheck"))
    if not args.no_mypy:
        where = work / "mypy"
        cold.append(Tool("mypy, no cache", [py, *MYPY_COLD, source.name], where, base, "mypy"))
        warm.append(Tool("mypy, incremental cache", [py, *MYPY, source.name], where, base, "mypy"))
    for module, call in (("libcst", "libcst.parse_module"), ("ast", "ast.parse")):
        argv = [py, "-c", _PARSE.format(module=module, call=call), str(listing)]
        cold.append(Tool(f"{module} parse, 1 process", argv, work, base, "parse"))

    groups = [Group("cold (no cache read or written)", cold)]
    if not args.no_warm:
        groups.append(Group("warm, the tree unchanged", [Tool(t.label, t.argv, t.cwd, t.env, t.kind) for t in warm]))
        for title, edit in one_line_edits(trees, median, checked):
            groups.append(Group(title, [Tool(t.label, t.argv, t.cwd, t.env, t.kind) for t in warm], edit))

    load_before = os.getloadavg()
    for tool in [*cold, *([] if args.no_warm else warm)]:  # untimed: bytecode compiled, the caches filled
        run_timed(tool)
    originals = {rel: (trees[0] / rel).read_bytes() for rel in {median, checked}}
    try:
        for rep in range(args.repeat):
            print(f"vs_mypy: repetition {rep + 1} of {args.repeat}", file=sys.stderr, flush=True)
            for group in groups:
                if group.edit is not None:
                    group.edit()
                turn = rep % len(group.tools)  # rotate who goes first: every tool takes every place in turn
                for tool in group.tools[turn:] + group.tools[:turn]:
                    tool.runs.append(run_timed(tool))
    finally:
        for rel, data in originals.items():
            for tree in trees:
                (tree / rel).write_bytes(data)

    print(
        f"tree: {source} ({len(files)} files, {lines} lines); {os.cpu_count()} cores; spmdcheck --jobs {args.jobs}; "
        f"median (min-max) of {args.repeat}, tools interleaved; load average {load_before[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after"
    )
    print(f"median file: {median}; checked file: {checked} ({how})")
    print("commands (each in its tool's folder, TREE its copy of the tree):")
    for tool in [*cold, *([] if args.no_warm else warm)]:
        if tool.kind != "parse":
            pythonpath = f"PYTHONPATH={tool.env['PYTHONPATH']} " if tool.kind == "spmdcheck" else ""
            print(f"  {tool.label}: {pythonpath}{tool.shown(source.name)}")
    report(groups)
    return 0


if __name__ == "__main__":
    sys.exit(main())

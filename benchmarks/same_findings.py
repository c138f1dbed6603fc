"""Do two versions of spmdcheck find the same things? Record the outputs of one, compare another's.

    python benchmarks/same_findings.py record DIR [--deep] [--only NAME]
    python benchmarks/same_findings.py compare DIR [--deep] [--only NAME]

For a speed change that must not change a single finding. Recorded, each as one file in DIR:
- `spmdcheck check TREE --output-format json --no-cache` on the real-code corpus of tests/test_real_code.py
  (torchtitan, megatron-core, fairscale, downloaded into its cache if missing) and on the installed
  torch's `torch/distributed`, each with no configuration, with the corpus's mesh axes, and with the
  mesh plus `--strict --preview` (more rules speak);
- the same command on fixtures/ (the fixtures name their meshes), plain and with `--strict --preview`;
- every fixture file checked on its own (`api.check_source`, as tests/test_fixtures.py does);
- with `--deep`, for every corpus with its mesh: every name binding the analysis gives a value other
  than unknown (path, line, column, name, forward and gradient types), the observer `--show-types`
  uses, run in-process through the command's own planning (the pre-pass included). Real code yields
  few findings; the bindings show whether anything the checker knows moved.

`compare` runs the same commands with the code in the current folder and prints every output that
differs (a unified diff, truncated); the exit status is 1 when one does. A measurement tool, not a test.
"""

from __future__ import annotations

import argparse
import difflib
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "realcode"))

import corpus  # noqa: E402

TORCH_MESH = ("dp", "tp", "pp")  # the axes a user of torch.distributed's own parallel styles would name


def _torch_distributed() -> pathlib.Path:
    out = subprocess.run(
        [sys.executable, "-c", "import torch.distributed, os; print(os.path.dirname(torch.distributed.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return pathlib.Path(out.stdout.strip())


def _neutral_folder() -> pathlib.Path:
    """Where the corpus commands run: not a package folder (`python -m` puts the working folder first on
    sys.path, and torch's own folder holds a `signal` package), and the same in every run."""
    folder = pathlib.Path(tempfile.gettempdir()) / "spmdcheck-same-findings"
    folder.mkdir(exist_ok=True)
    return folder


def trees() -> list[tuple[str, pathlib.Path, tuple[str, ...]]]:
    found = [(c.name, corpus.ensure(c), c.mesh) for c in corpus.CORPORA]
    return [*found, ("torch_distributed", _torch_distributed(), TORCH_MESH)]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    for name in ("SPMDCHECK_NO_PREPASS", "SPMDCHECK_NO_CACHE"):
        env.pop(name, None)
    return env


def _cli(args: list[str], cwd: pathlib.Path) -> str:
    cmd = [sys.executable, "-m", "spmdcheck", "check", *args, "--output-format", "json", "--no-cache"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=_env(), timeout=1800)
    return f"exit {proc.returncode}\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def _per_fixture() -> str:
    code = (
        "import json, pathlib, sys\n"
        "from spmdcheck.api import Settings, check_source, load_registry\n"
        "root = pathlib.Path(sys.argv[1])\n"
        "registry = load_registry(())\n"
        "for p in sorted(root.rglob('*.py')):\n"
        "    if '__pycache__' in p.parts: continue\n"
        "    for d in check_source(p.read_text(encoding='utf-8'), str(p.relative_to(root)), Settings(), registry):\n"
        "        print(json.dumps([d.path, d.line, d.column, d.code, d.severity, d.message]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "fixtures")], capture_output=True, text=True, env=_env(), timeout=1800
    )
    return f"exit {proc.returncode}\n{proc.stdout}\n--- stderr\n{proc.stderr[-3000:]}"


_DEEP = """
import json, pathlib, sys
sys.setrecursionlimit(20000)
from spmdcheck.analysis import program
from spmdcheck.engine.analyse import check_program
from spmdcheck.engine.plan import plan_programs
from spmdcheck.rules.registry import load_registry
from spmdcheck.settings import Settings
from spmdcheck.analysis.reveal import view_of
from spmdcheck.analysis.values import Unknown
from libcst.metadata import MetadataWrapper, PositionProvider

root, mesh = pathlib.Path(sys.argv[1]), tuple(a for a in sys.argv[2].split(",") if a)
settings = Settings(mesh=mesh)
seen = []

def observe(name, value, node, ctx):
    if not isinstance(value, Unknown):
        seen.append((ctx, node, name, value))

original = program.analyze_program
def watched(units, registry, graph=None, parse=None, on_bind=None, log=None):
    return original(units, registry, graph, parse, observe, log)

program.analyze_program = watched
paths = sorted(str(p) for p in root.rglob("*.py") if "__pycache__" not in p.parts)
registry = load_registry(settings.stub_path)
_, programs = plan_programs(paths, settings, registry)
out = set()
for files in programs:
    seen.clear()
    check_program(files, settings, registry)
    tables = {}
    for ctx, node, name, value in seen:
        if id(ctx.module) not in tables:
            tables[id(ctx.module)] = MetadataWrapper(ctx.module, unsafe_skip_copy=True).resolve(PositionProvider)
        pos = tables[id(ctx.module)].get(node)
        view = view_of(value, mesh)
        shown = (view.forward, view.gradient) if view is not None else (type(value).__name__,)
        if pos is not None:
            out.add(json.dumps([ctx.path, pos.start.line, pos.start.column, name, *shown]))
if not out:
    sys.exit("no binding was observed: the observer is not reaching the analysis")
print("\\n".join(sorted(out)))
"""


def _deep(tree: pathlib.Path, mesh: tuple[str, ...]) -> str:
    cmd = [sys.executable, "-c", _DEEP, str(tree), ",".join(mesh)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=3600)
    return f"exit {proc.returncode}\n{proc.stdout}\n--- stderr\n{proc.stderr[-3000:]}"


def outputs(deep: bool, only: str | None):  # noqa: ANN201
    """(name, thunk) for every recorded output."""
    jobs = [
        ("fixtures", lambda: _cli(["fixtures"], ROOT)),
        ("fixtures_strict_preview", lambda: _cli(["fixtures", "--strict", "--preview"], ROOT)),
        ("fixtures_each", _per_fixture),
    ]
    for name, tree, mesh in trees():
        axes = "mesh=[" + ",".join(f'"{a}"' for a in mesh) + "]"
        base = [str(tree), "--no-respect-gitignore", "--isolated"]
        configs = {
            "noconfig": [],
            "mesh": ["--config", axes],
            "mesh_strict_preview": ["--config", axes, "--strict", "--preview"],
        }
        for label, extra in configs.items():
            jobs.append((f"{name}_{label}", lambda args=[*base, *extra]: _cli(args, _neutral_folder())))
        if deep:
            jobs.append((f"{name}_deep", lambda tree=tree, mesh=mesh: _deep(tree, mesh)))
    return [(n, j) for n, j in jobs if only is None or only in n]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=["record", "compare"])
    ap.add_argument("folder")
    ap.add_argument("--deep", action="store_true")
    ap.add_argument("--only", help="only the outputs whose name contains this")
    args = ap.parse_args()
    folder = pathlib.Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    differ = 0
    for name, job in outputs(args.deep, args.only):
        got = job().replace(str(ROOT), "<spmdcheck>")  # shipped stubs' paths: the same in every checkout
        path = folder / f"{name}.txt"
        if args.action == "record":
            path.write_text(got)
            print(f"recorded {name}: {got.count(chr(10))} lines", flush=True)
            continue
        want = path.read_text() if path.exists() else "(not recorded)\n"
        if got == want:
            print(f"same     {name}", flush=True)
            continue
        differ += 1
        print(f"DIFFERS  {name}", flush=True)
        diff = list(difflib.unified_diff(want.splitlines(), got.splitlines(), "recorded", "now", lineterm="", n=1))
        print("\n".join(diff[:60]) + ("\n..." if len(diff) > 60 else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

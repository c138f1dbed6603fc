"""The layering promises (ARCHITECTURE.md), as tests that fail when one is broken.

- no import circle among spmdcheck's modules: an import at module level, inside a function or under
  TYPE_CHECKING counts alike (a deferred import hides a circle from the interpreter, not from a reader);
- no module over 700 lines and no function over 100: a module or function that grew past them is split;
- the command path stays light: `spmdcheck --help` and a run answered from the result cache import neither
  torch nor libcst (the uncached run's torch-free start-up is tests/test_real_code.py's).
"""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import pytest
from conftest import ROOT

PACKAGE = ROOT / "spmdcheck"
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 100

# ---------------------------------------------------------------- import circles

Graph = dict[str, dict[str, int]]  # module -> {module it imports: line of the (first) import}


def package_modules(package_dir: pathlib.Path) -> dict[str, pathlib.Path]:
    """Every module of the package at `package_dir`, by dotted name (a package by its own name)."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_names(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement in `module` may load: for `from M import x`, M and M.x (x may
    be a submodule); a relative import resolved against the module's package."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        anchor = package[: len(package) - (node.level - 1)]
        base = ".".join(anchor + ([node.module] if node.module else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def import_graph(package_dir: pathlib.Path) -> Graph:
    """Which module of the package imports which, wherever in the module the import is written."""
    modules = package_modules(package_dir)
    graph: Graph = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in imported_names(node, name, path.name == "__init__.py"):
                if target in modules and target != name:
                    edges.setdefault(target, node.lineno)
    return graph


def find_cycle(graph: Graph) -> list[str] | None:
    """One import circle (its modules, the first repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(module: str) -> list[str] | None:
        path.append(module)
        on_path.add(module)
        for target in sorted(graph.get(module, {})):
            if target in on_path:
                return path[path.index(target) :] + [target]
            if target not in done:
                found = visit(target)
                if found is not None:
                    return found
        path.pop()
        on_path.discard(module)
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done:
            found = visit(module)
            if found is not None:
                return found
    return None


def describe_cycle(graph: Graph, cycle: list[str]) -> str:
    """`a (line 3) -> b (line 40) -> a`: each module with the line of its import of the next."""
    steps = [f"{module} (line {graph[module][target]})" for module, target in zip(cycle, cycle[1:])]
    return " -> ".join(steps + [cycle[-1]])


def test_no_import_circle_among_spmdchecks_modules():
    graph = import_graph(PACKAGE)
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + describe_cycle(graph, cycle)


def test_the_import_graph_covers_the_package():
    graph = import_graph(PACKAGE)
    # every module is a node, and the graph has the package's edges (an empty walk would find no circle)
    assert set(graph) == set(package_modules(PACKAGE))
    assert len(graph) > 100
    assert sum(len(edges) for edges in graph.values()) > 300


def _write_package(root: pathlib.Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    "files,cycle",
    [
        pytest.param(  # one side's import deferred into a function
            {"pkg/__init__.py": "", "pkg/a.py": "from pkg import b\n", "pkg/b.py": "def f():\n    from . import a\n"},
            ["pkg.a", "pkg.b", "pkg.a"],
            id="in-function",
        ),
        pytest.param(  # one side's import only for the type checker
            {
                "pkg/__init__.py": "",
                "pkg/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .y import Y\n",
                "pkg/y.py": "from pkg.x import X\n",
            },
            ["pkg.x", "pkg.y", "pkg.x"],
            id="type-checking",
        ),
        pytest.param(  # a relative import two levels up, and one of a package's __init__
            {
                "pkg/__init__.py": "from pkg.sub import m\n",
                "pkg/sub/__init__.py": "",
                "pkg/sub/m.py": "from ..n import thing\n",
                "pkg/n.py": "import pkg\nthing = 1\n",
            },
            ["pkg", "pkg.sub.m", "pkg.n", "pkg"],
            id="relative-and-package",
        ),
        pytest.param(
            {"pkg/__init__.py": "", "pkg/a.py": "from pkg import b\n", "pkg/b.py": "import os\nfrom . import c\n"},
            None,
            id="no-circle",
        ),
    ],
)
def test_the_circle_check_sees_every_kind_of_import(tmp_path, files, cycle):
    _write_package(tmp_path, files)
    graph = import_graph(tmp_path / "pkg")
    found = find_cycle(graph)
    assert found == cycle
    if cycle is not None:
        assert describe_cycle(graph, found).startswith(f"{cycle[0]} (line ")


# ---------------------------------------------------------------- sizes


def long_functions(source: str, limit: int) -> list[tuple[str, int, int]]:
    """(name, line, length) of each function (or method, or nested function) over `limit` lines."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                out.append((node.name, node.lineno, length))
    return out


def _modules() -> list[pathlib.Path]:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100
    return modules


def test_no_module_over_700_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines (split them): {long}"


def test_no_function_over_100_lines():
    long = [
        f"{p.relative_to(ROOT)}:{line} {name} ({length} lines)"
        for p in _modules()
        for name, line, length in long_functions(p.read_text(encoding="utf-8"), MAX_FUNCTION_LINES)
    ]
    assert long == [], f"functions over {MAX_FUNCTION_LINES} lines (split them): {long}"


def test_the_function_check_measures_methods_and_nested_functions():
    source = (
        "class C:\n"  # 1
        "    def method(self):\n"  # 2: lines 2-4
        "        a = 1\n"
        "        return a\n"
        "def outer():\n"  # 5: lines 5-10
        "    def inner():\n"  # 6: lines 6-8
        "        b = 2\n"
        "        return b\n"
        "    c = inner()\n"
        "    return c\n"
    )
    assert sorted(long_functions(source, 2)) == [("inner", 6, 3), ("method", 2, 3), ("outer", 5, 6)]
    assert long_functions(source, 5) == [("outer", 5, 6)]
    assert long_functions(source, 6) == []


# ---------------------------------------------------------------- the command path's imports


def _imported(args: list[str], cwd: pathlib.Path, env: dict[str, str] | None = None) -> tuple[set[str], str, str]:
    """The modules `python -m spmdcheck ARGS` imports (`-X importtime`), with its output and its stderr."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "spmdcheck", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env or dict(os.environ),
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    imported = {line.split("|")[-1].strip() for line in lines if line.startswith("import time:")}
    others = "\n".join(line for line in lines if not line.startswith("import time:"))
    return imported, proc.stdout, others


def _heavy(imported: set[str]) -> set[str]:
    return {m for m in imported if m.split(".")[0] in ("torch", "libcst")}


def test_help_imports_neither_torch_nor_libcst(tmp_path):
    imported, out, _ = _imported(["--help"], tmp_path)
    assert "check" in out and "spmdcheck.cli" in imported
    assert _heavy(imported) == set()


def test_a_cached_run_imports_neither_torch_nor_libcst(tmp_path):
    (tmp_path / "m.py").write_text(
        "import torch\nimport spmd_types as spmd\n"
        "x = spmd.assert_type(torch.randn(2), {'tp': spmd.V})\n"
        "y = spmd.all_reduce(x, 'tp', src=spmd.R, dst=spmd.R)\n",
        encoding="utf-8",
    )
    # the trace says how each program was answered; the result cache must be on (the test may run with it off)
    trace = {k: v for k, v in os.environ.items() if k != "SPMDCHECK_NO_CACHE"} | {"SPMDCHECK_TRACE": "1"}
    first, first_out, first_trace = _imported(["check", "m.py"], tmp_path, trace)
    assert "libcst" in first and "spmdcheck-trace: whole program" in first_trace  # the first run analyses
    cached, cached_out, cached_trace = _imported(["check", "m.py"], tmp_path, trace)
    assert "spmdcheck-trace" not in cached_trace, cached_trace  # the second is answered from the cache
    assert cached_out == first_out and "SPMD303" in cached_out
    assert _heavy(cached) == set()

"""The annotation spellings the docs lead with are accepted, unchanged, by the other checkers people run on
the same code (mypy, pyright, ruff with `F`), and spmdcheck reads them as it reads the older `Local["..."]`.

mypy, ruff and pyright are run on every `python` example of the pages that teach annotations and on every
fixture (pyright when it can run here: its PyPI wrapper, a test extra, fetches the pyright package from npm on
first use; without it those tests skip). Each tool runs once over all the files of a test.
"""

from __future__ import annotations

import ast
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import pytest
from conftest import ROOT

from spmdcheck.engine.check import check_source
from spmdcheck.settings import Settings

# the pages that teach how to annotate, and the rule page whose example is annotated
PAGES = [
    ROOT / "docs" / "getting-started.md",
    ROOT / "docs" / "annotations.md",
    ROOT / "docs" / "stubs.md",
    ROOT / "spmdcheck" / "diagnostics" / "pages" / "SPMD901.md",
]
FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)

# every spelling the annotation reference documents as accepted by the other checkers
SPELLINGS = """\
from typing import Annotated

from spmd_types import R, S
from torch import Tensor

from spmdcheck.annotations import Local


def call_form(x: Annotated[Tensor, Local("tp: S(0), dp: R")]) -> Annotated[Tensor, Local("tp: I")]:
    y: Annotated[Tensor, Local("tp: S(0)")] = x
    return y


def dict_form(x: Annotated[Tensor, {"tp": S(0), "dp": R}]) -> Annotated[Tensor, {"tp": R}]:
    return x


def string_form(x: Annotated[Tensor, "tp: S(0), dp: R"]) -> Annotated[Tensor, "tp: I"]:
    return x


def returns_a_tuple(
    x: Annotated[Tensor, Local("tp: S(0)")],
) -> tuple[Annotated[Tensor, Local("tp: S(0)")], Annotated[Tensor, Local("tp: S(0)")]]:
    return x, x
"""

# the older short spelling, still read by spmdcheck, rejected by the others (the harness must see that)
OLD_SPELLING = """\
from spmdcheck.annotations import Local


def short_form(x: Local["tp: I"]) -> Local["tp: I"]:
    return x
"""


def annotated_examples() -> dict[str, str]:
    """Every `python` block of the pages that uses an SPMD annotation, by a file name of its own."""
    out = {}
    for page in PAGES:
        for n, m in enumerate(FENCE.finditer(page.read_text(encoding="utf-8"))):
            info, body = m.group(1), m.group(2)
            if "spmdcheck.annotations" in body or "Annotated[" in body:
                # a stub file (named so, or of bodies `...`) is checked as one
                stub = ".pyi" in info or re.search(r"^\s*def .*: \.\.\.$", body, re.MULTILINE)
                suffix = ".pyi" if stub else ".py"
                out[f"{page.stem.replace('-', '_').lower()}_{n}{suffix}"] = body
    return out


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spellings")
    files = {**annotated_examples(), "spellings.py": SPELLINGS}
    for name, body in files.items():
        (folder / name).write_text(body, encoding="utf-8")
    (folder / "old" / "short_form.py").parent.mkdir()
    (folder / "old" / "short_form.py").write_text(OLD_SPELLING, encoding="utf-8")
    return folder, sorted(files)


def _run(cmd: list[str], cwd, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_the_pages_lead_with_the_spelling_the_other_checkers_accept():
    examples = annotated_examples()
    assert any(name.startswith("getting_started") for name in examples)
    assert any(name.startswith("annotations") for name in examples)
    for name, body in examples.items():
        assert not re.search(r"\bLocal\[", body), f"{name}: an example spelled with Local[...]"


def test_ruff_f_accepts_every_documented_spelling(examples):
    folder, files = examples
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    proc = _run([ruff, "check", "--isolated", "--select", "F", "--output-format", "concise", *files], folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    old = _run([ruff, "check", "--isolated", "--select", "F", "old/short_form.py"], folder)
    assert "F722" in old.stdout  # the harness sees what ruff rejects


def _mypy_config(folder) -> str:
    config = folder / "mypy.ini"
    # torch is analysed as Any (following it would take a minute); spmdcheck is read from this checkout
    config.write_text(
        f"[mypy]\nmypy_path = {ROOT}\nignore_missing_imports = True\ncache_dir = {folder / '.mypy_cache'}\n"
        "[mypy-torch.*]\nfollow_imports = skip\n",
        encoding="utf-8",
    )
    return str(config)


def test_mypy_accepts_every_documented_spelling(examples):
    folder, files = examples
    pytest.importorskip("mypy")
    config = _mypy_config(folder)
    proc = _run([sys.executable, "-m", "mypy", "--config-file", config, *files], folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    old = _run([sys.executable, "-m", "mypy", "--config-file", config, "old/short_form.py"], folder)
    assert "is not valid as a type" in old.stdout, old.stdout  # it reads spmdcheck.annotations


def _pyright(folder) -> str:
    """The pyright command, with a pyrightconfig.json written in `folder` (the checked files are under it)."""
    pyright = shutil.which("pyright")
    if pyright is None:
        pytest.skip("pyright is not installed (pip install pyright)")
    try:
        version = _run([pyright, "--version"], folder, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.skip("pyright could not start (its wrapper downloads node and pyright on first use)")
    if version.returncode != 0:
        pytest.skip(f"pyright could not start: {version.stderr.strip()[:200]}")
    config = {
        "extraPaths": [str(ROOT)],
        "reportMissingImports": False,
        "reportMissingModuleSource": False,
        # spmd_types 0.3.1 declares no __all__: pyright calls `from spmd_types import R` a private import
        "reportPrivateImportUsage": False,
    }
    (folder / "pyrightconfig.json").write_text(json.dumps(config), encoding="utf-8")
    return pyright


def test_pyright_accepts_every_documented_spelling(examples):
    folder, files = examples
    pyright = _pyright(folder)
    proc = _run([pyright, *files, "old/short_form.py"], folder)
    by_file: dict[str, list[str]] = {}
    for line in proc.stdout.replace(f"{folder}/", "").splitlines():
        m = re.match(r"\s+(\S+\.pyi?):\d+:\d+ - error: (.*)", line)
        if m:
            by_file.setdefault(m.group(1), []).append(m.group(2))
    assert any("not defined" in e for e in by_file.pop("old/short_form.py", [])), proc.stdout  # the harness works
    assert not by_file, proc.stdout


def test_py_typed_is_shipped():
    assert (ROOT / "spmdcheck" / "py.typed").is_file()
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["spmdcheck"]


def _findings(text: str) -> list[tuple]:
    diags = check_source(text, "t.py", Settings(mesh=("tp",)))
    return [(d.line, d.code, d.message) for d in diags]


def _program(spelling: str) -> str:
    def typed(spec: str) -> str:
        return spelling.format(spec=spec)

    return (
        "from typing import Annotated\n\nimport torch.nn.functional as F\nfrom torch import Tensor\n\n"
        "from spmdcheck.annotations import Local\n\n\n"
        f"def f(x: {typed('tp: I')}, w: {typed('tp: S(0)')}) -> {typed('tp: S(-1)')}:\n"
        "    y: " + typed("tp: S(-1)") + " = F.linear(x, w)\n"
        "    return y\n\n\n"
        f"def g(x: {typed('tp: Q')}):\n"
        "    return x\n"
    )


@pytest.mark.parametrize("spelling", ['Annotated[Tensor, Local("{spec}")]', 'Annotated[Tensor, "{spec}"]'])
def test_spmdcheck_reads_the_annotated_spellings_as_the_older_one(spelling):
    found = _findings(_program(spelling))
    assert [(line, code) for line, code, _ in found] == [(10, "SPMD102"), (14, "SPMD002")]
    assert found == _findings(_program('Local["{spec}"]'))


def test_a_call_spelling_without_a_string_is_reported():
    text = (
        "from typing import Annotated\n\nfrom torch import Tensor\n\nfrom spmdcheck.annotations import Local\n\n\n"
        "def g(x: Annotated[Tensor, Local(3)]):\n    return x\n"
    )
    assert [code for _, code, _ in _findings(text)] == ["SPMD002"]


# ---- the fixtures: written in the spellings the other checkers accept

# the fixtures whose subject is the older short spelling (documented as rejected by mypy, pyright and ruff)
SHORT_SPELLING_FIXTURES = "short_spelling"
# what those checkers say when an annotation is not one they accept
REJECTED_ANNOTATION = ("[valid-type]", "[name-defined]", "[syntax]")


def fixture_files() -> list[str]:
    """Every fixture the other checkers can read (relative to the checkout): not a file whose subject is a
    syntax error, nor one whose subject is the short spelling."""
    out = []
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        if SHORT_SPELLING_FIXTURES in path.name:
            continue
        try:
            ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        out.append(str(path.relative_to(ROOT)))
    return out


def _short_spellings(path: str) -> list[int]:
    """The lines of `Local["..."]` in a file's code (not in its docstrings)."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Local"
    ]


def test_no_fixture_but_the_short_spelling_ones_uses_the_short_spelling():
    short = {f: lines for f in fixture_files() if (lines := _short_spellings(f))}
    assert not short, short
    assert _short_spellings("fixtures/annotations/short_spelling_ok.py")  # the walk finds the spelling


def test_mypy_accepts_the_annotations_of_every_fixture(tmp_path):
    pytest.importorskip("mypy")
    files = fixture_files()
    assert len(files) > 400
    config = _mypy_config(tmp_path)
    # each fixture is its own module by its path (two folders may hold files of one name)
    cmd = [sys.executable, "-m", "mypy", "--config-file", config, "--explicit-package-bases", "--namespace-packages"]
    proc = _run([*cmd, *files], ROOT)
    rejected = [line for line in proc.stdout.splitlines() if line.endswith(REJECTED_ANNOTATION)]
    assert "source files" in proc.stdout, proc.stdout + proc.stderr  # mypy checked them (no blocking error)
    assert not rejected, "\n".join(rejected)
    short = _run([*cmd, "fixtures/annotations/short_spelling_ok.py"], ROOT)
    assert "[valid-type]" in short.stdout, short.stdout  # the harness sees a rejected annotation


def test_ruff_f_accepts_the_annotations_of_every_fixture():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    # F722: an annotation ruff cannot parse; F821: a name no import defines
    cmd = [ruff, "check", "--isolated", "--select", "F722,F821", "--output-format", "concise"]
    proc = _run([*cmd, *fixture_files()], ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    short = _run([*cmd, "fixtures/annotations/short_spelling_ok.py"], ROOT)
    assert "F722" in short.stdout, short.stdout


# pyright's rules for an annotation it does not accept (a call or variable in a type expression, an unknown
# name) and its syntax errors (no rule)
PYRIGHT_REJECTS = ("reportInvalidTypeForm", "reportUndefinedVariable", None)


def _pyright_rejections(folder: pathlib.Path, files: list[str]) -> list[str]:
    pyright = _pyright(folder)
    proc = _run([pyright, "--outputjson", *files], folder)
    report = json.loads(proc.stdout)
    assert report["summary"]["filesAnalyzed"] >= len(files), proc.stdout[:2000]  # pyright really read them
    return [
        f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}"
        for d in report["generalDiagnostics"]
        if d["severity"] == "error" and d.get("rule") in PYRIGHT_REJECTS
    ]


def test_pyright_accepts_the_annotations_of_every_fixture(tmp_path):
    folder = tmp_path / "fixtures"
    shutil.copytree(ROOT / "fixtures", folder)
    files = [str(tmp_path / f) for f in fixture_files()]
    assert len(files) > 400
    rejected = _pyright_rejections(tmp_path, files)
    assert not rejected, "\n".join(rejected[:50])
    short = _pyright_rejections(tmp_path, [str(tmp_path / "fixtures/annotations/short_spelling_ok.py")])
    assert short  # the harness sees a rejected annotation

"""Every quick fix and `--fix` adds the imports it needs where isort puts them (issue 23): ruff's `I` and `F`
rules find nothing new in a fixed fixture.

Each fixture is first sorted by ruff itself (`I`, so that a file's own import order is not what is judged),
then every suggestion the checker makes on it is applied on its own, as the editor's quick fix applies it,
and `--fix --unsafe-fixes` is run over the whole corpus; ruff (`--select I,F`) must report nothing on a
fixed file that it did not report on the file before the fix.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest
from conftest import ROOT

from spmdcheck.api import check_files
from spmdcheck.fixes.apply import IMPORT_LINE, fix_text
from spmdcheck.fixes.imports import NeededImport, add_imports
from spmdcheck.settings import Settings

RUFF = shutil.which("ruff")
needs_ruff = pytest.mark.skipif(RUFF is None, reason="ruff is not installed")


def _ruff(args: list[str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run([RUFF, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def _ruff_findings(cwd, paths: list[str]) -> dict[str, set[tuple[str, str]]]:
    """(code, message) of each finding of ruff's I and F rules, by file (relative to `cwd`)."""
    found: dict[str, set[tuple[str, str]]] = {p: set() for p in paths}
    proc = _ruff(["check", "--isolated", "--select", "I,F", "--output-format", "json", *paths], cwd)
    for item in json.loads(proc.stdout or "[]"):
        name = str(pathlib.Path(item["filename"]).relative_to(cwd))
        found.setdefault(name, set()).add((item["code"], item["message"]))
    return found


@pytest.fixture(scope="module")
def sorted_fixtures(tmp_path_factory):
    """A copy of fixtures/, its imports sorted by ruff, and the checker's diagnostics on it."""
    if RUFF is None:
        pytest.skip("ruff is not installed")
    root = tmp_path_factory.mktemp("fixed")
    shutil.copytree(ROOT / "fixtures", root / "orig" / "fixtures")
    _ruff(["check", "--isolated", "--select", "I", "--fix", "--quiet", "orig"], root)
    paths = sorted(str(p) for p in (root / "orig").rglob("*.py"))
    results = check_files(paths, Settings())
    return root, {r.path: r.diagnostics for r in results}


@needs_ruff
def test_every_quick_fix_keeps_ruff_i_and_f_clean(sorted_fixtures):
    root, diagnostics = sorted_fixtures
    variants: dict[str, str] = {}  # the fixed file -> the file it fixes (relative to root)
    for path, diags in diagnostics.items():
        text = open(path, encoding="utf-8").read()
        original = str(pathlib.Path(path).relative_to(root))
        for d in diags:
            for s in d.suggestions:
                if s.span is None:
                    continue
                fixed, count = fix_text(text, [replace(d, suggestions=[s])], IMPORT_LINE)
                if not count:
                    continue
                name = f"v{len(variants)}/{original.split('/', 1)[1]}"
                target = root / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(fixed, encoding="utf-8")
                variants[name] = original
    assert len(variants) > 50  # the corpus has many fixes, Megatron-spelled ones among them
    assert any("copy_to_tensor_model_parallel_region" in (root / v).read_text() for v in variants)
    before = _ruff_findings(root, sorted(set(variants.values())))
    after = _ruff_findings(root, sorted(variants))
    new = {v: sorted(after[v] - before[o]) for v, o in variants.items() if after[v] - before[o]}
    assert not new, "\n".join(f"{v} (a fix of {variants[v]}): {found}" for v, found in sorted(new.items()))


@needs_ruff
def test_fix_on_the_corpus_keeps_ruff_i_and_f_clean(sorted_fixtures, tmp_path):
    root, _ = sorted_fixtures
    shutil.copytree(root / "orig", tmp_path / "orig")
    shutil.copytree(root / "orig", tmp_path / "fixed")
    proc = subprocess.run(
        [sys.executable, "-m", "spmdcheck", "check", "--no-cache", "--fix", "--unsafe-fixes", "fixed"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    changed = [
        str(p.relative_to(tmp_path / "fixed"))
        for p in sorted((tmp_path / "fixed").rglob("*.py"))
        if p.read_bytes() != (tmp_path / "orig" / p.relative_to(tmp_path / "fixed")).read_bytes()
    ]
    assert len(changed) > 20
    before = _ruff_findings(tmp_path / "orig", changed)
    after = _ruff_findings(tmp_path / "fixed", changed)
    new = {p: sorted(after[p] - before[p]) for p in changed if after[p] - before[p]}
    assert not new, new


def _added(text: str, *needed: NeededImport) -> str:
    return add_imports(text, list(needed), "\n")


def test_a_megatron_name_is_merged_into_its_modules_import_and_wrapped_when_long():
    mappings = "megatron.core.tensor_parallel.mappings"
    text = f"import torch\nfrom {mappings} import reduce_from_tensor_model_parallel_region\n\nx = 1\n"
    assert _added(text, NeededImport(mappings, "copy_to_tensor_model_parallel_region")) == textwrap.dedent(f"""\
        import torch
        from {mappings} import (
            copy_to_tensor_model_parallel_region,
            reduce_from_tensor_model_parallel_region,
        )

        x = 1
    """)
    short = "from m import b  # why\n\nx = 1\n"
    assert _added(short, NeededImport("m", "a")) == "from m import a, b  # why\n\nx = 1\n"


def test_a_module_import_goes_before_the_from_imports_of_its_section():
    text = (
        "from __future__ import annotations\n\nimport os\n\nimport torch\nfrom spmd_types import I\n\nfrom . import x\n"
    )
    want = text.replace("import torch\n", "import spmd_types\nimport torch\n")
    assert _added(text, NeededImport("spmd_types")) == want
    alone = '"""Doc."""\n\nimport os\n\n\ndef f():\n    pass\n'
    assert _added(alone, NeededImport("spmd_types")) == alone.replace("import os\n", "import os\n\nimport spmd_types\n")

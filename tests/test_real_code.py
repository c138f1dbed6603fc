"""Unannotated real code gives no diagnostics: the installed torch/distributed package, default mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def _torch_distributed() -> str | None:
    try:
        import torch.distributed
    except ImportError:
        return None
    return os.path.dirname(torch.distributed.__file__)


@pytest.mark.skipif(_torch_distributed() is None, reason="torch is not installed")
def test_torch_distributed_is_clean(tmp_path):
    root = _torch_distributed()
    proc = subprocess.run(
        [sys.executable, "-m", "spmdcheck", "check", root, "--output-format", "json", "--no-respect-gitignore"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    report = json.loads(proc.stdout)
    assert report["diagnostics"] == []
    assert report["summary"]["files"] > 300


def test_command_path_never_imports_torch(tmp_path):
    """Start-up matters in pre-commit: `python -X importtime -m spmdcheck check FILE` must not import torch."""
    src = tmp_path / "m.py"
    src.write_text("import torch\nimport spmd_types as spmd\nx = spmd.assert_type(torch.randn(2), {'tp': spmd.V})\n")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "spmdcheck", "check", str(src)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "libcst" in imported
    assert not any(name == "torch" or name.startswith("torch.") for name in imported)


# ---------------------------------------------------------------- the real-code corpus (issue 7, issue 9)
# Released packages, downloaded (no install, no deps) into a cache and checked as a new user would: with no
# configuration and with a config naming their mesh axes. A failed download fails the test: never a skip.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "realcode"))
import corpus  # noqa: E402

# Findings that belong to work landing elsewhere; each entry names it. Delete an entry when it lands.
# Codes whose findings on this corpus belong to work not landed yet (none today).
OPEN_ELSEWHERE: dict[str, str] = {}


@pytest.mark.parametrize("configured", [False, True], ids=["no-config", "mesh-config"])
@pytest.mark.parametrize("package", corpus.CORPORA, ids=[c.name for c in corpus.CORPORA])
def test_real_code_corpus_is_clean(tmp_path, package: corpus.Corpus, configured: bool) -> None:
    try:
        tree = corpus.ensure(package)
    except corpus.CorpusUnavailable as exc:
        pytest.fail(str(exc))
    cmd = [sys.executable, "-m", "spmdcheck", "check", str(tree), "--output-format", "json", "--no-respect-gitignore"]
    if configured:
        config = tmp_path / "spmdcheck.toml"
        config.write_text("mesh = [" + ", ".join(f'"{axis}"' for axis in package.mesh) + "]\n")
        cmd += ["--config", str(config)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["summary"]["files"] > 100
    crashes = [d for d in report["diagnostics"] if d["code"] in ("SPMD000", "SPMD001")]
    assert crashes == []
    errors = [
        f"{d['path']}:{d['line']}: {d['code']} {d['message']}"
        for d in report["diagnostics"]
        if d["severity"] == "error" and d["code"] not in OPEN_ELSEWHERE
    ]
    assert errors == [], "\n".join(errors)


@pytest.mark.parametrize("package", corpus.CORPORA, ids=[c.name for c in corpus.CORPORA])
def test_deferred_imports_give_the_whole_runs_findings(package: corpus.Corpus) -> None:
    """A selective run defers the imports of modules nothing has read yet (analysis/program.py): with every root
    run again that way, each program's findings are those of its whole run (mesh configured: more rules run)."""
    from deferral_check import deferred_runs_that_differ

    from spmdcheck.api import Settings

    try:
        tree = corpus.ensure(package)
    except corpus.CorpusUnavailable as exc:
        pytest.fail(str(exc))
    compared, differ = deferred_runs_that_differ(tree, Settings(mesh=tuple(package.mesh)))
    assert compared > 0 and differ == []


def test_every_spmd_types_name_torchtitan_uses_is_in_the_stub() -> None:
    """Issue 7, item 5: each `spmd.<name>` torchtitan writes (`import spmd_types as spmd`) is declared in the
    spmd_types stub, so none of its calls is unknown merely because the stub forgot it."""
    import re

    from spmdcheck.api import load_registry

    try:
        tree = corpus.ensure(corpus.CORPORA[0])
    except corpus.CorpusUnavailable as exc:
        pytest.fail(str(exc))
    used = set()
    for path in tree.rglob("*.py"):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "import spmd_types as spmd" in text:
            used.update(re.findall(r"\bspmd\.([A-Za-z_]\w*)", text))
    assert len(used) > 15
    registry = load_registry(())
    missing = sorted(n for n in used if registry.lookup(registry.resolve_alias(f"spmd_types.{n}")) is None)
    assert missing == []

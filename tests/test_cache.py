"""The result cache, through the real command line: a warm run prints the same bytes as a cold one,
an edit of an imported file changes its importer's findings, a broken cache is ignored."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

LAYERS = '''\
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
GROUP = mesh.get_group("tp")


def reduce_loss(loss):
    dist.all_reduce(loss, group=GROUP)
    return loss
'''

# `train` hands `reduce_loss` a value that is already reduced: the double reduction is reported in
# layers.py only because of what model.py passes it, so an edit of either file changes the findings.
MODEL = '''\
import torch
import torch.distributed as dist

from pkg.layers import GROUP, reduce_loss


def train():
    y = torch.ones(3)
    dist.all_reduce(y, group=GROUP)
    return reduce_loss(y)
'''


def _check(root, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("SPMDCHECK_NO_CACHE", None)
    return subprocess.run(
        [sys.executable, "-m", "spmdcheck", "check", "pkg", "--output-format", "json", *extra],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def project(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "layers.py").write_text(LAYERS)
    (pkg / "model.py").write_text(MODEL)
    (pkg / "unrelated.py").write_text("def f(x):\n    return x + 1\n")
    return tmp_path


def _codes(proc: subprocess.CompletedProcess) -> list[tuple[str, int, str]]:
    assert "Traceback" not in proc.stderr, proc.stderr
    return [(os.path.basename(d["path"]), d["line"], d["code"]) for d in json.loads(proc.stdout)["diagnostics"]]


def test_cache_folder_is_tagged_and_ignored_by_git(project):
    _check(project)
    folder = project / ".spmdcheck_cache"
    assert (folder / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (folder / ".gitignore").read_text().splitlines()[-1] == "*"
    stores = list(folder.glob("results-*.json"))
    seal, document = stores[0].read_text().split("\n", 1)  # the seal line (cache_trust), then the JSON
    assert len(stores) == 1 and seal.startswith("spmdcheck-hmac-sha256 ") and json.loads(document)["version"] >= 1


def test_warm_run_prints_the_same_bytes(project):
    cold = _check(project)
    warm = _check(project)
    text_cold = _check(project, "--output-format", "text")
    text_warm = _check(project, "--output-format", "text")
    uncached = _check(project, "--no-cache")
    assert cold.returncode == warm.returncode == uncached.returncode == 1
    assert cold.stdout == warm.stdout == uncached.stdout
    assert text_cold.stdout == text_warm.stdout
    assert ("layers.py", 10, "SPMD302") in _codes(cold)


def test_editing_an_imported_file_invalidates_its_importers(project):
    assert ("layers.py", 10, "SPMD302") in _codes(_check(project))
    # the callee no longer reduces: the finding in layers.py disappears
    edited = LAYERS.replace("    dist.all_reduce(loss, group=GROUP)\n", "    loss = loss * 2\n")
    (project / "pkg" / "layers.py").write_text(edited)
    assert _codes(_check(project)) == _codes(_check(project, "--no-cache")) == []
    # the importer stops reducing first: nothing to report either; then back to the original
    (project / "pkg" / "layers.py").write_text(LAYERS)
    (project / "pkg" / "model.py").write_text(MODEL.replace("    dist.all_reduce(y, group=GROUP)\n", ""))
    assert ("layers.py", 10, "SPMD302") not in _codes(_check(project))
    (project / "pkg" / "model.py").write_text(MODEL)
    assert ("layers.py", 10, "SPMD302") in _codes(_check(project))


def _open_sealed(path):
    """A cache document and the name its seal covers (the store files are sealed: cache_trust)."""
    from spmdcheck.cache_trust import secret_key, unseal

    name = path.name if path.parent.name == ".spmdcheck_cache" else f"{path.parent.name}/{path.name}"
    return json.loads(unseal(secret_key(), name, path.read_bytes())), name


def _reseal(path, name, doc):
    """Write `doc` sealed with this account's key: a malformed document the checker itself could have
    written (a bug), which the validation of every field must still refuse."""
    from spmdcheck.cache_trust import seal, secret_key

    path.write_bytes(seal(secret_key(), name, json.dumps(doc).encode()))


def test_a_corrupted_cache_is_ignored(project):
    first = _check(project)
    for store in (project / ".spmdcheck_cache").glob("results-*.json"):
        doc, name = _open_sealed(store)
        for entry in doc["results"].values():
            entry[1] = [["not", "a", "diagnostic"]]
        doc["programs"] = {k: {"x": 3} for k in doc["programs"]}
        doc["tree"] = "stale"  # so the programs and scans are consulted
        _reseal(store, name, doc)
    for index in (project / ".spmdcheck_cache").glob("index-*.json"):
        doc, name = _open_sealed(index)
        doc["files"] = {p: [entry[0], "not a hash", "garbage"] for p, entry in doc["files"].items()}
        _reseal(index, name, doc)
    assert _check(project).stdout == first.stdout
    for units in (project / ".spmdcheck_cache").glob("units-*/*.json"):
        doc, name = _open_sealed(units)
        _reseal(units, name, {**doc, "units": [["garbage"]]})
    for store in (project / ".spmdcheck_cache").glob("results-*.json"):
        doc, name = _open_sealed(store)
        doc["tree"], doc["taint"] = "stale", ["stale", {"x": 1}]
        _reseal(store, name, doc)
    assert _check(project).stdout == first.stdout
    for store in (project / ".spmdcheck_cache").glob("**/*.json"):
        store.write_bytes(b"\x80not json")
    assert _check(project).stdout == first.stdout


def test_clean_removes_the_cache(project):
    _check(project)
    proc = subprocess.run(
        [sys.executable, "-m", "spmdcheck", "clean"], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert not (project / ".spmdcheck_cache").exists()


def test_no_cache_writes_nothing(project):
    _check(project, "--no-cache")
    assert not (project / ".spmdcheck_cache").exists()


def test_read_only_project_uses_the_user_cache_dir(project, tmp_path_factory):
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    home = tmp_path_factory.mktemp("xdg")
    os.chmod(project, 0o555)
    try:
        env = dict(os.environ, XDG_CACHE_HOME=str(home))
        env.pop("SPMDCHECK_NO_CACHE", None)
        proc = subprocess.run(
            [sys.executable, "-m", "spmdcheck", "check", "pkg"], cwd=project, env=env, capture_output=True, text=True
        )
        assert "Traceback" not in proc.stderr
        assert list(home.glob("spmdcheck/projects/*/CACHEDIR.TAG"))
    finally:
        os.chmod(project, 0o755)


def test_editing_an_imported_file_changes_the_importers_findings(project):
    """The finding is in model.py; only layers.py changes between the runs."""
    caller = MODEL.replace(
        "    dist.all_reduce(y, group=GROUP)\n    return reduce_loss(y)\n",
        "    z = reduce_loss(y)\n    dist.all_reduce(z, group=GROUP)\n    return z\n",
    )
    (project / "pkg" / "model.py").write_text(caller)
    before = _codes(_check(project))
    assert ("model.py", 10, "SPMD302") in before
    (project / "pkg" / "layers.py").write_text(LAYERS.replace("    dist.all_reduce(loss, group=GROUP)\n", ""))
    after = _check(project)
    assert ("model.py", 10, "SPMD302") not in _codes(after)
    assert after.stdout == _check(project, "--no-cache").stdout

"""`[tool.spmdcheck] group-helpers` / `mesh-setters`: a project's own helpers declared without a stub,
through the real command line."""

from __future__ import annotations

import subprocess
import sys
import textwrap

DIST = textwrap.dedent(
    """
    import contextlib


    def tp_group():
        return _GROUPS["tp"]


    @contextlib.contextmanager
    def use_mesh(mesh):
        yield mesh


    _GROUPS = {}
    """
)

MODEL = textwrap.dedent(
    """
    import torch
    import spmd_types as spmd
    from torch.distributed.device_mesh import init_device_mesh

    from mypkg.dist import tp_group, use_mesh


    def row_parallel(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = spmd.assert_type(h, {tp_group(): spmd.S(1)})
        w = spmd.assert_type(w, {tp_group(): spmd.I})
        return h @ w.t()


    def block(x: torch.Tensor) -> torch.Tensor:
        with use_mesh(init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))):
            x = spmd.assert_type(x, spmd.I)
        return x
    """
)


def _project(tmp_path, config: str):  # noqa: ANN001, ANN202
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "dist.py").write_text(DIST)
    (pkg / "model.py").write_text(MODEL)
    (tmp_path / "pyproject.toml").write_text("[tool.spmdcheck]\n" + config)
    return pkg


def _check(tmp_path, *extra: str) -> subprocess.CompletedProcess:  # noqa: ANN001
    cmd = [sys.executable, "-m", "spmdcheck", "check", "--no-cache", "--output-format", "concise", *extra, "mypkg"]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)


def test_group_helper_names_its_axis(tmp_path):
    _project(tmp_path, 'mesh = ["tp"]\ngroup-helpers = {"mypkg.dist.tp_group" = "tp"}\n')
    proc = _check(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "model.py:12:12: SPMD102" in proc.stdout


def test_without_the_key_the_helper_is_unknown_and_silent(tmp_path):
    _project(tmp_path, 'mesh = ["tp"]\n')
    proc = _check(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mesh_setter_sets_the_mesh_for_bare_types(tmp_path):
    _project(tmp_path, 'strict = true\nmesh-setters = ["mypkg.dist.use_mesh"]\nignore = ["SPMD307"]\n')
    assert "SPMD002" not in _check(tmp_path).stdout
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nstrict = true\nignore = ["SPMD307"]\n')
    assert "model.py:17:13: SPMD002" in _check(tmp_path).stdout


def test_a_bad_helper_entry_is_a_config_error(tmp_path):
    for bad in ('group-helpers = {"tp_group" = "tp"}\n', 'group-helpers = {"mypkg.dist.tp_group" = 3}\n',
                'mesh-setters = "mypkg.dist.use_mesh"\n', 'group-helpers = ["mypkg.dist.tp_group"]\n'):
        (tmp_path / "pyproject.toml").unlink(missing_ok=True)
        if not (tmp_path / "mypkg").exists():
            _project(tmp_path, bad)
        else:
            (tmp_path / "pyproject.toml").write_text("[tool.spmdcheck]\n" + bad)
        proc = _check(tmp_path)
        assert proc.returncode == 2, (bad, proc.stdout, proc.stderr)
        assert "SPMD005" in proc.stderr and "pyproject.toml" in proc.stderr, (bad, proc.stderr)

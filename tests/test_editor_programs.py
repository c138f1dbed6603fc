"""The editor and `--stdin-filename F -` check a file with the rest of its program, as the command line does
(issue 23): the same findings on every file of fixtures/programs/, the call chain of a cross-file finding as
LSP related information, and diagnostics of open files re-published when a helper they import changes."""

from __future__ import annotations

import io
import json
import os
import pathlib
import sys

import pytest
from conftest import ROOT

from spmdcheck.cli import main

PROGRAMS = ROOT / "fixtures" / "programs"
# every package, those added later included (read when the tests are collected), pending ones too: what is
# compared is the editor's and stdin's findings with the command line's, whatever the checker finds today
PROGRAM_DIRS = sorted(p.name for p in PROGRAMS.iterdir() if p.is_dir() and any(p.rglob("*.py")))


def _json_findings(out: str) -> dict[str, list[tuple]]:
    by_path: dict[str, list[tuple]] = {}
    for d in json.loads(out)["diagnostics"]:
        by_path.setdefault(d["path"], []).append((d["line"], d["column"], d["code"], d["message"]))
    return by_path


def _stdin_findings(path: str, monkeypatch, capsys) -> list[tuple]:
    data = pathlib.Path(path).read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    main(["check", "--output-format", "json", "--stdin-filename", path, "-"])
    return _json_findings(capsys.readouterr().out).get(path, [])


@pytest.mark.parametrize("program", PROGRAM_DIRS)
def test_the_editor_stdin_and_the_command_line_agree(program, monkeypatch, capsys):
    pytest.importorskip("pygls")
    from spmdcheck.server.documents import analyse

    monkeypatch.chdir(ROOT)  # paths in messages are relative to the working directory, in every output
    folder = PROGRAMS.relative_to(ROOT) / program
    main(["check", "--no-cache", "--jobs", "1", "--output-format", "json", str(folder)])
    command_line = _json_findings(capsys.readouterr().out)
    files = sorted(str(f) for f in folder.rglob("*.py"))
    assert files
    for path in files:
        expected = command_line.get(path, [])
        assert _stdin_findings(path, monkeypatch, capsys) == expected, f"--stdin-filename {path}"
        absolute = os.path.abspath(path)
        analysis = analyse(pathlib.Path(path).read_text(encoding="utf-8"), absolute)
        editor = [(d.line, d.column, d.code, d.message) for d in analysis.result.diagnostics]
        assert editor == expected, f"language server: {path}"


MODEL = """\
from typing import Annotated

import torch.nn.functional as F
from torch import Tensor

from pkg import helpers
from spmdcheck.annotations import Local


def forward(x: Annotated[Tensor, Local("tp: P")]):
    y = helpers.reduce(x)
    return F.gelu(y), helpers.act(x)
"""
HELPERS = """\
import spmd_types as spmd
import torch.nn.functional as F
from spmd_types import I, P


def reduce(y):
    return spmd.all_reduce(y, "tp", src=P, dst=I)


def act(y):
    return F.gelu(y)
"""


@pytest.fixture
def package_session(tmp_path):
    pytest.importorskip("pygls")
    from test_server import Client

    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "model.py").write_text(MODEL)
    (tmp_path / "pkg" / "helpers.py").write_text(HELPERS)
    client = Client(tmp_path)
    client.request("initialize", {"processId": os.getpid(), "rootUri": tmp_path.as_uri(), "capabilities": {}})
    client.notify("initialized", {})
    yield client, tmp_path
    assert client.close() == 0


def _open(client, path: pathlib.Path, text: str) -> None:
    item = {"uri": path.as_uri(), "languageId": "python", "version": 1, "text": text}
    client.notify("textDocument/didOpen", {"textDocument": item})


def test_a_helpers_finding_carries_its_call_chain_as_related_information(package_session):
    client, root = package_session
    helpers = root / "pkg" / "helpers.py"
    _open(client, helpers, HELPERS)
    (finding,) = client.diagnostics(helpers.as_uri())
    assert finding["code"] == "SPMD101"  # found only through the call in model.py: a file alone is clean
    (related,) = finding["relatedInformation"]
    assert related["location"]["uri"] == (root / "pkg" / "model.py").as_uri()
    assert related["location"]["range"]["start"]["line"] == 11  # `return F.gelu(y), helpers.act(x)`, 0-based
    assert "call chain" in related["message"]


def test_an_unsaved_helper_edit_republishes_the_open_files_that_import_it(package_session):
    client, root = package_session
    model, helpers = root / "pkg" / "model.py", root / "pkg" / "helpers.py"
    _open(client, model, MODEL)
    assert client.diagnostics(model.as_uri()) == []  # `helpers.reduce` reduces: gelu gets an I
    _open(client, helpers, HELPERS)
    client.diagnostics(helpers.as_uri())
    assert client.diagnostics(model.as_uri()) == []  # a dependant, re-checked: the same
    unreduced = HELPERS.replace('spmd.all_reduce(y, "tp", src=P, dst=I)', "y")
    change = {"textDocument": {"uri": helpers.as_uri(), "version": 2}, "contentChanges": [{"text": unreduced}]}
    client.notify("textDocument/didChange", change)
    (finding,) = client.diagnostics(model.as_uri())  # re-published from the helper's unsaved text
    assert (finding["code"], finding["range"]["start"]["line"]) == ("SPMD101", 11)
    assert helpers.read_text() == HELPERS  # nothing was saved: the buffer counted
    client.notify("textDocument/didClose", {"textDocument": {"uri": helpers.as_uri()}})
    assert client.diagnostics(model.as_uri()) == []  # closed unsaved: the saved helper counts again


COMMON = """\
from typing import Annotated

import spmd_types as spmd
from torch import Tensor

from spmdcheck.annotations import Local


def partial_sum(x: Annotated[Tensor, Local("tp: V")]) -> Annotated[Tensor, Local("tp: P")]:
    return spmd.reinterpret(x, "tp", src=spmd.V, dst=spmd.P)
"""
USER = """\
from pkg.common import partial_sum


def f(x):
    z = partial_sum(x)
    return z
"""


@pytest.mark.parametrize("output_format", ["json", "full"])
def test_show_types_of_stdin_types_the_file_with_its_program(tmp_path, output_format):
    from cli_helpers import run

    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "common.py").write_text(COMMON)
    (tmp_path / "pkg" / "user.py").write_text(USER)
    show = ["check", "--show-types", "--output-format", output_format]
    command_line = run([*show, "pkg/user.py"], tmp_path).stdout
    stdin = run([*show, "--stdin-filename", "pkg/user.py", "-"], tmp_path, input=USER).stdout
    alone = run([*show, "--no-project-context", "pkg/user.py"], tmp_path).stdout
    assert stdin == command_line
    assert alone != command_line  # `z` is typed from the helper's annotation in another file of the package
    if output_format == "json":
        z_type = {b["name"]: b["type"] for b in json.loads(command_line)}["z"]
        assert z_type == "{tp: P}"

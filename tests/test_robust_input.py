"""Items 3, 5, 6, 9, 10 and 11 of issue 9: hostile input gets a clear answer, never a crash or a hang."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import socket

import pytest
from robust_helpers import BUG, diagnostics, no_traceback, output, run

from spmdcheck.api import load_registry, shipped_stubs
from spmdcheck.frontend.discovery import discover
from spmdcheck.rules.cache import dump_registry, load_cached_registry
from spmdcheck.rules.stubs import load_stub_dirs


def codes(proc, name):
    return sorted((d["line"], d["code"]) for d in diagnostics(proc) if d["path"].endswith(name))


# ------------------------------------------------------------------ item 3: huge numbers
def test_huge_numbers_in_annotations_are_diagnostics_not_hangs(tmp_path):
    (tmp_path / "big.py").write_text(
        BUG
        + "\n\n"
        + "def g(x: Local['tp: S(99999999999999999999999999)'], w: Local['tp: R']):\n    return x @ w\n\n\n"
        + "def h(x: torch.Tensor):\n    return spmd.assert_type(x, {'tp': S(10**10**10)})\n\n\n"
        + "def k(x: torch.Tensor):\n    return spmd.assert_type(x, {'tp': S(10**100)})\n\n\n"
        + "N = 10**10**10 + 2**99999999 + (1 << 10**12)\n"
        + "M = " + "9" * 6000 + "\n"
        + "import spmd_types as spmd\nfrom spmd_types import S\n"
    )
    proc = run(["check", "--output-format", "json", "big.py"], tmp_path, timeout=120)
    no_traceback(proc)
    found = codes(proc, "big.py")
    assert found == [(7, "SPMD102"), (10, "SPMD002"), (15, "SPMD002"), (19, "SPMD002")], found
    messages = [d["message"] for d in diagnostics(proc) if d["code"] == "SPMD002"]
    assert "at most 64 dims" in messages[0] and "at most 64 dims" in messages[2]


# ------------------------------------------------------------------ item 5: encodings
def test_a_latin1_file_with_a_coding_cookie_is_checked(tmp_path):
    text = "# -*- coding: latin-1 -*-\n" + BUG.replace("import torch\n", "import torch  # d\xe9j\xe0 vu\n")
    (tmp_path / "latin.py").write_bytes(text.encode("latin-1"))
    (tmp_path / "z_after.py").write_text(BUG)
    proc = run(["check", "latin.py", "z_after.py"], tmp_path)
    no_traceback(proc)
    assert proc.returncode == 1
    assert "latin.py:8:12: SPMD102" in proc.stdout
    assert "z_after.py:7:12: SPMD102" in proc.stdout
    assert "Found 2 errors" in proc.stdout


def test_undecodable_bytes_are_a_diagnostic(tmp_path):
    (tmp_path / "bad.py").write_bytes(b"import spmd_types\nx = '\xff\xfe'\n")
    proc = run(["check", "--output-format", "json", "bad.py"], tmp_path)
    no_traceback(proc)
    assert codes(proc, "bad.py") == [(2, "SPMD001")]


# ------------------------------------------------------------------ item 6: file system oddities
def test_a_symlink_loop_is_reported_without_a_traceback(tmp_path):
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    (tmp_path / "ok.py").write_text(BUG)
    proc = run(["check", "."], tmp_path)
    no_traceback(proc)
    assert proc.returncode == 2
    assert "loop.py: a symbolic link loop" in proc.stderr
    direct = run(["check", "loop.py"], tmp_path)
    no_traceback(direct)
    assert direct.returncode == 2 and "All checks passed" not in direct.stdout


def test_a_fifo_and_a_socket_named_py_are_never_opened(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock.py"))
    (tmp_path / "ok.py").write_text(BUG)
    try:
        proc = run(["check", "--output-format", "json", "."], tmp_path, timeout=60)
    finally:
        sock.close()
    no_traceback(proc)
    assert proc.returncode == 1
    assert [d["path"] for d in diagnostics(proc)] == ["ok.py"]
    named = run(["check", "pipe.py"], tmp_path, timeout=60)
    assert named.returncode == 2 and "not a regular file" in named.stderr


def test_a_file_that_cannot_be_read_is_an_error_not_a_pass(tmp_path):
    if os.geteuid() == 0:  # root reads any mode: a file whose read fails even for root
        (tmp_path / "unreadable.py").symlink_to("/proc/self/mem")
    else:
        (tmp_path / "unreadable.py").write_text(BUG)
        os.chmod(tmp_path / "unreadable.py", 0)
    proc = run(["check", "--output-format", "json", "unreadable.py"], tmp_path)
    no_traceback(proc)
    assert proc.returncode == 2, output(proc)
    assert codes(proc, "unreadable.py") == [(1, "SPMD005")]
    assert "cannot read" in diagnostics(proc)[0]["message"]


def test_an_unreadable_folder_is_an_error(tmp_path, monkeypatch):
    sub = tmp_path / "locked"
    sub.mkdir()
    (sub / "m.py").write_text(BUG)
    real_scandir = os.scandir

    def scandir(path="."):  # what os.walk sees for a folder without read permission
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    errors: list[str] = []
    files, missing = discover([str(tmp_path)], tmp_path, errors=errors)
    assert files == [] and missing == []
    assert errors == [f"{sub}: cannot be read (Permission denied)"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can list a folder without read permission")
def test_an_unreadable_folder_exits_2_on_the_command_line(tmp_path):
    sub = tmp_path / "locked"
    sub.mkdir()
    (sub / "m.py").write_text(BUG)
    os.chmod(sub, 0)
    try:
        proc = run(["check", "."], tmp_path)
    finally:
        os.chmod(sub, 0o755)
    no_traceback(proc)
    assert proc.returncode == 2 and "All checks passed" not in proc.stdout


def test_a_missing_path_exits_2_without_claiming_a_pass(tmp_path):
    proc = run(["check", "nope.py"], tmp_path)
    no_traceback(proc)
    assert proc.returncode == 2
    assert "nope.py: no such file or directory" in proc.stderr
    assert "All checks passed" not in proc.stdout


# ------------------------------------------------------------------ item 9: the registry cache
def test_the_registry_cache_is_plain_json_and_a_tampered_one_is_rebuilt(tmp_path):
    reference = load_stub_dirs([shipped_stubs()])
    path = tmp_path / "registry.json"
    dump_registry(reference, path, "stamp")
    assert load_cached_registry(path, "stamp").rules == reference.rules
    assert load_cached_registry(path, "other stamp") is None
    header, payload = path.read_text().split("\n", 1)
    path.write_text(header + "\n" + payload.replace('"linear"', '"nonlinear"', 1))  # hash no longer matches
    assert load_cached_registry(path, "stamp") is None
    evil = json.dumps({"rules": {"x": {"$": "Popen", "f": {"args": "touch pwned"}}}, "errors": []})
    good_header = json.dumps({"format": 1, "stamp": "stamp", "sha256": hashlib.sha256(evil.encode()).hexdigest()})
    path.write_text(good_header + "\n" + evil)  # a valid hash over a class outside the rule model
    assert load_cached_registry(path, "stamp") is None


def test_a_pickle_planted_in_the_cache_folder_is_never_loaded(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SPMDCHECK_CACHE_DIR", str(cache))
    load_registry.cache_clear()
    try:
        load_registry(())
        (entry,) = cache.glob("registry-*")
        marker = tmp_path / "pwned"
        entry.write_bytes(pickle.dumps(_Evil(str(marker))))
        load_registry.cache_clear()
        registry = load_registry(())
        assert not marker.exists()
        assert registry.rules == load_stub_dirs([shipped_stubs()]).rules
        assert entry.read_text().split("\n", 1)[1].startswith('{"format"')  # rebuilt (after its seal)
    finally:
        load_registry.cache_clear()


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


# ------------------------------------------------------------------ item 10: terminal safety
def test_escapes_and_bidi_overrides_are_shown_escaped(tmp_path):
    name = "evil\x1b[31m\u202e.py"
    (tmp_path / name).write_text(BUG.replace("return x @ w.T", "return x @ w.T  # \x1b[2J\u202egnp.exe"))
    (tmp_path / "new\nline.py").write_text(BUG)
    proc = run(["check", "--color", "never", "."], tmp_path)
    no_traceback(proc)
    assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout
    assert "evil\\x1b[31m\\u202e.py:7:12: SPMD102" in proc.stdout
    assert "# \\x1b[2J\\u202egnp.exe" in proc.stdout
    assert "new\\nline.py:7:12: SPMD102" in proc.stdout
    headers = [line for line in proc.stdout.splitlines() if "SPMD102" in line]
    assert len(headers) == 2 and all(h.split(":")[1] == "7" for h in headers)


@pytest.mark.parametrize("fmt", ["github", "junit", "show-types"])
def test_other_reports_show_escapes_escaped_too(tmp_path, fmt):
    name = "evil\x1b[31m\u202e.py"
    (tmp_path / name).write_text(BUG.replace("return x @ w.T", "return x @ w.T  # \x1b[2J\u202egnp.exe"))
    args = ["--show-types"] if fmt == "show-types" else ["--output-format", fmt]
    proc = run(["check", "--color", "never", *args, name], tmp_path)
    no_traceback(proc)
    assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout, proc.stdout
    assert "evil\\x1b[31m\\u202e.py" in proc.stdout
    if fmt == "junit":
        import xml.etree.ElementTree as ET

        cases = ET.fromstring(proc.stdout.split("\n", 1)[1]).iter("testcase")
        assert [c.get("name").split()[0] for c in cases] == ["SPMD102"]
    if fmt == "show-types":
        assert "# \\x1b[2J\\u202egnp.exe" in proc.stdout


def test_python_warnings_about_the_checked_code_are_not_printed(tmp_path, monkeypatch):
    # `x is 1` and `"\\d"` make CPython's parser warn; the checked code is not ours to lint, and a
    # warning on stderr in a pre-commit hook reads like a failure of the tool
    # (shown by default from Python 3.12; a developer's PYTHONWARNINGS shows them on any version)
    monkeypatch.setenv("PYTHONWARNINGS", "default")
    (tmp_path / "warns.py").write_text(BUG + 'x = 1\nif x is 1:\n    y = "\\d"\n')
    proc = run(["check", "--no-cache", "-j1", "warns.py"], tmp_path)
    no_traceback(proc)
    assert "Warning" not in proc.stderr, proc.stderr
    assert "SPMD102" in proc.stdout


# ------------------------------------------------------------------ item 11: CLI edges
def test_jobs_are_capped(tmp_path):
    for i in range(9):
        (tmp_path / f"m{i}.py").write_text(BUG)
    proc = run(["check", "-j", "100000", "--output-format", "json", "."], tmp_path)
    no_traceback(proc)
    assert proc.returncode == 1 and len(diagnostics(proc)) == 9


def test_stdin_filename_shows_the_stdin_text(tmp_path):
    (tmp_path / "base.py").write_text("# the disk file\n" * 20)
    proc = run(["check", "--stdin-filename", "base.py", "-"], tmp_path, input=BUG)
    no_traceback(proc)
    assert "base.py:7:12: SPMD102" in proc.stdout
    assert "> 7 |     return x @ w.T" in proc.stdout
    assert "the disk file" not in proc.stdout


def test_fix_with_stdin_writes_the_fixed_source_to_stdout(tmp_path):
    src = BUG.replace("\n", "\r\n").encode()
    proc = run(["check", "--fix", "--unsafe-fixes", "--stdin-filename", "m.py", "-"], tmp_path, input=src)
    no_traceback(proc)
    assert proc.returncode == 0, output(proc)
    assert b"spmd_types.convert(x, 'tp', src=spmd_types.I, dst=spmd_types.R) @ w.T" in proc.stdout
    assert proc.stdout.count(b"\r\n") == src.count(b"\r\n") + 1 and b"\nimport spmd_types\r\n" in proc.stdout
    unsafe_off = run(["check", "--fix", "-"], tmp_path, input=src)
    assert unsafe_off.stdout == src and b"--unsafe-fixes" in unsafe_off.stderr

"""The result cache after each kind of edit, through the real command line: a warm run prints the
same bytes as a cold (`--no-cache`) run, in every output format that quotes positions, and an edit
that cannot change what the analysis reads (a comment outside brackets, the body of a function the
pre-pass proves inert) keeps the program's cache key while an edit of analysed code changes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cli_helpers import REDUCING_LAYERS, assert_ran

LAYERS = (
    REDUCING_LAYERS
    + """

def describe(name):
    text = "layer " + name
    return text.upper()
"""
)

# `train` hands `reduce_loss` a value that is already reduced: the finding is in layers.py, because of
# what model.py passes (an edit of either file changes it).
MODEL = """\
import torch
import torch.distributed as dist

from pkg.layers import GROUP, reduce_loss


def train():
    y = torch.ones(3)
    dist.all_reduce(y, group=GROUP)
    return reduce_loss(y)
"""

EXTRA = """\
import torch.distributed as dist

from pkg.layers import GROUP


def sync(t):
    dist.all_reduce(t, group=GROUP)
    return t
"""


def _run(root, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("SPMDCHECK_NO_CACHE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "spmdcheck", "check", "pkg", *extra],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert_ran(["check", "pkg", *extra], proc)
    return proc


@pytest.fixture
def project(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "layers.py").write_text(LAYERS)
    (pkg / "model.py").write_text(MODEL)
    (pkg / "unrelated.py").write_text("def f(x):\n    return x + 1\n")
    return tmp_path


def _program_keys(root) -> set[str]:
    (store,) = (root / ".spmdcheck_cache").glob("results-*.json")
    return set(json.loads(store.read_text().split("\n", 1)[1])["programs"])  # after the seal line (cache_trust)


def _same_as_cold(root) -> list[tuple[str, int, str]]:
    """Warm output == cold output, byte for byte, as JSON and as text (code frames, called-from chains)."""
    for fmt in ("json", "text"):
        warm = _run(root, "--output-format", fmt)
        cold = _run(root, "--output-format", fmt, "--no-cache")
        assert warm.returncode == cold.returncode
        assert warm.stdout == cold.stdout, fmt
    return [
        (os.path.basename(d["path"]), d["line"], d["code"])
        for d in json.loads(_run(root, "--output-format", "json").stdout)["diagnostics"]
    ]


def _edit(root, name: str, old: str, new: str) -> None:
    path = root / "pkg" / name
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_comment_edits_keep_the_program_key_and_the_output(project):
    before = _same_as_cold(project)
    assert ("layers.py", 10, "SPMD302") in before
    keys = _program_keys(project)
    _edit(project, "layers.py", "    return loss\n", "    return loss  # the reduced loss\n")
    (project / "pkg" / "layers.py").write_text((project / "pkg" / "layers.py").read_text() + "# the end\n")
    assert _same_as_cold(project) == before
    assert _program_keys(project) == keys
    # a comment inside brackets is part of an expression (messages quote expressions): analysed again
    _edit(project, "model.py", "reduce_loss(y)", "reduce_loss(\n        y  # reduced already\n    )")
    assert _same_as_cold(project) == before
    assert _program_keys(project) != keys


def test_a_comment_line_inserted_above_moves_the_findings(project):
    before = _same_as_cold(project)
    _edit(project, "layers.py", "def reduce_loss(loss):\n", "# reduces over tp\ndef reduce_loss(loss):\n")
    after = _same_as_cold(project)
    assert ("layers.py", 11, "SPMD302") in after and ("layers.py", 10, "SPMD302") not in after
    assert len(after) == len(before)


def test_a_suppression_comment_is_read(project):
    keys = _same_as_cold(project) and _program_keys(project)
    _edit(
        project,
        "layers.py",
        "    dist.all_reduce(loss, group=GROUP)\n",
        "    dist.all_reduce(loss, group=GROUP)  # noqa: SPMD302\n",
    )
    after = _same_as_cold(project)
    assert ("layers.py", 10, "SPMD302") not in after
    assert _program_keys(project) != keys


def test_an_inert_function_body_edit_keeps_the_program_key(project):
    before = _same_as_cold(project)
    keys = _program_keys(project)
    _edit(project, "layers.py", '    text = "layer " + name\n', '    text = "block " + name.strip()\n')
    assert _same_as_cold(project) == before
    assert _program_keys(project) == keys


def test_a_typed_body_edit_in_an_imported_module_changes_the_importers_findings(project):
    """The finding is in model.py, caused by what layers.py returns; only layers.py is edited."""
    _edit(
        project,
        "model.py",
        "    dist.all_reduce(y, group=GROUP)\n    return reduce_loss(y)\n",
        "    z = reduce_loss(y)\n    dist.all_reduce(z, group=GROUP)\n    return z\n",
    )
    assert ("model.py", 10, "SPMD302") in _same_as_cold(project)
    keys = _program_keys(project)
    _edit(project, "layers.py", "    dist.all_reduce(loss, group=GROUP)\n", "    loss = loss * 2\n")
    assert ("model.py", 10, "SPMD302") not in _same_as_cold(project)
    assert _program_keys(project) != keys


def test_a_new_import_joins_the_program(project):
    before = _same_as_cold(project)
    (project / "pkg" / "extra.py").write_text(EXTRA)
    with_extra = _same_as_cold(project)
    # model.py now hands its reduced value to extra.sync too: a new finding in extra.py
    _edit(
        project,
        "model.py",
        "from pkg.layers import GROUP, reduce_loss\n",
        "from pkg.extra import sync\nfrom pkg.layers import GROUP, reduce_loss\n",
    )
    _edit(project, "model.py", "    return reduce_loss(y)\n", "    sync(y)\n    return reduce_loss(y)\n")
    after = _same_as_cold(project)
    assert ("extra.py", 7, "SPMD302") in after and ("extra.py", 7, "SPMD302") not in with_extra
    assert len(before) <= len(with_extra) < len(after)


def test_a_deleted_file(project):
    (project / "pkg" / "extra.py").write_text(EXTRA)
    _edit(
        project,
        "model.py",
        "from pkg.layers import GROUP, reduce_loss\n",
        "from pkg.extra import sync\nfrom pkg.layers import GROUP, reduce_loss\n",
    )
    _edit(project, "model.py", "    return reduce_loss(y)\n", "    sync(y)\n    return reduce_loss(y)\n")
    assert ("extra.py", 7, "SPMD302") in _same_as_cold(project)
    (project / "pkg" / "extra.py").unlink()
    after = _same_as_cold(project)
    assert not any(name == "extra.py" for name, _, _ in after)
    (project / "pkg" / "layers.py").unlink()
    assert not any(name == "layers.py" for name, _, _ in _same_as_cold(project))


def _fixture_paths() -> list[str]:
    root = os.path.join(os.path.dirname(__file__), "..", "fixtures")
    return sorted(
        os.path.join(folder, name) for folder, _, names in os.walk(root) for name in names if name.endswith(".py")
    )


def test_scans_keep_their_taint_through_the_cache():
    """A scan read back from the cache's plain data taints exactly as the fresh scan did."""
    from spmdcheck.engine.plan import scan_files, taint
    from spmdcheck.program import prepass
    from spmdcheck.settings import Settings

    paths = _fixture_paths()
    fresh = scan_files(paths, Settings(), None)
    again = []
    for scan in fresh:
        small, units = prepass.scan_to_plain(scan)
        small, units = json.loads(json.dumps(small)), json.loads(json.dumps(units))
        again.append(prepass.scan_from_plain(scan.path, small, units))
    assert [prepass.scan_hash(*prepass.scan_to_plain(s)) for s in again] == [
        prepass.scan_hash(*prepass.scan_to_plain(s)) for s in fresh
    ]
    assert taint(again) == taint(fresh)


def test_comment_cuts_leave_what_the_analysis_reads():
    import ast

    from spmdcheck.program import prepass

    text = (
        "# header\n"
        "x = f(a,  # inside brackets\n"
        "      b)  # after the call\n"
        "y = g(c)  # noqa: SPMD101\n"
        "z = '#not a comment'\n"
        "if x:  # a header\n"
        "    pass  # a body\n"
        "# spmdcheck: ignore[SPMD101]\n"
        "w = 1\n"
    )
    cuts = dict(prepass.comment_cuts(ast.parse(text), text))
    # not: inside brackets or anywhere on a statement of several lines, suppressions, a string
    assert cuts == {1: 0, 6: 7, 7: 10}
    digest = prepass.analysed_digest(text, None, cuts.items(), ())
    moved = text.replace("# header", "# another header").replace("# a header", "#")
    assert prepass.analysed_digest(moved, None, prepass.comment_cuts(ast.parse(moved), moved), ()) == digest
    changed = text.replace("# inside brackets", "# inside, edited")
    assert prepass.analysed_digest(changed, None, prepass.comment_cuts(ast.parse(changed), changed), ()) != digest


def test_only_files_without_long_expressions_skip_the_depth_screen():
    """`guard.shallow` lets a file skip `guard.screen` only when no expression is long enough to be
    too deep for libcst; a deep one (which the screen blanks) keeps it."""
    import ast

    from spmdcheck.frontend import guard

    ordinary = "def f(x):\n    return g(x, [1, 2, 3], {'a': (x + 1) * 2})\n"
    assert guard.shallow(ast.parse(ordinary), ordinary.encode())
    flat = "x = [\n" + "    'a',\n" * 400 + "]\n"  # long but flat: measured, then let through
    assert guard.shallow(ast.parse(flat), flat.encode())
    for deep in ("x = " + "+".join(["a"] * 1200) + "\n", "y = (\n" + "-" * 1200 + "1\n)\n"):
        data = deep.encode()
        tree = ast.parse(data)
        assert not guard.shallow(tree, data)
    chain = "x = " + "+".join(["a"] * 1200) + "\n"
    assert guard.screen(chain).deep  # what the screen would have caught
    # a compound statement with a short header is passed over (its blocks are looked at); a long one is walked
    long_sum = "+".join(["a"] * 1200)
    headers = [
        "@dec({})\ndef f():\n    pass\n",
        "def f(a={}):\n    pass\n",
        "def f(\n    a,\n): return {}\n",
        "class C(b[{}]):\n    pass\n",
        "if x:\n    pass\nelif {}:\n    pass\n",
        "try:\n    pass\nexcept E[{}]:\n    pass\n",
        "match x:\n    case 1 if {}:\n        pass\n",
        "for i in y:\n    if z:\n        f({})\n",
    ]
    for shape in headers:
        deep = shape.format(long_sum)
        assert not guard.shallow(ast.parse(deep), deep.encode()), shape
        short = shape.format("a")
        assert guard.shallow(ast.parse(short), short.encode()), shape


def test_string_values_read_without_literal_eval_agree_with_it():
    import warnings

    import libcst as cst

    from spmdcheck.frontend.guard import string_value

    cases = ['"abc"', "'abc'", '""', "''", '""""""', "''''''", '"""a\nb"""', "r'a'", "u'x'", "R'\\d'", "'\\n'"]
    cases += ["b'x'", "rb'x'", "'\"'", "\"'''\"", "'''a\"b'''", 'U"q"', "f'{x}'", "'a' 'b'", "3", "rank"]
    for case in cases:
        node = cst.parse_expression(case)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                expected = node.evaluated_value
            except Exception:  # noqa: BLE001 - names and numbers have none
                expected = None
        assert string_value(node) == expected and type(string_value(node)) is type(expected), case


def test_an_undone_edit_reuses_the_results_of_before(project):
    before = _same_as_cold(project)
    keys = _program_keys(project)
    _edit(project, "layers.py", "    dist.all_reduce(loss, group=GROUP)\n", "    loss = loss * 2\n")
    _same_as_cold(project)
    edited = _program_keys(project)
    assert keys < edited  # the new program's results, and the earlier ones still
    (project / "pkg" / "layers.py").write_text(LAYERS)
    assert _same_as_cold(project) == before
    assert _program_keys(project) == edited  # nothing new was analysed: the first run's results served


# The pre-pass's taint is reused after an edit no taint can see (engine/scan_cache.py `_words_only`); an edit
# it can see spreads it again. Three modules: `helpers_plain.helper` does nothing typed, `helpers_typed.helper`
# takes typed arguments; `user.f` mixes what `helper` returns, a finding only when `helper` is the typed one.
HELPERS_PLAIN = """\
def helper(h, residual):
    return h, residual
"""

HELPERS_TYPED = """\
from typing import Annotated

import torch

from spmd_types import I, V


def helper(h: Annotated[torch.Tensor, {"tp": V}], residual: Annotated[torch.Tensor, {"tp": I}]):
    return h, residual
"""

USER = """\
from pkg.helpers_plain import helper


def f(h, residual):
    partial, res = helper(h, residual)
    return res + partial
"""


def _check_in_process(root, monkeypatch, capsys, *extra: str) -> tuple[str, int]:
    """The JSON output of one run in this process, and how many times it spread the taint."""
    from spmdcheck.cli import main
    from spmdcheck.engine import scan_cache

    spread = []
    real = scan_cache.taint
    monkeypatch.setattr(scan_cache, "taint", lambda scans: spread.append(1) or real(scans))
    monkeypatch.chdir(root)
    monkeypatch.delenv("SPMDCHECK_NO_CACHE", raising=False)
    capsys.readouterr()
    main(["check", "pkg", "--output-format", "json", "--jobs", "1", *extra])
    return capsys.readouterr().out, len(spread)


@pytest.fixture
def helpers_project(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers_plain.py").write_text(HELPERS_PLAIN)
    (pkg / "helpers_typed.py").write_text(HELPERS_TYPED)
    (pkg / "user.py").write_text(USER)
    return tmp_path


def _warm_is_cold(root, monkeypatch, capsys) -> tuple[list[str], int]:
    """The codes a warm run reports (its output a cold run's) and how many times it spread the taint."""
    warm, spread = _check_in_process(root, monkeypatch, capsys)
    cold, _ = _check_in_process(root, monkeypatch, capsys, "--no-cache")
    assert warm == cold
    return [d["code"] for d in json.loads(warm)["diagnostics"]], spread


def test_an_import_from_another_module_spreads_the_taint_again(helpers_project, monkeypatch, capsys):
    """`from pkg.helpers_plain import helper` -> `from pkg.helpers_typed import helper` changes no word of the
    importing unit that a taint meets (`helper` is bound in both), but what its names can come from: the taint
    must spread again (it was reused, and the warm run passed a program a cold run flags)."""
    assert _warm_is_cold(helpers_project, monkeypatch, capsys) == ([], 1)
    path = helpers_project / "pkg" / "user.py"
    path.write_text(path.read_text().replace("helpers_plain", "helpers_typed"))
    assert _warm_is_cold(helpers_project, monkeypatch, capsys) == (["SPMD102"], 1)


def test_an_inert_statement_added_or_removed_keeps_the_taint(helpers_project, monkeypatch, capsys):
    """A module-level statement that reads nothing code that matters binds, and whose name nothing that matters
    reads, cannot change the taint: appended, appended again and removed, the taint is reused. One that code
    that matters reads, or one reading what such code binds, spreads it again."""
    path = helpers_project / "pkg" / "user.py"
    g = "\n\ndef g(h, residual):\n    return helper(h, residual), lookup\n"
    original = USER.replace("helpers_plain", "helpers_typed") + g
    path.write_text(original)
    assert _warm_is_cold(helpers_project, monkeypatch, capsys) == (["SPMD102"], 1)
    for text in (original + "_edit = 1\n", original + "_edit = 1\n_edit = 2\n", original):
        path.write_text(text)
        assert _warm_is_cold(helpers_project, monkeypatch, capsys) == (["SPMD102"], 0)
    path.write_text(original + "lookup = {}\n")  # `g`, a source, reads it
    assert _warm_is_cold(helpers_project, monkeypatch, capsys) == (["SPMD102"], 1)
    path.write_text(original)  # what mattered is gone
    assert _warm_is_cold(helpers_project, monkeypatch, capsys) == (["SPMD102"], 1)
    path.write_text(original + "_edit = f\n")  # it reads a source
    assert _warm_is_cold(helpers_project, monkeypatch, capsys) == (["SPMD102"], 1)


def test_a_re_analysis_after_a_writer_that_does_not_run_again_leaves_no_stale_position(tmp_path):
    """A root that re-analyses a forward after a writer changed its state (`("again", ...)`) is queued only when
    the writer's state changes. After a statement inserted above it, the selective run's writer wrote the same,
    the re-analysis did not run, and its recorded findings kept their old lines (found by the random module-level
    edits of tests/test_incremental.py): now the whole program runs, as a cold run does."""
    import pathlib
    import shutil

    source = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "torchtitan_style"
    target = tmp_path / "pkg" / "config_fields_bug_swapped_contract.py"
    target.parent.mkdir()
    shutil.copy(source / target.name, target)
    assert "SPMD403" in _run(tmp_path, "--output-format", "concise").stdout
    lines = target.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("class Linear"))
    target.write_text("".join([*lines[:at], "_edited = 10\n", *lines[at:]]))
    warm = _run(tmp_path, "--output-format", "concise")
    cold = _run(tmp_path, "--output-format", "concise", "--no-cache")
    assert warm.stdout == cold.stdout
    assert ":46:23: SPMD403" in warm.stdout

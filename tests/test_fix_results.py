"""What the fixes write: --diff shows exactly what --fix --unsafe-fixes then writes, and writes nothing; every
rule page's fixed example is its bad example with the checker's first suggestion applied; after --fix
--unsafe-fixes no fixture keeps the finding a fix was applied to."""

from __future__ import annotations

import difflib
import re
import shutil

import pytest
from cli_helpers import BUGGY, run
from conftest import FIXTURES
from test_docs_examples import BLOCK, settings_for

from spmdcheck.api import check_source
from spmdcheck.diagnostics.codes import CODES
from spmdcheck.fixes.rounds import fix_in_memory

MARK = re.compile(r"\s*#\s*(error|warning):\s*SPMD\d{3}(\s*,\s*SPMD\d{3})*")


def test_diff_prints_every_fix_and_writes_nothing(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    source = BUGGY.replace("z = F.gelu(y)", "z = F.gelu(y)  # noqa: SPMD102")
    (tmp_path / "crlf.py").write_bytes(source.replace("\n", "\r\n").encode())
    (tmp_path / "a.py").write_bytes(source.encode())
    (tmp_path / "ok.py").write_text("import torch\n")
    proc = run(["check", "--diff", "."], tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert (tmp_path / "a.py").read_bytes() == source.encode()
    assert (tmp_path / "crlf.py").read_bytes() == source.replace("\n", "\r\n").encode()
    assert (tmp_path / "ok.py").read_text() == "import torch\n"
    assert proc.stdout.count("--- a/") == 2 and "--- a/crlf.py" in proc.stdout
    proc = run(["check", "--diff", "a.py"], tmp_path)
    # the diff is exactly what --fix --unsafe-fixes then writes (the unsafe fix and the safe one)
    before = source
    run(["check", "--fix", "--unsafe-fixes", "a.py"], tmp_path)
    after = (tmp_path / "a.py").read_bytes().decode()
    assert "+z = F.gelu(spmd.all_reduce(y, 'tp', src=P, dst=R))" in proc.stdout
    expected = "".join(
        line if line.endswith(("\n", "\r")) else line + "\n"
        for line in difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile="a/a.py", tofile="b/a.py"
        )
    )
    assert proc.stdout == expected
    clean = run(["check", "--diff", "ok.py"], tmp_path)
    assert clean.returncode == 0 and clean.stdout == ""


def pages_with_fixes():
    for code, info in CODES.items():
        blocks = dict(BLOCK.findall(info.page()))
        if "bad" in blocks:
            yield pytest.param(code, blocks["bad"], blocks.get("fixed"), id=code)


@pytest.mark.parametrize("code,bad,fixed", list(pages_with_fixes()))
def test_fixed_example_is_the_bad_one_with_the_first_suggestion_applied(code, bad, fixed, registry):
    settings = settings_for(bad)
    # the rounds --fix --unsafe-fixes runs, in memory
    applied, count = fix_in_memory(bad, lambda text: check_source(text, f"<{code}>", settings, registry), True)
    if count == 0:
        pytest.skip(f"{code}: the checker suggests no placeable fix for this example")
    assert "".join(MARK.sub("", line) for line in applied.splitlines(keepends=True)) == fixed


def test_most_fixable_codes_have_a_checked_page(registry):
    checked = 0
    for param in pages_with_fixes():
        code, bad, _ = param.values
        settings = settings_for(bad)
        checked += fix_in_memory(bad, lambda text, c=code, s=settings: check_source(text, c, s, registry), True)[1] > 0
    assert checked >= 9  # SPMD101-106, 108, 109, 201 (and SPMD006, whose fix removes the comment)


def _line_map(before: list[str], after: list[str]) -> dict[int, range]:
    """1-based line of `before` -> the lines of `after` it became."""
    out: dict[int, range] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        for i in range(i1, i2):
            out[i + 1] = range(j1 + 1 + (i - i1), j1 + 2 + (i - i1)) if tag == "equal" else range(j1 + 1, j2 + 1)
    return out


def test_after_unsafe_fix_no_fixture_keeps_the_fixed_finding(tmp_path, registry):
    work = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, work)
    files = sorted(p for p in work.rglob("*.py"))
    before = {}
    for p in files:
        text = p.read_text()
        diags = check_source(text, str(p), settings_for(text), registry)
        before[p] = (text, [d.to_json() | {"suggestions": [{"span": s.span} for s in d.suggestions]} for d in diags])
    proc = run(["check", "--fix", "--unsafe-fixes", "--output-format", "json", "--isolated", "."], work, timeout=900)
    assert "Traceback" not in proc.stderr, proc.stderr
    fixed_sites, problems = 0, []
    for p in files:
        text, diags = before[p]
        applied = [d for d in diags if any(s["span"] for s in d["suggestions"])]
        if not applied:
            continue
        after_text = p.read_text()
        assert after_text != text, p
        after = check_source(after_text, str(p), settings_for(after_text), registry)
        lines = _line_map(text.splitlines(), after_text.splitlines())
        for d in applied:
            site = lines[d["line"]]
            left = [a for a in after if a.code == d["code"] and a.line in site]
            if left:
                problems.append((str(p.relative_to(work)), d["line"], d["message"], [a.message for a in left]))
            fixed_sites += 1
    assert not problems, "\n".join(map(str, problems))
    assert fixed_sites >= 20

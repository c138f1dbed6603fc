"""Every code's documentation is run: the bad example reports exactly its marked lines, the fixed one nothing."""

from __future__ import annotations

import re

import pytest
from conftest import expected_diagnostics

from spmdcheck.api import Settings, check_source
from spmdcheck.diagnostics.codes import CODES

BLOCK = re.compile(r"```python (bad|fixed)\n(.*?)```", re.DOTALL)
MESH = re.compile(r"^#\s*mesh:\s*(.+)$", re.MULTILINE)
STRICT = re.compile(r"^#\s*strict\s*$", re.MULTILINE)
PREVIEW = re.compile(r"^#\s*preview\s*$", re.MULTILINE)


def examples():
    for code, info in CODES.items():
        for kind, body in BLOCK.findall(info.page()):
            yield pytest.param(code, kind, body, id=f"{code}-{kind}")


def settings_for(body: str) -> Settings:
    m = MESH.search(body)
    mesh = tuple(a.strip() for a in m.group(1).split(",")) if m else ()
    return Settings(mesh=mesh, strict=bool(STRICT.search(body)), preview=bool(PREVIEW.search(body)))


def test_every_code_has_a_page_with_examples():
    for code, info in CODES.items():
        page = info.page()
        assert page.startswith(f"# {code} {info.name}"), code
        why = "## Why use it" if info.severity == "note" else "## Why is this a bug"
        for section in ("## What it does", why, "## The fix"):
            assert section in page, (code, section)
        if code not in ("SPMD000", "SPMD005"):  # no program shows a checker bug or a config error
            kinds = [k for k, _ in BLOCK.findall(page)]
            assert "bad" in kinds and "fixed" in kinds, code


@pytest.mark.parametrize("code,kind,body", list(examples()))
def test_example(code, kind, body, registry):
    diags = check_source(body, f"<{code}-{kind}>", settings_for(body), registry)
    got = {(d.line, d.code, d.severity) for d in diags}
    if kind == "fixed":
        assert got == set(), "\n".join(f"{d.line}: {d.code} {d.message}" for d in diags)
    else:
        want = expected_diagnostics(body)
        assert any(c == code for _, c, _ in want), "bad example must mark its own code"
        assert got == want, "\n".join(f"{d.line}: {d.code} {d.message}" for d in diags)

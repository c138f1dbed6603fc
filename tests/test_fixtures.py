"""Fixtures are the spec: every program's diagnostics must be exactly the ones written on its lines."""

from __future__ import annotations

import re

import pytest
from conftest import FIXTURES, expected_diagnostics

from spmdcheck.api import Settings, check_source

HEADER_MESH = re.compile(r"^#\s*spmdcheck:\s*mesh\s*=\s*\[([^\]]*)\]", re.MULTILINE)
HEADER_STRICT = re.compile(r"^#\s*spmdcheck:\s*strict\b", re.MULTILINE)

CASES = sorted(p for p in FIXTURES.rglob("*.py"))


def settings_for(text: str) -> Settings:
    m = HEADER_MESH.search(text)
    mesh = tuple(a.strip().strip("'\"") for a in m.group(1).split(",") if a.strip()) if m else ()
    return Settings(mesh=mesh, strict=bool(HEADER_STRICT.search(text)))


def test_corpus_is_large_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=[str(p.relative_to(FIXTURES)) for p in CASES])
def test_fixture(path, registry):
    text = path.read_text(encoding="utf-8")
    diags = check_source(text, str(path), settings_for(text), registry)
    got = {(d.line, d.code, d.severity) for d in diags}
    want = expected_diagnostics(text)
    assert got == want, "\n".join(f"{d.line}: {d.code} {d.message}" for d in diags)

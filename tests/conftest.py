"""Shared helpers for the test suite."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable, Mapping

import expectations
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SHARED = ROOT.parent / "shared"

UPDATE_OPTION = "--update-expectations"


def expected_diagnostics(text: str) -> set[tuple[int, str, str]]:
    """(line, code, severity) of the inline expectations (`# error: SPMD101 col 5`); codes alone are read too,
    as documentation examples write them."""
    return expectations.claims(text)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(UPDATE_OPTION, action="store_true", default=False,
                     help="rewrite the expected findings of the corpora (fixtures/, tests/inference_cases/, "
                          "tests/ground_truth/programs/) from the checker's actual output, as mypy's --update-data")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption(UPDATE_OPTION) and os.environ.get("CI"):
        raise pytest.UsageError(f"{UPDATE_OPTION} rewrites the corpora: never in CI")


class Expectations:
    """Compares a file's findings with the ones written in it, or (update mode) writes them in."""

    def __init__(self, update: bool) -> None:
        self.update = update

    def verify(self, path: pathlib.Path, found: Iterable[expectations.Expected]) -> None:
        self.verify_files({path: found})

    def verify_files(self, found: Mapping[pathlib.Path, Iterable[expectations.Expected]]) -> None:
        """Each file's findings are exactly the ones written in it (the modules of one program together)."""
        failures, rewritten = [], []
        for path, findings in found.items():
            findings = sorted(findings)
            text = path.read_text(encoding="utf-8")
            try:
                want = expectations.parse(text)
            except expectations.ExpectationError as exc:
                want, problem = None, str(exc)
            else:
                problem = expectations.difference(findings, want)
            if want == findings:
                continue
            if self.update:
                path.write_text(expectations.rewrite(text, findings), encoding="utf-8")
                rewritten.append(str(path))
            else:
                failures.append(f"{path}:\n{problem}")
        if rewritten:
            pytest.fail("expectations rewritten from the checker's output (read the diff): " + ", ".join(rewritten),
                        pytrace=False)
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)

    def skip_if_updating(self) -> None:
        """Tests that read many corpus files at once do not run while the update mode rewrites them."""
        if self.update:
            pytest.skip(f"{UPDATE_OPTION}: the corpus files are being rewritten")


@pytest.fixture
def expected_findings(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Expectations:
    # a message naming another file (`called from fixtures/programs/.../gpt.py:29`) shows its path relative to
    # the working directory: the pinned messages are the ones the checker prints at the repository's root
    monkeypatch.chdir(ROOT)
    return Expectations(request.config.getoption(UPDATE_OPTION))


@pytest.fixture(scope="session")
def registry():
    from spmdcheck.api import load_registry

    return load_registry(())


def expect_pending(request: pytest.FixtureRequest, reason: str | None) -> None:
    """Mark the running corpus test a strict expected failure when its fixture is pending (expectations.pending)."""
    if reason is not None:
        why = f"pending ({reason}): the checker does not find it yet"
        request.applymarker(pytest.mark.xfail(strict=True, reason=why))

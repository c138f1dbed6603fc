"""The expectation format of the corpora (tests/expectations.py): read, compare, rewrite."""
from __future__ import annotations

import pytest
from expectations import ExpectationError, Expected, claims, difference, parse, rewrite, without_expectations

SOURCE = """\
import torch
y = torch.relu(x)  # note: kept prose
z = y + 1
"""
FOUND = [
    Expected(2, 5, "SPMD201", "warning", "`x` is a per-rank partial sum: it goes through `torch.relu`"),
    Expected(3, 5, "SPMD102", "error", "Invariant on axis 'tp' cannot be mixed, first"),
    Expected(3, 5, "SPMD102", "error", "Invariant on axis 'tp' cannot be mixed, second"),
    Expected(3, 9, "SPMD104", "error", "a message: with colons, commas and # hashes"),
]


def test_rewrite_then_parse_gives_the_findings_back():
    text = rewrite(SOURCE, FOUND)
    assert text.splitlines()[1] == "y = torch.relu(x)  # note: kept prose  # warning: SPMD201 col 5"
    assert text.splitlines()[2] == "z = y + 1  # error: SPMD102 col 5, SPMD104 col 9"
    assert parse(text) == sorted(FOUND)
    assert claims(text) == {(2, "SPMD201", "warning"), (3, "SPMD102", "error"), (3, "SPMD104", "error")}
    assert without_expectations(text) == SOURCE.splitlines()
    assert rewrite(text, FOUND) == text  # idempotent
    assert rewrite(text, []) == SOURCE  # an empty report takes every expectation out


def test_a_finding_that_differs_in_any_part_is_a_difference():
    want = sorted(FOUND)
    assert difference(want, want) == ""
    other = {"line": 1, "column": 6, "code": "SPMD202", "message": "other"}
    for field, value in other.items():
        wrong = [Expected(**{**vars(want[0]), field: value}), *want[1:]]
        assert want[0].show() in difference(wrong, want).split("missing:")[1], field
    assert "missing:" in difference(want[:-1], want)  # one of two findings at one place is not enough


@pytest.mark.parametrize("text, problem", [
    ("x = 1  # error: SPMD102\n", "has no column"),
    ("x = 1  # error: SPMD102 col 1\n", "has no message"),
    ("x = 1\n\n# [expected messages] line:column CODE: message\n# 1:1 SPMD102: m\n", "no inline comment expects"),
    ("x = 1  # error: SPMD102 col 1\n\n# [expected messages] line:column CODE: message\n# one: m\n", "not a"),
])
def test_incomplete_or_inconsistent_expectations_are_refused(text, problem):
    with pytest.raises(ExpectationError, match=problem):
        parse(text)


def test_the_update_never_changes_the_code():
    with pytest.raises(ExpectationError, match="change the code"):
        rewrite("x = 1 + \\\n    2\n", [Expected(1, 1, "SPMD102", "error", "m")])

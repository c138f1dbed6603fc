"""One condition is one choice within a report (interp/branches.py `condition_key`, values.py `consistent`):
a value from the `if` arm of a condition never meets a value from its `else` arm, even through two `if`s
testing the same flag; a mismatch on one consistent path is still reported."""

from __future__ import annotations

import pytest

from spmdcheck.api import Settings, check_source

PROGRAM = """
import torch
import spmd_types as spmd
from spmd_types import I, S


class Block:
    def __init__(self, sp):
        self.sp = sp

    def forward(self, x, sp):
        x = spmd.assert_type(x, {{"tp": S(0)}})
        if {first}:
            a = x
        else:
            a = spmd.all_gather(x, "tp", src=S(0), dst=I)
        if {second}:
            b = x * 2
        else:
            b = spmd.all_gather(x * 2, "tp", src=S(0), dst=I)
        return a + b
"""


@pytest.mark.parametrize(
    "first,second,reported",
    [
        ("sp", "sp", 0),  # S(0) + S(0) or I + I: never S(0) + I
        ("self.sp", "self.sp", 0),  # an attribute of one object: one value within a run
        ("not sp", "not sp", 0),
        ("sp == 1", "sp == 1", 0),
        ("sp", "not sp", 2),  # S(0) + I whichever way the flag goes: both paths are bugs
        ("self.sp", "not self.sp", 2),
        ("sp", "x.dim() == 2", 2),  # two conditions: every combination can run
    ],
)
def test_two_ifs_on_one_flag_are_one_choice(first, second, reported, registry):
    diags = check_source(PROGRAM.format(first=first, second=second), "<t>", Settings(mesh=("tp",)), registry)
    assert [d.code for d in diags] == ["SPMD102"] * reported, [d.message for d in diags]


def test_an_arm_does_not_see_the_other_arm_of_its_condition(registry):
    gather_in_arm = "        if sp:\n            a = spmd.all_gather(a, 'tp', src=S(0), dst=I)\n        return a"
    source = PROGRAM.format(first="sp", second="sp").replace("        return a + b", gather_in_arm)
    diags = check_source(source, "<t>", Settings(mesh=("tp",)), registry)
    assert not diags, [d.message for d in diags]  # the gather in the `sp` arm never sees the other arm's I

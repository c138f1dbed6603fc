"""Branches judged by what the stubs declare (@assume_returns, @instance_test), in functions checked alone."""

from __future__ import annotations

import pytest

from spmdcheck.api import Settings, check_source

PROGRAM = """
import torch
import spmd_types as spmd
from torch.distributed.tensor import DTensor
from torchtitan.distributed.utils import get_spmd_backend


def f(x: torch.Tensor, w: torch.Tensor, flag: bool) -> torch.Tensor:
    x = spmd.assert_type(x, {{"tp": spmd.I}})
    w = spmd.assert_type(w, {{"tp": spmd.S(0)}})
    if {test}:
        return x @ w.t()  # I mixed with S: reported only where this branch can run
    return x
"""


@pytest.mark.parametrize(
    "test,runs",
    [
        ('get_spmd_backend() != "spmd_types"', False),
        ('get_spmd_backend() == "spmd_types"', True),
        ("isinstance(x, DTensor)", False),
        ("not isinstance(x, DTensor)", True),
        ("not spmd.is_type_checking()", False),
        ('get_spmd_backend() == "full_dtensor" and flag', False),  # decided by the assumed constant
        ('get_spmd_backend() == "spmd_types" or flag', True),
        ('flag and get_spmd_backend() == "full_dtensor"', True),  # an unknown first: both arms stay
        ("isinstance(flag, DTensor)", True),  # not a tensor the checker types: unknown, both arms
        ("isinstance(x, (DTensor, torch.Tensor))", True),  # a class the stubs say nothing about: unknown
    ],
)
def test_branch_is_judged_by_the_stubs(test, runs, registry):
    diags = check_source(PROGRAM.format(test=test), "<t>", Settings(mesh=("tp",)), registry)
    assert ("SPMD102" in {d.code for d in diags}) is runs, [d.message for d in diags]

"""`@dims("unflatten")` and `@dims("pad")`: where the shard dim goes, read from revealed types."""

from __future__ import annotations

import pytest

from spmdcheck.api import Settings, check_source

PROGRAM = """
import torch
import torch.nn.functional as F
import spmd_types as spmd
from spmdcheck.annotations import reveal_spmd_type


def f(x: torch.Tensor) -> None:
    x = spmd.assert_type(x, {{"tp": spmd.S({shard})}})
    y = {expr}
    reveal_spmd_type(y)
"""


@pytest.mark.parametrize(
    "shard,expr,want",
    [
        ("-1", "x.unflatten(-1, (-1, 64))", "S(-2)"),  # heads split: the shard goes to the outer new dim
        ("-1", "torch.unflatten(x, -1, (16, 64))", "V"),  # explicit outer size: each rank's block is unknown
        ("1", "x.unflatten(0, (2, -1))", "S(2)"),  # a dim after the split moves by len(sizes) - 1
        ("0", "x.unflatten(1, (2, -1))", "S(0)"),  # a dim before it stays
        ("-3", "x.unflatten(-1, (-1, 8))", "S(-4)"),  # counted from the end, before the split
        ("0", "x.unflatten(-1, (-1, 8))", "V"),  # front and end dims with an unknown rank: unknown
        ("-3", "F.pad(x, (0, 8))", "S(-3)"),  # the last dim is padded, the shard is elsewhere
        ("-2", "F.pad(x, (0, 8, 1, 1))", "V"),  # the sharded dim is padded: no global layout
        ("1", "F.pad(x, (0, 8))", "V"),  # rank unknown: whether dim 1 is padded is unknown
    ],
)
def test_shard_dim_through_shape_op(shard, expr, want, registry):
    diags = check_source(PROGRAM.format(shard=shard, expr=expr), "<t>", Settings(mesh=("tp",)), registry)
    notes = [d.message for d in diags if d.code == "SPMD901"]
    assert notes and f"forward {{tp: {want}}}" in notes[0], (notes, [d.message for d in diags])

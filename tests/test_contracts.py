"""Module contracts declared as data (torchtitan's ShardingConfig): across files, with and without the
pre-pass, through the real command line; and the stub decorators' vocabulary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from spmdcheck.rules.stubs import load_stub_source

LAYERS = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F
    from torch import nn


    class RowLinear(nn.Module):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.empty(dim, dim))

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            return torch.relu(F.linear(h, self.weight))
    """
)

PLAN = textwrap.dedent(
    """
    from spmd_types import P, R, S
    from torchtitan.distributed.parallel_dims import MeshAxisName
    from torchtitan.protocols.sharding import ShardingConfig, SpmdLayout

    from proj.layers import RowLinear

    TP = MeshAxisName.TP

    RowLinear._sharding_config = ShardingConfig(
        state_shardings={"weight": SpmdLayout({TP: S(1)})},
        in_src_shardings={"h": SpmdLayout({TP: S(-1)})},
        out_src_shardings=SpmdLayout({TP: P}),
        out_dst_shardings=SpmdLayout({TP: R}),
    )
    """
)


@pytest.mark.parametrize("prepass", ["on", "off"])
def test_a_contract_written_in_another_file_types_the_module_forward(tmp_path, prepass):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "__init__.py").write_text("")
    (proj / "layers.py").write_text(LAYERS)
    (proj / "plan.py").write_text(PLAN)
    env = {**os.environ, "SPMDCHECK_NO_PREPASS": "1" if prepass == "off" else ""}
    cmd = [sys.executable, "-m", "spmdcheck", "check", "--no-cache", "--output-format", "json", "proj"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    found = {(d["path"].replace(os.sep, "/"), d["line"], d["code"]) for d in json.loads(proc.stdout)["diagnostics"]}
    # the forward's pending sum (in_src S(-1) @ weight S(1)) goes through relu: only the contract says so
    assert found == {("proj/layers.py", 13, "SPMD201")}, proc.stdout


def test_contract_decorators_are_read_from_a_stub():
    registry = load_stub_source(
        textwrap.dedent(
            """
            from typing import Any
            from spmdcheck.annotations import layout, module_contract

            @layout(types="types", partition_spec="spec")
            class Layout:
                def __init__(self, types: Any, spec: Any = None) -> None: ...

            @module_contract(attach="plan", in_dst="inputs", out_src="output")
            class Plan:
                def __init__(self, *, inputs: Any = None, output: Any = None) -> None: ...
            """
        ),
        "fw",
        False,
        "<stub>",
    )
    assert registry.errors == []
    layout_rule, plan_rule = registry.lookup("fw.Layout"), registry.lookup("fw.Plan")
    assert layout_rule.layout.types == "types" and layout_rule.layout.partition_spec == "spec"
    assert [p.name for p in layout_rule.params] == ["types", "spec"]
    assert plan_rule.contract.attach == ("plan",) and plan_rule.contract.in_dst == "inputs"
    assert plan_rule.contract.out_src == "output" and plan_rule.contract.state is None
    assert plan_rule.kind == "module_contract"


def test_a_contract_field_that_is_not_a_name_is_a_stub_error():
    registry = load_stub_source(
        "from spmdcheck.annotations import module_contract\n@module_contract(attach='p', out_src=3)\nclass Plan: ...\n",
        "fw",
        False,
        "<stub>",
    )
    assert registry.errors and "module_contract" in registry.errors[0]

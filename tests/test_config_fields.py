"""Module contracts reaching modules through typed config fields, torchtitan's way, across files and through
the real command line: `FeedForward.Config` types `w1: Linear.Config`, `FeedForward.__init__` builds
`self.w1 = config.w1.build()`, and a sharding function in another file, given the config by an annotation
whose class is imported only under `if TYPE_CHECKING:`, sets `cfg.w1.sharding_config = ...`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from spmdcheck.rules.stubs import load_stub_source

LINEAR = textwrap.dedent(
    """
    from dataclasses import dataclass

    import torch
    import torch.nn.functional as F

    from torchtitan.protocols.module import Module


    class Linear(Module):
        @dataclass(kw_only=True, slots=True)
        class Config(Module.Config):
            in_features: int = 0
            out_features: int = 0

        def __init__(self, config: Config) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(config.out_features, config.in_features))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.linear(x, self.weight)
    """
)

FEED_FORWARD = textwrap.dedent(
    """
    from dataclasses import dataclass

    import torch
    import torch.nn.functional as F

    import spmd_types as spmd
    from proj.models.linear import Linear
    from torchtitan.protocols.module import Module


    class FeedForward(Module):
        @dataclass(kw_only=True, slots=True)
        class Config(Module.Config):
            w1: Linear.Config
            w2: Linear.Config
            w3: Linear.Config

        def __init__(self, config: Config) -> None:
            super().__init__()
            self.w1 = config.w1.build()
            self.w2 = config.w2.build()
            self.w3 = config.w3.build()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = self.w2(F.silu(self.w1(x)) * self.w3(x))
            spmd.assert_type(out, {"tp": spmd.R})
            return out
    """
)

SHARDING = textwrap.dedent(
    """
    from typing import TYPE_CHECKING

    import spmd_types as spmd
    from torchtitan.protocols.sharding import ShardingConfig, SpmdLayout

    if TYPE_CHECKING:
        from proj.models.feed_forward import FeedForward


    def colwise_config() -> ShardingConfig:
        return ShardingConfig(
            state_shardings={"weight": SpmdLayout({"tp": spmd.S(0)})},
            in_src_shardings={"x": SpmdLayout({"tp": spmd.I})},
            in_dst_shardings={"x": SpmdLayout({"tp": spmd.R})},
            out_src_shardings=SpmdLayout({"tp": spmd.S(-1)}),
        )


    def rowwise_config() -> ShardingConfig:
        return ShardingConfig(
            state_shardings={"weight": SpmdLayout({"tp": spmd.S(1)})},
            out_src_shardings=SpmdLayout({"tp": spmd.P}),
            out_dst_shardings=SpmdLayout({"tp": spmd.R}),
        )


    def set_dense_ffn_sharding(feed_forward_cfg) -> None:
        feed_forward_cfg.w1.sharding_config = colwise_config()
        feed_forward_cfg.w3.sharding_config = colwise_config()
        feed_forward_cfg.w2.sharding_config = W2_CONFIG


    def set_layer_sharding(ffn_cfg: "FeedForward.Config") -> None:
        set_dense_ffn_sharding(ffn_cfg)
    """
)


def _check(tmp_path, w2_config: str, prepass: str) -> set[tuple[str, int, str]]:
    models = tmp_path / "proj" / "models"
    models.mkdir(parents=True)
    (tmp_path / "proj" / "__init__.py").write_text("")
    (models / "__init__.py").write_text("")
    (models / "linear.py").write_text(LINEAR)
    (models / "feed_forward.py").write_text(FEED_FORWARD)
    (models / "sharding.py").write_text(SHARDING.replace("W2_CONFIG", w2_config))
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    env = {**os.environ, "SPMDCHECK_NO_PREPASS": "1" if prepass == "off" else ""}
    cmd = [sys.executable, "-m", "spmdcheck", "check", "--no-cache", "--output-format", "json", "proj"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return {(d["path"].replace(os.sep, "/"), d["line"], d["code"]) for d in json.loads(proc.stdout)["diagnostics"]}


@pytest.mark.parametrize("prepass", ["on", "off"])
def test_each_typed_field_gets_its_own_contract(tmp_path, prepass):
    # w1/w3 colwise, w2 rowwise: the FFN returns the all-reduced R its block asserts
    assert _check(tmp_path, "rowwise_config()", prepass) == set()


@pytest.mark.parametrize("prepass", ["on", "off"])
def test_a_field_given_the_wrong_contract_is_found_where_its_module_is_called(tmp_path, prepass):
    # w2 given the colwise contract (a copy-paste of w1's line): only `self.w2` changes, not every Linear
    found = _check(tmp_path, "colwise_config()", prepass)
    assert found == {
        ("proj/models/feed_forward.py", 26, "SPMD403"),  # w2's input is S(-1), its in_src says I
        ("proj/models/feed_forward.py", 27, "SPMD401"),  # and it returns S(-1), not R
    }


def test_the_builder_is_read_from_the_contract_decorator():
    registry = load_stub_source(
        "from spmdcheck.annotations import module_contract\n"
        "@module_contract(attach='plan', build=('build', 'make'))\nclass Plan: ...\n",
        "fw",
        False,
        "<stub>",
    )
    assert registry.errors == []
    assert registry.lookup("fw.Plan").contract.build == ("build", "make")

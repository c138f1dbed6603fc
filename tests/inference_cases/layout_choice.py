# spmdcheck: mesh = ["dp", "tp"]
"""A contract layout chosen by a condition the checker cannot decide (torchtitan's `rowwise_config(output_sp=)`):
each layout it may be is checked where the contract is written, and a call of the module gets the axes on
which every choice agrees (the others are unknown: silent)."""
import torch
import torch.nn.functional as F
from torch import nn

import spmd_types as spmd
from torchtitan.protocols.sharding import ShardingConfig, SpmdLayout


def rowwise_config(output_sp: bool) -> ShardingConfig:
    out_dst = (
        SpmdLayout({"dp": spmd.S(0), "tp": spmd.S(1)}) if output_sp else SpmdLayout({"dp": spmd.S(0), "tp": spmd.R})
    )
    return ShardingConfig(
        state_shardings={"weight": SpmdLayout({"tp": spmd.S(1)})},
        out_src_shardings=SpmdLayout({"dp": spmd.S(0), "tp": spmd.P}),
        out_dst_shardings=out_dst,
    )


def rowwise_config_without_sum(output_sp: bool) -> ShardingConfig:
    # the non-SP choice forgets tp: its pending sum has nowhere to go
    out_dst = SpmdLayout({"dp": spmd.S(0), "tp": spmd.S(1)}) if output_sp else SpmdLayout({"dp": spmd.S(0)})
    return ShardingConfig(
        state_shardings={"weight": SpmdLayout({"tp": spmd.S(1)})},
        out_src_shardings=SpmdLayout({"dp": spmd.S(0), "tp": spmd.P}),  # warning: SPMD405 col 27
        out_dst_shardings=out_dst,
    )


class RowLinear(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim, dim))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.weight)


def configure(output_sp: bool) -> None:
    RowLinear._sharding_config = rowwise_config(output_sp)


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = RowLinear(dim)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out = self.proj(h)
        spmd.assert_type(out, {"tp": spmd.R})  # tp is S(1) or R: unknown, silent
        spmd.assert_type(out, {"dp": spmd.R})  # error: SPMD401 col 9
        return out

# [expected messages] line:column CODE: message
# 29:27 SPMD405: the module's output is a pending sum on axis 'tp' (out_src) and the contract gives it no destination on that axis: nothing reduces it
# 55:9 SPMD401: assert_type: on axis 'dp' the value is S(0) but R is declared

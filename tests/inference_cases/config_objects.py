# spmdcheck: mesh = ["dp", "tp"]
"""Axes and flags held by config objects type as the direct form does: each idiom below reduces over the
axis its config names, so reducing the already reduced `dp` is found, and reducing `tp` is silent."""
import copy
import dataclasses
import types
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

from torch import nn

import spmd_types as spmd
from spmd_types import P, R
from spmdcheck.annotations import Local


@dataclass
class ParallelConfig:
    axis: str = "tp"
    sequence_parallel: bool = False


@dataclass
class ModelConfig:
    hidden: int = 8
    parallel: ParallelConfig = field(default_factory=ParallelConfig)


@dataclass
class DerivedConfig(ParallelConfig):
    scale: float = 1.0

    def __post_init__(self):
        if self.scale > 1.0:
            self.axis = "dp"


class Axes(NamedTuple):
    data: str = "dp"
    tensor: str = "tp"


def the_direct_form(x: Local["tp: P, dp: R"]):
    return spmd.all_reduce(x, "dp", src=P, dst=R)  # error: SPMD302 col 12


def a_dataclass_field_given_by_keyword(x: Local["tp: P, dp: R"]):
    cfg = ParallelConfig(axis="dp")
    return spmd.all_reduce(x, cfg.axis, src=P, dst=R)  # error: SPMD302 col 12


def a_dataclass_field_given_by_position(x: Local["tp: P, dp: R"]):
    cfg = ParallelConfig("dp")
    return spmd.all_reduce(x, cfg.axis, src=P, dst=R)  # error: SPMD302 col 12


def a_dataclass_default(x: Local["tp: P, dp: R"]):
    cfg = ParallelConfig()
    return spmd.assert_type(spmd.all_reduce(x, cfg.axis, src=P, dst=R), {"dp": R, "tp": R})


def a_nested_dataclass(x: Local["tp: P, dp: R"]):
    cfg = ModelConfig(parallel=ParallelConfig(axis="dp"))
    return spmd.all_reduce(x, cfg.parallel.axis, src=P, dst=R)  # error: SPMD302 col 12


def a_default_factory(x: Local["tp: P, dp: R"]):
    cfg = ModelConfig(hidden=4)
    return spmd.assert_type(spmd.all_reduce(x, cfg.parallel.axis, src=P, dst=R), {"dp": R, "tp": R})


def a_base_dataclass_field_and_post_init(x: Local["tp: P, dp: R"]):
    cfg = DerivedConfig(scale=2.0)
    return spmd.all_reduce(x, cfg.axis, src=P, dst=R)  # error: SPMD302 col 12


def dataclasses_replace(x: Local["tp: P, dp: R"]):
    cfg = dataclasses.replace(ParallelConfig(), axis="dp")
    return spmd.all_reduce(x, cfg.axis, src=P, dst=R)  # error: SPMD302 col 12


def a_copy_keeps_the_fields(x: Local["tp: P, dp: R"]):
    cfg = copy.copy(ParallelConfig(axis="dp"))
    return spmd.all_reduce(x, cfg.axis, src=P, dst=R)  # error: SPMD302 col 12


def a_simple_namespace(x: Local["tp: P, dp: R"]):
    cfg = types.SimpleNamespace(axis="dp", hidden=8)
    return spmd.all_reduce(x, cfg.axis, src=P, dst=R)  # error: SPMD302 col 12


def a_named_tuple_field(x: Local["tp: P, dp: R"]):
    axes = Axes(tensor="dp")
    return spmd.all_reduce(x, axes.tensor, src=P, dst=R)  # error: SPMD302 col 12


def keywords_from_dict_call(x: Local["tp: P, dp: R"]):
    cfg = ParallelConfig(axis="dp")
    kw = dict(src=P, dst=R)
    return spmd.all_reduce(x, cfg.axis, **kw)  # error: SPMD302 col 12


def keywords_from_dict_display(x: Local["tp: P, dp: R"]):
    cfg = ParallelConfig(axis="dp")
    kw = {"axis": cfg.axis, "src": P, "dst": R}
    return spmd.all_reduce(x, **kw)  # error: SPMD302 col 12


def a_partial_factory(x: Local["tp: P, dp: R"]):
    reduce_dp = partial(spmd.all_reduce, axis="dp", src=P, dst=R)
    return reduce_dp(x)  # error: SPMD302 col 12


def a_partial_whose_keyword_the_call_overrides(x: Local["tp: P, dp: R"]):
    reduce_any = partial(spmd.all_reduce, axis="tp", src=P, dst=R)
    return reduce_any(x, axis="dp")  # error: SPMD302 col 12


def unreadable_keywords_leave_the_fields_unknown(x: Local["tp: P, dp: R"], options: dict):
    cfg = ParallelConfig(**options)
    return spmd.all_reduce(x, cfg.axis, src=P, dst=R)


class Reduce(nn.Module):
    def __init__(self, axis):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        return spmd.all_reduce(x, self.axis, src=P, dst=R)  # error: SPMD302 col 16


def an_attribute_set_from_a_constructor_argument(x: Local["tp: P, dp: R"]):
    return Reduce(ParallelConfig(axis="dp").axis)(x)


class SequenceParallelBlock(nn.Module):
    """The flag comes from a dataclass default, overridden by the constructor's argument."""

    def __init__(self, config: ParallelConfig, sequence_parallel=None):
        super().__init__()
        self.sequence_parallel = config.sequence_parallel if sequence_parallel is None else sequence_parallel

    def forward(self, x):
        if self.sequence_parallel:
            return spmd.all_gather(x, "tp", src=spmd.S(0), dst=R)
        return x


def a_flag_from_a_dataclass_is_decided(x: Local["tp: S(0), dp: R"]):
    block = SequenceParallelBlock(ParallelConfig(sequence_parallel=True))
    return spmd.assert_type(block(x), {"dp": R, "tp": R})


def a_flag_from_the_constructor_is_decided(x: Local["tp: S(0), dp: R"]):
    block = SequenceParallelBlock(ParallelConfig(), sequence_parallel=True)
    return spmd.assert_type(block(x), {"dp": R, "tp": R})


def a_flag_replaced_is_decided(x: Local["tp: S(0), dp: R"]):
    block = SequenceParallelBlock(dataclasses.replace(ParallelConfig(), sequence_parallel=True))
    return spmd.assert_type(block(x), {"dp": R, "tp": R})


def the_default_flag_is_decided_too(x: Local["tp: S(0), dp: R"]):
    block = SequenceParallelBlock(ParallelConfig())
    return spmd.assert_type(block(x), {"dp": R, "tp": spmd.S(0)})

# [expected messages] line:column CODE: message
# 45:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 50:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 55:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 65:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 75:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 80:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 85:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 90:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 95:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 101:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 107:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 112:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 117:12 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size
# 131:16 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `x` is R: it is already reduced, and reducing again multiplies it by the axis size

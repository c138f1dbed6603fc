"""spmdcheck rules for `torchtitan.protocols.sharding` (torchtitan 0.3.0).

A `ShardingConfig` set on a module (`Module.Config(sharding_config=...)`, `cfg.sharding_config = ...`,
or the module's `_sharding_config`) is applied by `Module.parallelize`: each input named in
`in_src_shardings` arrives with that layout and is redistributed to its `in_dst_shardings` layout,
`forward` runs on those (its parameters and buffers laid out by `state_shardings`), its output must be
`out_src_shardings` and is redistributed to `out_dst_shardings`. The decorator below says which
constructor field is which part of that contract; spmdcheck reads nothing else about torchtitan here.

`Module.Config.build()` constructs the module a config object configures (its owner class) and hands it
that config's `sharding_config`: `build` below. With typed config fields (`w1: Linear.Config` in
`FeedForward.Config`) and `self.w1 = config.w1.build()`, a contract set on `cfg.w1.sharding_config`
reaches the `Linear` held as `self.w1`, and only that one.

Under the spmd_types backend, `Module._redistribute_inputs` raises `ValueError` ("SPMD input
redistribution requires explicit in_src_shardings") for a tensor input named in `in_dst_shardings` but
not in `in_src_shardings`: `dst_needs_src` below.
"""

from typing import Any

from spmdcheck.annotations import module_contract

from torchtitan.distributed.parallel_dims import SpmdLayout as SpmdLayout

@module_contract(
    attach=("sharding_config", "_sharding_config"),
    state="state_shardings",
    in_src="in_src_shardings",
    in_dst="in_dst_shardings",
    out_src="out_src_shardings",
    out_dst="out_dst_shardings",
    redistribute="spmd_types.redistribute",
    build=("build",),
    dst_needs_src=True,
)
class ShardingConfig:
    def __init__(
        self,
        *,
        state_shardings: Any = None,
        in_src_shardings: Any = None,
        in_dst_shardings: Any = None,
        out_src_shardings: Any = None,
        out_dst_shardings: Any = None,
        local_map: Any = None,
    ) -> None: ...

class LocalMapConfig:
    def __init__(self, *, in_grad_placements: Any) -> None: ...

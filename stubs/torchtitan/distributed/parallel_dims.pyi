"""spmdcheck rules for `torchtitan.distributed.parallel_dims` (torchtitan 0.3.0).

`MeshAxisName` is a StrEnum: each member is the axis name it spells, so
`{MeshAxisName.TP: S(0)}` and a module alias `TP = MeshAxisName.TP` name the
axis "tp" in type dicts.
"""

from enum import StrEnum
from typing import Any

from spmdcheck.annotations import layout

class MeshAxisName(StrEnum):
    DP = "dp"
    DP_REPLICATE = "dp_replicate"
    DP_SHARD = "dp_shard"
    FSDP = "fsdp"
    TP = "tp"
    CP = "cp"
    PP = "pp"
    EP = "ep"
    EFSDP = "efsdp"

# A per-axis SPMD type keyed by mesh axis names; with `partition_spec`, the axes at position i of the
# spec shard tensor dim i (`{DP: V, TP: V}` with `(DP, TP)` is `{DP: S(0), TP: S(1)}`).
@layout(types="axis_types", partition_spec="partition_spec")
class SpmdLayout:
    def __init__(self, axis_types: Any, partition_spec: Any = None) -> None: ...

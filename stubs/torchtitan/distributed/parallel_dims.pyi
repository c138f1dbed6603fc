"""spmdcheck rules for `torchtitan.distributed.parallel_dims` (torchtitan 0.3.0).

`MeshAxisName` is a StrEnum: each member is the axis name it spells, so
`{MeshAxisName.TP: S(0)}` and a module alias `TP = MeshAxisName.TP` name the
axis "tp" in type dicts.
"""

from enum import StrEnum

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

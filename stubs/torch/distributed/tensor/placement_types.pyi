"""spmdcheck rules for `torch.distributed.tensor.placement_types` (where the placements are defined)."""

from torch.distributed.tensor import Partial as Partial
from torch.distributed.tensor import Placement as Placement
from torch.distributed.tensor import Replicate as Replicate
from torch.distributed.tensor import Shard as Shard

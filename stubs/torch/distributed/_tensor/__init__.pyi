"""spmdcheck rules for `torch.distributed._tensor`, the older spelling of `torch.distributed.tensor`."""

from torch.distributed.tensor import DTensor as DTensor
from torch.distributed.tensor import Partial as Partial
from torch.distributed.tensor import Placement as Placement
from torch.distributed.tensor import Replicate as Replicate
from torch.distributed.tensor import Shard as Shard
from torch.distributed.tensor import distribute_tensor as distribute_tensor
from torch.distributed.device_mesh import DeviceMesh as DeviceMesh
from torch.distributed.device_mesh import init_device_mesh as init_device_mesh

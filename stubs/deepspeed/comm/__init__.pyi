"""spmdcheck rules for `deepspeed.comm` (never imported).

DeepSpeed's communication module wraps torch.distributed with its signatures
(plus profiling keywords), over the same process groups: its entries are
torch.distributed's, re-exported (rules/stubs.py aliases).
"""

from torch.distributed import ProcessGroup as ProcessGroup
from torch.distributed import ReduceOp as ReduceOp
from torch.distributed import all_gather as all_gather
from torch.distributed import all_gather_into_tensor as all_gather_into_tensor
from torch.distributed import all_reduce as all_reduce
from torch.distributed import all_to_all_single as all_to_all_single
from torch.distributed import barrier as barrier
from torch.distributed import broadcast as broadcast
from torch.distributed import get_rank as get_rank
from torch.distributed import get_world_size as get_world_size
from torch.distributed import is_initialized as is_initialized
from torch.distributed import new_group as new_group
from torch.distributed import reduce as reduce
from torch.distributed import reduce_scatter_tensor as reduce_scatter_tensor

"""spmdcheck rules for `torch.distributed.nn` (re-exports `.functional`, as torch does)."""

from .functional import all_gather as all_gather
from .functional import all_reduce as all_reduce
from .functional import all_to_all as all_to_all
from .functional import all_to_all_single as all_to_all_single
from .functional import broadcast as broadcast
from .functional import reduce as reduce
from .functional import reduce_scatter as reduce_scatter

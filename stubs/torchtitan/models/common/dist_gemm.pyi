"""spmdcheck rules for `torchtitan.models.common.dist_gemm` (torchtitan 0.3.0).

`_tp_group_from_context()` returns the tp group of the mesh in scope (or None when there is no tp
axis, and then the caller runs the stock projection): the group of axis "tp".
"""

from typing import Any

from spmdcheck.annotations import process_group

@process_group("tp")
def _tp_group_from_context() -> Any: ...

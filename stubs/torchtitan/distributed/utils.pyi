"""spmdcheck rules for `torchtitan.distributed.utils` (torchtitan 0.3.0).

spmdcheck checks torchtitan's spmd_types backend: local tensors typed by spmd_types. A branch on the
backend is judged by that, so code for the DTensor backends is not checked against local types.
"""

from spmdcheck.annotations import assume_returns

@assume_returns("spmd_types")
def get_spmd_backend() -> str: ...

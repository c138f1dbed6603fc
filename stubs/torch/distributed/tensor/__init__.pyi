"""spmdcheck rules for `torch.distributed.tensor` (never imported).

spmdcheck types local tensors (spmd_types); a tensor it has typed is never a DTensor, so
`isinstance(x, DTensor)` on one is False and its DTensor-only branch is not checked.
"""

from spmdcheck.annotations import instance_test

@instance_test(False)
class DTensor: ...

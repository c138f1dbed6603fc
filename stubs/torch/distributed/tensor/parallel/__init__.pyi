"""spmdcheck rules for `torch.distributed.tensor.parallel` (never imported).

The parallel styles and `parallelize_module` are read as plans (analysis/tp_plans.py, tables in
analysis/tp_styles.py), not as stub rules; what is here is the rest.
"""

from typing import Any

from spmdcheck.annotations import context

# `with loss_parallel():` a loss marked `@parallel_loss` (F.cross_entropy) takes a DTensor sharded on its class
# dim and a local target, and gives a Replicate loss DTensor (analysis/dtensor/propagate.py)
@context("loss_parallel")
def loss_parallel() -> Any: ...

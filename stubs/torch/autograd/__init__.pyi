# torch.autograd: the functional form of Tensor.backward() checks the loss the same way.
from typing import Any

from spmdcheck.annotations import spmd_api
from torch import Tensor

@spmd_api("backward")
def backward(
    tensors: Tensor,
    grad_tensors: Tensor | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None: ...

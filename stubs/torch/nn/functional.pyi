"""spmdcheck rules for `torch.nn.functional` (read with libcst, never imported).

`linear` is a contraction (`...i,oi->...o`) plus a bias: without bias it is
multilinear, with a bias a Partial input is the affine error (project
decision 1; spmd_types keeps F.linear NONLINEAR). Everything else here is
NONLINEAR; elementwise ops keep a tracked shard dim, ops that normalise or
reduce over dims drop it (plain V), `softmax`/`log_softmax`/`normalize` drop
it only when `dim` is the sharded dim.
"""

from typing import Any, Sequence  # noqa: UP035 (collections.abc would become a stub alias)

from torch import Tensor

from spmdcheck.annotations import contraction, dims, nonlinear, parallel_loss

@contraction("linear", bias="bias")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor: ...

# Multilinear in (input1, input2, weight) plus a bias; kept NONLINEAR for now.
@nonlinear
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor: ...

# ----- activations (elementwise) ---------------------------------------------
@nonlinear
@dims("keep")
def gelu(input: Tensor, approximate: str = "none") -> Tensor: ...
@nonlinear
@dims("keep")
def relu(input: Tensor, inplace: bool = False) -> Tensor: ...
@nonlinear
@dims("keep")
def silu(input: Tensor, inplace: bool = False) -> Tensor: ...
@nonlinear
@dims("keep")
def sigmoid(input: Tensor) -> Tensor: ...
@nonlinear
@dims("keep")
def tanh(input: Tensor) -> Tensor: ...
@nonlinear
@dims("keep")
def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor: ...
@nonlinear
@dims("keep")
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor: ...
@nonlinear
@dims("keep")
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor: ...

# ----- softmax family: a softmax along a sharded dim is local per block ------
@nonlinear
@dims("narrow", "dim")
def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor: ...
@nonlinear
@dims("narrow", "dim")
def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor: ...
@nonlinear
@dims("narrow", "dim")
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor: ...

# ----- normalisations -------------------------------------------------------
# layer_norm / rms_norm take statistics over the trailing normalized dims: a shard on a leading
# (sequence, batch) dim is kept. Sharding the normalized dims is itself a bug (statistics of a block).
@nonlinear
@dims("keep")
def layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-05,
) -> Tensor: ...
@nonlinear
@dims("keep")
def rms_norm(
    input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None, eps: float | None = None
) -> Tensor: ...
@nonlinear
def group_norm(
    input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-05
) -> Tensor: ...
@nonlinear
def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-05,
) -> Tensor: ...

# ----- losses -----------------------------------------------------------------
@nonlinear
@parallel_loss
def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor: ...
@nonlinear
def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor: ...
@nonlinear
def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor: ...

# ----- others -----------------------------------------------------------------
@nonlinear
def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor: ...
@nonlinear
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor: ...
@nonlinear
@dims("pad", "pad")
def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor: ...

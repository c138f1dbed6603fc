"""spmdcheck rules for `torch` (module functions and `torch.Tensor`).

Read by spmdcheck with libcst, never imported. Vocabulary: docs/stubs.md.
Linearity follows spmd_types 0.3.1 `_OP_REGISTRY` (reference type_system.md
section 2.5), with the project's deliberate differences
(shared/reference/README.md, decision 1):

* dtype/device casts (`float`, `half`, `bfloat16`, `double`, `to`, `type`,
  `type_as`, `cpu`, `cuda`) and `__getitem__` are LINEAR here (NONLINEAR in
  spmd_types);
* `view_as`, `expand_as` and `type_as` read only the shape/dtype of `other`,
  so `other` is annotated `Any` (structural) rather than `Tensor`;
* `zeros_like` is LINEAR (a Partial input gives a Partial of zeros), and
  `as_tensor` is typed like its tensor input (LINEAR), untyped for Python data.

Everything not listed here is NONLINEAR (P is an error; R/I/V by the lattice).

Annotation conventions (the loader reads annotations as text):

* `Tensor | Number` marks operands where a Python number is the weak scalar
  (`add`, `sub`, `div`); a plain `Tensor` ignores numbers (`mul`, `matmul`);
* `Tensor | Any` (`repeat_interleave(repeats)`, `as_tensor(data)`) is an
  operand when a tensor is passed while an int there stays structural;
* index tensors (`index`, `mask`, `repeats`, the tensors of `x[idx]`) are
  operands, as in spmd_types: a rank-varying index makes the result varying
  (and a Partial source with a Replicate index is reported as affine, like
  spmd_types does);
* `out: Tensor | None` is never an operand; passing it is a mutation.
"""

from typing import Any, Sequence  # noqa: UP035 (collections.abc would become a stub alias)

from spmdcheck.annotations import (
    affine,
    context,
    contraction,
    dims,
    divisor,
    factory,
    grad,
    inplace,
    linear,
    multilinear,
    nonlinear,
    opaque,
    passthrough,
    rank_of,
    shape_of,
    spmd_api,
)

Number = int | float | bool | complex

class dtype: ...
class device: ...
class layout: ...
class memory_format: ...
class Generator: ...
class Size(tuple[int, ...]): ...

# ---------------------------------------------------------------------------
# Autograd contexts (`with torch.no_grad():`, `@torch.no_grad()`)
# ---------------------------------------------------------------------------

@context("no_grad")
def no_grad() -> Any: ...
@context("enable_grad")
def enable_grad() -> Any: ...
@context("no_grad")
def inference_mode(mode: bool = True) -> Any: ...

# ---------------------------------------------------------------------------
# LINEAR: add / subtract, sign, copy
# ---------------------------------------------------------------------------

@linear
@dims("keep")
def add(input: Tensor | Number, other: Tensor | Number, *, alpha: Number = 1, out: Tensor | None = None) -> Tensor: ...
@linear
@dims("keep")
def sub(input: Tensor | Number, other: Tensor | Number, *, alpha: Number = 1, out: Tensor | None = None) -> Tensor: ...
@linear
@dims("keep")
def subtract(
    input: Tensor | Number, other: Tensor | Number, *, alpha: Number = 1, out: Tensor | None = None
) -> Tensor: ...
@linear
@dims("keep")
def neg(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@linear
@dims("keep")
def negative(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@linear
@dims("keep")
def positive(input: Tensor) -> Tensor: ...
@linear
@dims("keep")
def clone(input: Tensor, *, memory_format: memory_format | None = None) -> Tensor: ...
@linear
@grad("no")
@dims("keep")
def detach(input: Tensor) -> Tensor: ...
@linear
@grad("no")
@inplace("input")
@dims("keep")
def detach_(input: Tensor) -> Tensor: ...

# ---------------------------------------------------------------------------
# LINEAR: reductions (a sum over a sharded dim is a pending sum)
# ---------------------------------------------------------------------------

@linear
@dims("reduce", "dim", "keepdim")
def sum(
    input: Tensor,
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: dtype | None = None,
    out: Tensor | None = None,
) -> Tensor: ...
@linear
@dims("mean", "dim", "keepdim")
def mean(
    input: Tensor,
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: dtype | None = None,
    out: Tensor | None = None,
) -> Tensor: ...
@linear
@dims("reduce", "dim", "keepdim")
def nansum(
    input: Tensor,
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: dtype | None = None,
    out: Tensor | None = None,
) -> Tensor: ...
@linear
@dims("mean", "dim", "keepdim")
def nanmean(
    input: Tensor,
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: dtype | None = None,
    out: Tensor | None = None,
) -> Tensor: ...

# cumsum keeps every dim; along a sharded dim the local prefix sums are not
# blocks of the global ones, so the shard is dropped there ("narrow").
@linear
@dims("narrow", "dim")
def cumsum(input: Tensor, dim: int, *, dtype: dtype | None = None, out: Tensor | None = None) -> Tensor: ...

# ---------------------------------------------------------------------------
# LINEAR: concatenation (a list of operands)
# ---------------------------------------------------------------------------

@linear
@dims("cat", "dim")
def cat(tensors: Sequence[Tensor], dim: int = 0, *, out: Tensor | None = None) -> Tensor: ...
@linear
@dims("cat", "dim")
def concat(tensors: Sequence[Tensor], dim: int = 0, *, out: Tensor | None = None) -> Tensor: ...
@linear
@dims("cat", "dim")
def concatenate(tensors: Sequence[Tensor], dim: int = 0, *, out: Tensor | None = None) -> Tensor: ...
@linear
@dims("stack", "dim")
def stack(tensors: Sequence[Tensor], dim: int = 0, *, out: Tensor | None = None) -> Tensor: ...
@linear
def hstack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor: ...
@linear
def vstack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor: ...
@linear
def dstack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor: ...
@linear
def column_stack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor: ...
@linear
def row_stack(tensors: Sequence[Tensor], *, out: Tensor | None = None) -> Tensor: ...
@linear
def block_diag(*tensors: Tensor) -> Tensor: ...

# ---------------------------------------------------------------------------
# LINEAR: views / reshapes
# ---------------------------------------------------------------------------

@linear
@dims("reshape", "shape")
def reshape(input: Tensor, shape: Sequence[int]) -> Tensor: ...
@linear
@dims("flatten", "start_dim", "end_dim")
def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor: ...
@linear
@dims("unflatten", "dim", "sizes")
def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor: ...
@linear
@dims("reshape")
def ravel(input: Tensor) -> Tensor: ...
@linear
@dims("squeeze", "dim")
def squeeze(input: Tensor, dim: int | Sequence[int] | None = None) -> Tensor: ...
@linear
@dims("unsqueeze", "dim")
def unsqueeze(input: Tensor, dim: int) -> Tensor: ...
@linear
def broadcast_to(input: Tensor, size: Sequence[int]) -> Tensor: ...

# ---------------------------------------------------------------------------
# LINEAR: transposes
# ---------------------------------------------------------------------------

@linear
@dims("transpose", "dim0", "dim1")
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor: ...
@linear
@dims("t")
def t(input: Tensor) -> Tensor: ...
@linear
@dims("permute", "dims")
def permute(input: Tensor, dims: Sequence[int]) -> Tensor: ...
@linear
@dims("movedim", "source", "destination")
def movedim(input: Tensor, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor: ...
@linear
@dims("movedim", "source", "destination")
def moveaxis(input: Tensor, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor: ...
@linear
@dims("transpose", "axis0", "axis1")
def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor: ...
@linear
@dims("transpose", "dim0", "dim1")
def swapdims(input: Tensor, dim0: int, dim1: int) -> Tensor: ...

# ---------------------------------------------------------------------------
# LINEAR: selection / slicing
# ---------------------------------------------------------------------------

@linear
@dims("narrow", "dim")
def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor: ...
@linear
@dims("select", "dim")
def select(input: Tensor, dim: int, index: int) -> Tensor: ...
@linear
@dims("narrow", "dim")
def index_select(input: Tensor, dim: int, index: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@linear
@dims("narrow", "dim")
def gather(
    input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False, out: Tensor | None = None
) -> Tensor: ...
@linear
@dims("split", "dim")
def split(tensor: Tensor, split_size_or_sections: int | list[int], dim: int = 0) -> tuple[Tensor, ...]: ...
@linear
@dims("split", "dim", pieces="chunks")
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]: ...
@linear
@dims("select", "dim")
def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]: ...
@linear
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor: ...

# ---------------------------------------------------------------------------
# LINEAR: reordering / repetition
# ---------------------------------------------------------------------------

@linear
def flip(input: Tensor, dims: Sequence[int]) -> Tensor: ...
@linear
def fliplr(input: Tensor) -> Tensor: ...
@linear
def flipud(input: Tensor) -> Tensor: ...
@linear
def roll(input: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] = ()) -> Tensor: ...
@linear
def tile(input: Tensor, dims: Sequence[int]) -> Tensor: ...
@linear
def repeat_interleave(
    input: Tensor, repeats: Tensor | Any, dim: int | None = None, *, output_size: int | None = None
) -> Tensor: ...

# ---------------------------------------------------------------------------
# MULTILINEAR: multiplication (a Python number there is ignored), products
# ---------------------------------------------------------------------------

@multilinear
@dims("keep")
def mul(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@multilinear
@dims("keep")
def multiply(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@contraction("matmul")
def matmul(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@contraction("mk,kn->mn")
def mm(input: Tensor, mat2: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@contraction("bmk,bkn->bmn")
def bmm(input: Tensor, mat2: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@contraction("einsum")
def einsum(equation: str, *operands: Tensor) -> Tensor: ...
@contraction("k,k->")
def dot(input: Tensor, tensor: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@contraction("k,k->")
def vdot(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@contraction("mk,k->m")
def mv(input: Tensor, vec: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@contraction("i,j->ij")
def outer(input: Tensor, vec2: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@contraction("i,j->ij")
def ger(input: Tensor, vec2: Tensor, *, out: Tensor | None = None) -> Tensor: ...

# inner/tensordot: multilinear, equation depends on ranks/dims (no S refinement)
@multilinear
def inner(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@multilinear
def tensordot(a: Tensor, b: Tensor, dims: Any = 2, *, out: Tensor | None = None) -> Tensor: ...

# ---------------------------------------------------------------------------
# MULTILINEAR with a nonlinear divisor: division
# ---------------------------------------------------------------------------

@divisor("other")
@dims("keep")
def div(
    input: Tensor | Number, other: Tensor | Number, *, rounding_mode: str | None = None, out: Tensor | None = None
) -> Tensor: ...
@divisor("other")
@dims("keep")
def divide(
    input: Tensor | Number, other: Tensor | Number, *, rounding_mode: str | None = None, out: Tensor | None = None
) -> Tensor: ...
@divisor("other")
@dims("keep")
def true_divide(input: Tensor | Number, other: Tensor | Number, *, out: Tensor | None = None) -> Tensor: ...

# ---------------------------------------------------------------------------
# Affine compounds: linear(product of the other tensors, bias)
# ---------------------------------------------------------------------------

@affine("input", "mk,kn->mn")
def addmm(
    input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Number = 1, alpha: Number = 1, out: Tensor | None = None
) -> Tensor: ...
@affine("input", "mk,k->m")
def addmv(
    input: Tensor, mat: Tensor, vec: Tensor, *, beta: Number = 1, alpha: Number = 1, out: Tensor | None = None
) -> Tensor: ...
@affine("input", "bmk,bkn->mn")
def addbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Number = 1, alpha: Number = 1, out: Tensor | None = None
) -> Tensor: ...
@affine("input", "bmk,bkn->bmn")
def baddbmm(
    input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Number = 1, alpha: Number = 1, out: Tensor | None = None
) -> Tensor: ...
@affine("input", "i,j->ij")
def addr(
    input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Number = 1, alpha: Number = 1, out: Tensor | None = None
) -> Tensor: ...

# ---------------------------------------------------------------------------
# Factories (type_system.md 2.6)
# ---------------------------------------------------------------------------

@factory("deterministic", size="size")
def zeros(*size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False) -> Tensor: ...
@factory("deterministic", size="size")
def ones(*size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False) -> Tensor: ...
@factory("deterministic", size="size")
def full(
    size: Sequence[int],
    fill_value: Number,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor: ...
@factory("deterministic", rank=1)
def arange(
    start: Number = 0,
    end: Number | None = None,
    step: Number = 1,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor: ...
@factory("deterministic", rank=1)
def linspace(
    start: Number,
    end: Number,
    steps: int,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor: ...
@factory("deterministic", rank=1)
def logspace(
    start: Number,
    end: Number,
    steps: int,
    base: float = 10.0,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor: ...
@factory("deterministic", rank=2)
def eye(
    n: int, m: int | None = None, *, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False
) -> Tensor: ...
@factory("deterministic")
def tensor(
    data: Any, *, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False, pin_memory: bool = False
) -> Tensor: ...

# as_tensor(t) of a tensor returns it (maybe cast): typed like that input, and
# untyped for Python data (a "deterministic" factory would make a V input R).
@linear
@factory("like")
def as_tensor(
    data: Tensor | Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False
) -> Tensor: ...
@factory("random", size="size")
def randn(
    *size: Any,
    generator: Generator | None = None,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor: ...
@factory("random", size="size")
def rand(
    *size: Any,
    generator: Generator | None = None,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor: ...
@factory("random")
def randint(
    *args: Any,
    generator: Generator | None = None,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor: ...
@factory("random", rank=1)
def randperm(
    n: int,
    *,
    generator: Generator | None = None,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor: ...
@factory("random", size="size")
def empty(*size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False) -> Tensor: ...
@factory("random")
def normal(
    mean: Tensor | float = 0.0,
    std: Tensor | float = 1.0,
    size: Any = None,
    *,
    generator: Generator | None = None,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor: ...

# Zeros are a valid value of any type, Partial included (the zero map is
# linear): `acc = torch.zeros_like(p); acc += p` stays P. The other *_like
# factories are NONLINEAR (a Partial input gives R).
@linear
@factory("like")
def zeros_like(
    input: Tensor,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: memory_format | None = None,
) -> Tensor: ...
@factory("like")
def ones_like(
    input: Tensor,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: memory_format | None = None,
) -> Tensor: ...
@factory("like")
def full_like(
    input: Tensor,
    fill_value: Number,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: memory_format | None = None,
) -> Tensor: ...
@factory("like")
def randn_like(
    input: Tensor,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: memory_format | None = None,
) -> Tensor: ...
@factory("like")
def rand_like(
    input: Tensor,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: memory_format | None = None,
) -> Tensor: ...
@factory("like")
def empty_like(
    input: Tensor,
    *,
    dtype: dtype | None = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: memory_format | None = None,
) -> Tensor: ...

# ---------------------------------------------------------------------------
# Metadata (untyped Python values)
# ---------------------------------------------------------------------------

@passthrough
def numel(input: Tensor) -> int: ...
@passthrough
def is_tensor(obj: Any) -> bool: ...
@passthrough
def is_floating_point(input: Tensor) -> bool: ...
@passthrough
def is_complex(input: Tensor) -> bool: ...
@passthrough
def manual_seed(seed: int) -> Any: ...

# ---------------------------------------------------------------------------
# NONLINEAR elementwise math (P is an error); shards are kept
# ---------------------------------------------------------------------------

@nonlinear
@dims("keep")
def exp(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def log(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def log1p(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def expm1(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def sqrt(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def rsqrt(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def abs(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def pow(input: Tensor | Number, exponent: Tensor | Number, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def square(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def reciprocal(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def sign(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def erf(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def relu(input: Tensor) -> Tensor: ...
@nonlinear
@dims("keep")
def sigmoid(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def tanh(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def sin(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def cos(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def floor(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def ceil(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def round(input: Tensor, *, decimals: int = 0, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def clamp(
    input: Tensor, min: Tensor | Number | None = None, max: Tensor | Number | None = None, *, out: Tensor | None = None
) -> Tensor: ...

clip = clamp

@nonlinear
@dims("keep")
def where(
    condition: Tensor, input: Tensor | Number, other: Tensor | Number, *, out: Tensor | None = None
) -> Tensor: ...
@nonlinear
@dims("keep")
def maximum(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def minimum(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def masked_fill(input: Tensor, mask: Tensor, value: Tensor | Number) -> Tensor: ...
@nonlinear
@dims("keep")
def isnan(input: Tensor) -> Tensor: ...
@nonlinear
@dims("keep")
def isinf(input: Tensor) -> Tensor: ...
@nonlinear
@dims("keep")
def isfinite(input: Tensor) -> Tensor: ...
@nonlinear
@dims("keep")
def nan_to_num(
    input: Tensor,
    nan: float = 0.0,
    posinf: float | None = None,
    neginf: float | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor: ...
@nonlinear
@dims("keep")
def logical_not(input: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def logical_and(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def logical_or(input: Tensor, other: Tensor, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def gt(input: Tensor, other: Tensor | Number, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def lt(input: Tensor, other: Tensor | Number, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def ge(input: Tensor, other: Tensor | Number, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def le(input: Tensor, other: Tensor | Number, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def eq(input: Tensor, other: Tensor | Number, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
@dims("keep")
def ne(input: Tensor, other: Tensor | Number, *, out: Tensor | None = None) -> Tensor: ...

# softmax along a sharded dim normalises each block locally: shard dropped there.
@nonlinear
@dims("narrow", "dim")
def softmax(input: Tensor, dim: int, dtype: dtype | None = None) -> Tensor: ...
@nonlinear
@dims("narrow", "dim")
def log_softmax(input: Tensor, dim: int, dtype: dtype | None = None) -> Tensor: ...

# ---------------------------------------------------------------------------
# NONLINEAR reductions. No @dims: a max/var/... over a sharded dim is not a
# pending *sum*, so the result is plain V (see the report / docs).
# ---------------------------------------------------------------------------

@nonlinear
def max(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor: ...
@nonlinear
def min(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor: ...
@nonlinear
def amax(
    input: Tensor, dim: int | Sequence[int] = (), keepdim: bool = False, *, out: Tensor | None = None
) -> Tensor: ...
@nonlinear
def amin(
    input: Tensor, dim: int | Sequence[int] = (), keepdim: bool = False, *, out: Tensor | None = None
) -> Tensor: ...
@nonlinear
def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
def norm(
    input: Tensor,
    p: Any = "fro",
    dim: Any = None,
    keepdim: bool = False,
    dtype: dtype | None = None,
    *,
    out: Tensor | None = None,
) -> Tensor: ...
@nonlinear
def var(
    input: Tensor, dim: int | Sequence[int] | None = None, *, correction: Number = 1, keepdim: bool = False
) -> Tensor: ...
@nonlinear
def std(
    input: Tensor, dim: int | Sequence[int] | None = None, *, correction: Number = 1, keepdim: bool = False
) -> Tensor: ...
@nonlinear
def logsumexp(
    input: Tensor, dim: int | Sequence[int], keepdim: bool = False, *, out: Tensor | None = None
) -> Tensor: ...
@nonlinear
def prod(
    input: Tensor,
    dim: int | None = None,
    keepdim: bool = False,
    *,
    dtype: dtype | None = None,
    out: Tensor | None = None,
) -> Tensor: ...
@nonlinear
def all(input: Tensor, dim: int | None = None, keepdim: bool = False, *, out: Tensor | None = None) -> Tensor: ...
@nonlinear
def any(input: Tensor, dim: int | None = None, keepdim: bool = False, *, out: Tensor | None = None) -> Tensor: ...

# ===========================================================================
# torch.Tensor
# ===========================================================================

class Tensor:
    # ----- LINEAR: add / subtract --------------------------------------
    @linear
    @dims("keep")
    def add(self, other: Tensor | Number, *, alpha: Number = 1) -> Tensor: ...
    @linear
    @dims("keep")
    def add_(self, other: Tensor | Number, *, alpha: Number = 1) -> Tensor: ...
    @linear
    @dims("keep")
    def __add__(self, other: Tensor | Number) -> Tensor: ...
    @linear
    @dims("keep")
    def __radd__(self, other: Tensor | Number) -> Tensor: ...
    @linear
    @dims("keep")
    def __iadd__(self, other: Tensor | Number) -> Tensor: ...
    @linear
    @dims("keep")
    def sub(self, other: Tensor | Number, *, alpha: Number = 1) -> Tensor: ...
    @linear
    @dims("keep")
    def sub_(self, other: Tensor | Number, *, alpha: Number = 1) -> Tensor: ...
    @linear
    @dims("keep")
    def subtract(self, other: Tensor | Number, *, alpha: Number = 1) -> Tensor: ...
    @linear
    @dims("keep")
    def subtract_(self, other: Tensor | Number, *, alpha: Number = 1) -> Tensor: ...
    @linear
    @dims("keep")
    def __sub__(self, other: Tensor | Number) -> Tensor: ...
    @linear
    @dims("keep")
    def __rsub__(self, other: Tensor | Number) -> Tensor: ...
    @linear
    @dims("keep")
    def __isub__(self, other: Tensor | Number) -> Tensor: ...

    # ----- LINEAR: sign, copy ------------------------------------------
    @linear
    @dims("keep")
    def neg(self) -> Tensor: ...
    @linear
    @dims("keep")
    def neg_(self) -> Tensor: ...
    @linear
    @dims("keep")
    def negative(self) -> Tensor: ...
    @linear
    @dims("keep")
    def negative_(self) -> Tensor: ...
    @linear
    @dims("keep")
    def positive(self) -> Tensor: ...
    @linear
    @dims("keep")
    def __neg__(self) -> Tensor: ...
    @linear
    @dims("keep")
    def __pos__(self) -> Tensor: ...
    @linear
    @dims("keep")
    def clone(self, *, memory_format: memory_format | None = None) -> Tensor: ...
    @linear
    @grad("no")
    @dims("keep")
    def detach(self) -> Tensor: ...
    @linear
    @grad("no")
    @dims("keep")
    def detach_(self) -> Tensor: ...

    # ----- LINEAR: dtype / device casts (project decision 1) -----------
    @linear
    @dims("keep")
    def float(self, memory_format: memory_format | None = None) -> Tensor: ...
    @linear
    @dims("keep")
    def half(self, memory_format: memory_format | None = None) -> Tensor: ...
    @linear
    @dims("keep")
    def bfloat16(self, memory_format: memory_format | None = None) -> Tensor: ...
    @linear
    @dims("keep")
    def double(self, memory_format: memory_format | None = None) -> Tensor: ...
    @linear
    @dims("keep")
    def to(self, *args: Any, non_blocking: bool = False, copy: bool = False) -> Tensor: ...
    @linear
    @dims("keep")
    def type(self, dtype: Any = None, non_blocking: bool = False) -> Tensor: ...
    @linear
    @dims("keep")
    def type_as(self, other: Any) -> Tensor: ...
    @linear
    @dims("keep")
    def cpu(self, memory_format: memory_format | None = None) -> Tensor: ...
    @linear
    @dims("keep")
    def cuda(self, device: Any = None, non_blocking: bool = False) -> Tensor: ...

    # ----- indexing (the analyser handles the index expression itself) -
    # Basic indexing is linear; the analyser passes only the index *tensors*
    # here (advanced indexing, typed NONLINEAR by the analyser), so a
    # rank-varying index makes the result varying.
    @linear
    def __getitem__(self, *indices: Tensor) -> Tensor: ...

    # ----- LINEAR: reductions ------------------------------------------
    @linear
    @dims("reduce", "dim", "keepdim")
    def sum(
        self, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: dtype | None = None
    ) -> Tensor: ...
    @linear
    @dims("mean", "dim", "keepdim")
    def mean(
        self, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: dtype | None = None
    ) -> Tensor: ...
    @linear
    @dims("reduce", "dim", "keepdim")
    def nansum(
        self, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: dtype | None = None
    ) -> Tensor: ...
    @linear
    @dims("mean", "dim", "keepdim")
    def nanmean(
        self, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: dtype | None = None
    ) -> Tensor: ...
    @linear
    @dims("narrow", "dim")
    def cumsum(self, dim: int, *, dtype: dtype | None = None) -> Tensor: ...
    @linear
    @dims("narrow", "dim")
    def cumsum_(self, dim: int, *, dtype: dtype | None = None) -> Tensor: ...

    # ----- LINEAR: views / reshapes ------------------------------------
    @linear
    @dims("reshape", "shape")
    def reshape(self, *shape: Any) -> Tensor: ...
    @linear
    @dims("reshape", "shape")
    def view(self, *shape: Any) -> Tensor: ...
    @linear
    @dims("reshape")
    def view_as(self, other: Any) -> Tensor: ...
    @linear
    @dims("flatten", "start_dim", "end_dim")
    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor: ...
    @linear
    @dims("unflatten", "dim", "sizes")
    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor: ...
    @linear
    @dims("reshape")
    def ravel(self) -> Tensor: ...
    @linear
    @dims("squeeze", "dim")
    def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor: ...
    @linear
    @dims("squeeze", "dim")
    def squeeze_(self, dim: int | Sequence[int] | None = None) -> Tensor: ...
    @linear
    @dims("unsqueeze", "dim")
    def unsqueeze(self, dim: int) -> Tensor: ...
    @linear
    @dims("unsqueeze", "dim")
    def unsqueeze_(self, dim: int) -> Tensor: ...
    @linear
    @dims("keep")
    def contiguous(self, memory_format: memory_format | None = None) -> Tensor: ...
    @linear
    @dims("expand", "size")  # a size that is a sharded dim's local size (`w.shape[0]`) makes R that block: S(d)
    def expand(self, *size: Any) -> Tensor: ...
    @linear
    def expand_as(self, other: Any) -> Tensor: ...
    @linear
    def broadcast_to(self, *size: Any) -> Tensor: ...
    @linear
    def unfold(self, dimension: int, size: int, step: int) -> Tensor: ...

    # ----- LINEAR: transposes ------------------------------------------
    @linear
    @dims("transpose", "dim0", "dim1")
    def transpose(self, dim0: int, dim1: int) -> Tensor: ...
    @linear
    @dims("transpose", "dim0", "dim1")
    def transpose_(self, dim0: int, dim1: int) -> Tensor: ...
    @linear
    @dims("t")
    def t(self) -> Tensor: ...
    @linear
    @dims("t")
    def t_(self) -> Tensor: ...
    @linear
    @dims("permute", "dims")
    def permute(self, *dims: Any) -> Tensor: ...
    @linear
    @dims("movedim", "source", "destination")
    def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor: ...
    @linear
    @dims("movedim", "source", "destination")
    def moveaxis(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor: ...
    @linear
    @dims("transpose", "axis0", "axis1")
    def swapaxes(self, axis0: int, axis1: int) -> Tensor: ...
    @linear
    @dims("transpose", "dim0", "dim1")
    def swapdims(self, dim0: int, dim1: int) -> Tensor: ...
    @property
    @linear
    @dims("t")
    def T(self) -> Tensor: ...
    @property
    @linear
    @dims("T")
    def mT(self) -> Tensor: ...
    @property
    @linear
    @dims("t")
    def H(self) -> Tensor: ...
    @property
    @linear
    @dims("T")
    def mH(self) -> Tensor: ...
    @property
    @linear
    @dims("keep")
    def real(self) -> Tensor: ...
    @property
    @linear
    @dims("keep")
    def imag(self) -> Tensor: ...

    # ----- LINEAR: selection / slicing ---------------------------------
    @linear
    @dims("narrow", "dim")
    def narrow(self, dim: int, start: int, length: int) -> Tensor: ...
    @linear
    @dims("select", "dim")
    def select(self, dim: int, index: int) -> Tensor: ...
    @linear
    @dims("narrow", "dim")
    def index_select(self, dim: int, index: Tensor) -> Tensor: ...
    @linear
    @dims("narrow", "dim")
    def gather(self, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor: ...
    @linear
    @dims("split", "dim")
    def split(self, split_size: int | list[int], dim: int = 0) -> tuple[Tensor, ...]: ...
    @linear
    @dims("split", "dim", pieces="chunks")
    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]: ...
    @linear
    @dims("select", "dim")
    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]: ...
    @linear
    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor: ...

    # ----- LINEAR: reordering / repetition -----------------------------
    @linear
    def flip(self, *dims: Any) -> Tensor: ...
    @linear
    def fliplr(self) -> Tensor: ...
    @linear
    def flipud(self) -> Tensor: ...
    @linear
    def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] = ()) -> Tensor: ...
    @linear
    def repeat(self, *repeats: Any) -> Tensor: ...
    @linear
    def tile(self, *dims: Any) -> Tensor: ...
    @linear
    def repeat_interleave(
        self, repeats: Tensor | Any, dim: int | None = None, *, output_size: int | None = None
    ) -> Tensor: ...

    # ----- MULTILINEAR: multiplication, products -----------------------
    @multilinear
    @dims("keep")
    def mul(self, other: Tensor) -> Tensor: ...
    @multilinear
    @dims("keep")
    def mul_(self, other: Tensor) -> Tensor: ...
    @multilinear
    @dims("keep")
    def multiply(self, other: Tensor) -> Tensor: ...
    @multilinear
    @dims("keep")
    def multiply_(self, other: Tensor) -> Tensor: ...
    @multilinear
    @dims("keep")
    def __mul__(self, other: Tensor) -> Tensor: ...
    @multilinear
    @dims("keep")
    def __rmul__(self, other: Tensor) -> Tensor: ...
    @multilinear
    @dims("keep")
    def __imul__(self, other: Tensor) -> Tensor: ...
    @contraction("matmul")
    def matmul(self, other: Tensor) -> Tensor: ...
    @contraction("matmul")
    def __matmul__(self, other: Tensor) -> Tensor: ...
    # other @ self: the operands are reversed, so no fixed equation (plain V).
    @multilinear
    def __rmatmul__(self, other: Tensor) -> Tensor: ...
    @contraction("mk,kn->mn")
    def mm(self, mat2: Tensor) -> Tensor: ...
    @contraction("bmk,bkn->bmn")
    def bmm(self, mat2: Tensor) -> Tensor: ...
    @contraction("k,k->")
    def dot(self, tensor: Tensor) -> Tensor: ...
    @contraction("k,k->")
    def vdot(self, other: Tensor) -> Tensor: ...
    @contraction("mk,k->m")
    def mv(self, vec: Tensor) -> Tensor: ...
    @contraction("i,j->ij")
    def outer(self, vec2: Tensor) -> Tensor: ...
    @contraction("i,j->ij")
    def ger(self, vec2: Tensor) -> Tensor: ...
    @multilinear
    def inner(self, other: Tensor) -> Tensor: ...

    # ----- MULTILINEAR with a nonlinear divisor -----------------------
    @divisor("other")
    @dims("keep")
    def div(self, other: Tensor | Number, *, rounding_mode: str | None = None) -> Tensor: ...
    @divisor("other")
    @dims("keep")
    def div_(self, other: Tensor | Number, *, rounding_mode: str | None = None) -> Tensor: ...
    @divisor("other")
    @dims("keep")
    def divide(self, other: Tensor | Number, *, rounding_mode: str | None = None) -> Tensor: ...
    @divisor("other")
    @dims("keep")
    def divide_(self, other: Tensor | Number, *, rounding_mode: str | None = None) -> Tensor: ...
    @divisor("other")
    @dims("keep")
    def true_divide(self, other: Tensor | Number) -> Tensor: ...
    @divisor("other")
    @dims("keep")
    def true_divide_(self, other: Tensor | Number) -> Tensor: ...
    @divisor("other")
    @dims("keep")
    def __truediv__(self, other: Tensor | Number) -> Tensor: ...
    @divisor("other")
    @dims("keep")
    def __itruediv__(self, other: Tensor | Number) -> Tensor: ...
    # `other / self`: the receiver is the divisor.
    @divisor("self")
    @dims("keep")
    def __rtruediv__(self, other: Tensor | Number) -> Tensor: ...

    # ----- Affine compounds --------------------------------------------
    @affine("self", "mk,kn->mn")
    def addmm(self, mat1: Tensor, mat2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor: ...
    @affine("self", "mk,kn->mn")
    def addmm_(self, mat1: Tensor, mat2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor: ...
    @affine("self", "mk,k->m")
    def addmv(self, mat: Tensor, vec: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor: ...
    @affine("self", "mk,k->m")
    def addmv_(self, mat: Tensor, vec: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor: ...
    @affine("self", "bmk,bkn->mn")
    def addbmm(self, batch1: Tensor, batch2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor: ...
    @affine("self", "bmk,bkn->mn")
    def addbmm_(self, batch1: Tensor, batch2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor: ...
    @affine("self", "bmk,bkn->bmn")
    def baddbmm(self, batch1: Tensor, batch2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor: ...
    @affine("self", "bmk,bkn->bmn")
    def baddbmm_(self, batch1: Tensor, batch2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor: ...
    @affine("self", "i,j->ij")
    def addr(self, vec1: Tensor, vec2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor: ...
    @affine("self", "i,j->ij")
    def addr_(self, vec1: Tensor, vec2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor: ...

    # ----- Factories from a receiver: R on every mesh axis --------------
    @factory("new", size="size")
    def new_zeros(
        self, *size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor: ...
    @factory("new", size="size")
    def new_ones(
        self, *size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor: ...
    @factory("new", size="size")
    def new_full(
        self,
        size: Sequence[int],
        fill_value: Number,
        *,
        dtype: dtype | None = None,
        device: Any = None,
        requires_grad: bool = False,
    ) -> Tensor: ...
    @factory("new", size="size")
    def new_empty(
        self, *size: Any, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor: ...
    @factory("new")
    def new_tensor(
        self, data: Any, *, dtype: dtype | None = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor: ...

    # ----- Autograd ------------------------------------------------------
    # requires_grad_(False) is not modelled: the stub says "yes".
    @linear
    @grad("yes")
    @inplace("self")
    @dims("keep")
    def requires_grad_(self, requires_grad: bool = True) -> Tensor: ...
    @passthrough
    def retain_grad(self) -> None: ...
    @passthrough
    def register_hook(self, hook: Any) -> Any: ...
    @spmd_api("backward")
    def backward(
        self,
        gradient: Tensor | None = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Any = None,
    ) -> None: ...

    # ----- Metadata (untyped Python values) -----------------------------
    @shape_of
    @passthrough
    def size(self, dim: int | None = None) -> Size: ...
    @rank_of
    @passthrough
    def dim(self) -> int: ...
    @rank_of
    @passthrough
    def ndimension(self) -> int: ...
    @passthrough
    def numel(self) -> int: ...
    @passthrough
    def nelement(self) -> int: ...
    @passthrough
    def stride(self, dim: int | None = None) -> Any: ...
    @passthrough
    def storage_offset(self) -> int: ...
    @passthrough
    def element_size(self) -> int: ...
    @passthrough
    def get_device(self) -> int: ...
    @passthrough
    def is_contiguous(self, memory_format: memory_format | None = None) -> bool: ...
    @passthrough
    def is_floating_point(self) -> bool: ...
    @passthrough
    def is_complex(self) -> bool: ...
    @passthrough
    def is_pinned(self) -> bool: ...
    @passthrough
    def is_set_to(self, tensor: Any) -> bool: ...
    @passthrough
    def dim_order(self) -> tuple[int, ...]: ...
    @passthrough
    def untyped_storage(self) -> Any: ...
    @passthrough
    def data_ptr(self) -> int: ...
    @passthrough
    def item(self) -> float: ...
    @passthrough
    def tolist(self) -> Any: ...
    @passthrough
    def __len__(self) -> int: ...
    @passthrough
    def __bool__(self) -> bool: ...
    @passthrough
    def __int__(self) -> int: ...
    @passthrough
    def __float__(self) -> float: ...
    @passthrough
    def __index__(self) -> int: ...
    @property
    @shape_of
    @passthrough
    def shape(self) -> Size: ...
    @property
    @passthrough
    def dtype(self) -> dtype: ...
    @property
    @passthrough
    def device(self) -> device: ...
    @property
    @passthrough
    def layout(self) -> layout: ...
    @property
    @rank_of
    @passthrough
    def ndim(self) -> int: ...
    @property
    @passthrough
    def itemsize(self) -> int: ...
    @property
    @passthrough
    def nbytes(self) -> int: ...
    @property
    @passthrough
    def requires_grad(self) -> bool: ...
    @property
    @passthrough
    def grad_fn(self) -> Any: ...
    @property
    @passthrough
    def is_leaf(self) -> bool: ...
    @property
    @passthrough
    def is_cuda(self) -> bool: ...
    @property
    @passthrough
    def is_meta(self) -> bool: ...
    @property
    @opaque
    def grad(self) -> Tensor | None: ...
    @property
    @opaque
    def data(self) -> Tensor: ...

    # ----- NONLINEAR elementwise (shards kept) --------------------------
    @nonlinear
    @dims("keep")
    def exp(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def exp_(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def log(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def log1p(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def expm1(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def sqrt(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def sqrt_(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def rsqrt(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def abs(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def abs_(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def pow(self, exponent: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def pow_(self, exponent: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def square(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def reciprocal(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def sign(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def erf(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def relu(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def relu_(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def sigmoid(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def tanh(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def sin(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def cos(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def floor(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def ceil(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def round(self, *, decimals: int = 0) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def clamp(self, min: Tensor | Number | None = None, max: Tensor | Number | None = None) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def clamp_(self, min: Tensor | Number | None = None, max: Tensor | Number | None = None) -> Tensor: ...
    clip = clamp
    clip_ = clamp_
    @nonlinear
    @dims("keep")
    def where(self, condition: Tensor, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def maximum(self, other: Tensor) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def minimum(self, other: Tensor) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def masked_fill(self, mask: Tensor, value: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def masked_fill_(self, mask: Tensor, value: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def isnan(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def isinf(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def isfinite(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def logical_not(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def logical_and(self, other: Tensor) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def logical_or(self, other: Tensor) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def gt(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def lt(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def ge(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def le(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def eq(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def ne(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("narrow", "dim")
    def softmax(self, dim: int, dtype: dtype | None = None) -> Tensor: ...
    @nonlinear
    @dims("narrow", "dim")
    def log_softmax(self, dim: int, dtype: dtype | None = None) -> Tensor: ...
    # Overwrites: the result takes the source's type (spmd_types: NONLINEAR).
    @nonlinear
    def copy_(self, src: Tensor, non_blocking: bool = False) -> Tensor: ...
    @nonlinear
    def fill_(self, value: Tensor | Number) -> Tensor: ...
    @nonlinear
    def zero_(self) -> Tensor: ...

    # ----- NONLINEAR dunders --------------------------------------------
    @nonlinear
    @dims("keep")
    def __pow__(self, exponent: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __rpow__(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __ipow__(self, exponent: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __gt__(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __lt__(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __ge__(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __le__(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __eq__(self, other: Tensor | Number) -> Tensor: ...  # type: ignore[override]
    @nonlinear
    @dims("keep")
    def __ne__(self, other: Tensor | Number) -> Tensor: ...  # type: ignore[override]
    @nonlinear
    @dims("keep")
    def __abs__(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __invert__(self) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __and__(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __or__(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __xor__(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __floordiv__(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __rfloordiv__(self, other: Tensor | Number) -> Tensor: ...
    @nonlinear
    @dims("keep")
    def __mod__(self, other: Tensor | Number) -> Tensor: ...

    # ----- NONLINEAR reductions (no @dims: not a pending sum) -----------
    @nonlinear
    def max(self, dim: int | None = None, keepdim: bool = False) -> Tensor: ...
    @nonlinear
    def min(self, dim: int | None = None, keepdim: bool = False) -> Tensor: ...
    @nonlinear
    def amax(self, dim: int | Sequence[int] = (), keepdim: bool = False) -> Tensor: ...
    @nonlinear
    def amin(self, dim: int | Sequence[int] = (), keepdim: bool = False) -> Tensor: ...
    @nonlinear
    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor: ...
    @nonlinear
    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor: ...
    @nonlinear
    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: dtype | None = None) -> Tensor: ...
    @nonlinear
    def var(
        self, dim: int | Sequence[int] | None = None, *, correction: Number = 1, keepdim: bool = False
    ) -> Tensor: ...
    @nonlinear
    def std(
        self, dim: int | Sequence[int] | None = None, *, correction: Number = 1, keepdim: bool = False
    ) -> Tensor: ...
    @nonlinear
    def logsumexp(self, dim: int | Sequence[int], keepdim: bool = False) -> Tensor: ...
    @nonlinear
    def prod(self, dim: int | None = None, keepdim: bool = False, *, dtype: dtype | None = None) -> Tensor: ...
    @nonlinear
    def all(self, dim: int | None = None, keepdim: bool = False) -> Tensor: ...
    @nonlinear
    def any(self, dim: int | None = None, keepdim: bool = False) -> Tensor: ...

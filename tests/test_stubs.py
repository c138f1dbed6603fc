"""The shipped stubs (stubs/) load cleanly and say what the reference says.

Linearity tables: shared/reference/type_system.md section 2.5 (spmd_types 0.3.1
`_OP_REGISTRY`) with the project's overrides (reference README, decision 1).
Collectives/conversions: sections 3.2-3.4 and 3.7; Megatron: section 6.
"""

from __future__ import annotations

import importlib
import pathlib

import pytest

from spmdcheck.lattice import Kind, Linearity
from spmdcheck.rules.model import OpRule, ParamRole, Returns, Transition
from spmdcheck.rules.stubs import Registry, load_stub_dirs

STUBS = pathlib.Path(__file__).resolve().parent.parent / "stubs"

LINEAR = Linearity.LINEAR
MULTILINEAR = Linearity.MULTILINEAR
NONLINEAR = Linearity.NONLINEAR


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_stub_dirs([STUBS])


def rule(registry: Registry, qualname: str) -> OpRule:
    found = registry.lookup(qualname)
    assert found is not None, f"no stub entry for {qualname}"
    return found


def test_stubs_load_without_errors(registry: Registry) -> None:
    assert registry.errors == []
    assert len(registry.rules) > 400


# ---------------------------------------------------------------- section 2.5: LINEAR

# (name, has a torch.X function form)
LINEAR_OPS = [
    # add / subtract
    ("add", True),
    ("sub", True),
    ("subtract", True),
    # sign
    ("neg", True),
    ("negative", True),
    ("positive", True),
    # copy
    ("clone", True),
    ("detach", True),
    ("detach_", True),
    # reductions
    ("sum", True),
    ("mean", True),
    ("nansum", True),
    ("nanmean", True),
    ("cumsum", True),
    # views / reshapes
    ("reshape", True),
    ("view", False),
    ("view_as", False),
    ("flatten", True),
    ("unflatten", True),
    ("ravel", True),
    ("squeeze", True),
    ("squeeze_", False),
    ("unsqueeze", True),
    ("unsqueeze_", False),
    ("contiguous", False),
    ("expand", False),
    ("expand_as", False),
    ("broadcast_to", True),
    ("unfold", False),
    # transposes
    ("transpose", True),
    ("transpose_", False),
    ("t", True),
    ("t_", False),
    ("permute", True),
    ("movedim", True),
    ("moveaxis", True),
    ("swapaxes", True),
    ("swapdims", True),
    # selection / slicing
    ("narrow", True),
    ("select", True),
    ("index_select", True),
    ("gather", True),
    ("split", True),
    ("chunk", True),
    ("unbind", True),
    ("diagonal", True),
    # reordering / repetition
    ("flip", True),
    ("fliplr", True),
    ("flipud", True),
    ("roll", True),
    ("repeat", False),
    ("tile", True),
    ("repeat_interleave", True),
]
LINEAR_METHOD_ONLY = [
    "add_",
    "__add__",
    "__radd__",
    "__iadd__",
    "sub_",
    "__sub__",
    "__rsub__",
    "__isub__",
    "neg_",
    "negative_",
    "__neg__",
]
CONCAT_OPS = ["cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack"]
LINEAR_PROPERTIES = ["T", "mT", "H", "mH", "real", "imag"]
# project decision 1: casts and basic indexing are linear
LINEAR_CASTS = ["float", "half", "bfloat16", "double", "to", "type", "type_as", "cpu", "cuda", "__getitem__"]


@pytest.mark.parametrize("name,function_form", LINEAR_OPS)
def test_linear_ops(registry: Registry, name: str, function_form: bool) -> None:
    assert rule(registry, f"torch.Tensor.{name}").linearity is LINEAR
    if function_form:
        assert rule(registry, f"torch.{name}").linearity is LINEAR


@pytest.mark.parametrize("name", LINEAR_METHOD_ONLY + LINEAR_CASTS)
def test_linear_methods(registry: Registry, name: str) -> None:
    assert rule(registry, f"torch.Tensor.{name}").linearity is LINEAR


@pytest.mark.parametrize("name", CONCAT_OPS + ["block_diag"])
def test_concatenation_takes_a_list_of_operands(registry: Registry, name: str) -> None:
    r = rule(registry, f"torch.{name}")
    assert r.linearity is LINEAR
    first = r.params[0]
    if name == "block_diag":
        assert first.variadic and first.role is ParamRole.TENSOR
    else:
        assert first.name == "tensors" and first.role is ParamRole.TENSORS


@pytest.mark.parametrize("name", LINEAR_PROPERTIES)
def test_linear_properties(registry: Registry, name: str) -> None:
    r = rule(registry, f"torch.Tensor.{name}")
    assert r.is_property
    assert r.linearity is LINEAR
    assert r.dims is not None
    # .T/.H are for matrices (rank taken as 2 when unknown: "t"); .mT/.mH swap the last two dims of any rank
    assert r.dims.name == {"real": "keep", "imag": "keep", "T": "t", "H": "t"}.get(name, "T")


def test_index_tensors_are_operands(registry: Registry) -> None:
    getitem = rule(registry, "torch.Tensor.__getitem__")
    assert getitem.params[1].variadic and getitem.params[1].role is ParamRole.TENSOR
    for q in ("torch.index_select", "torch.gather", "torch.Tensor.masked_fill"):
        r = rule(registry, q)
        name = "mask" if "masked" in q else "index"
        assert r.param(name).role is ParamRole.TENSOR, q


def test_add_counts_numbers_mul_ignores_them(registry: Registry) -> None:
    for q in ("torch.add", "torch.Tensor.add", "torch.Tensor.__radd__", "torch.Tensor.__rsub__", "torch.sub"):
        assert rule(registry, q).param("other").role is ParamRole.TENSOR_OR_NUMBER, q
    for q in ("torch.mul", "torch.Tensor.mul", "torch.Tensor.__mul__", "torch.Tensor.__rmul__", "torch.matmul"):
        assert rule(registry, q).param("other").role is ParamRole.TENSOR, q
    # structural ints never count as the weak scalar in linear ops
    assert rule(registry, "torch.Tensor.repeat_interleave").param("repeats").role is ParamRole.TENSOR
    assert rule(registry, "torch.Tensor.view_as").param("other").role is ParamRole.OTHER
    assert rule(registry, "torch.Tensor.expand_as").param("other").role is ParamRole.OTHER
    assert rule(registry, "torch.Tensor.to").params[1].role is ParamRole.OTHER


def test_reductions_track_pending_sums(registry: Registry) -> None:
    for name in ("sum", "mean", "nansum", "nanmean"):
        for q in (f"torch.{name}", f"torch.Tensor.{name}"):
            r = rule(registry, q)
            # a mean over a sharded dim is a pending *mean* (its all-reduce over-counts): its own rule name
            want = "mean" if "mean" in name else "reduce"
            assert r.dims is not None and r.dims.name == want and r.dims.params == ("dim", "keepdim"), q
    # cumsum keeps every dim: not a reduction
    assert rule(registry, "torch.cumsum").dims.name == "narrow"  # type: ignore[union-attr]


def test_detach_and_grad(registry: Registry) -> None:
    assert rule(registry, "torch.Tensor.detach").grad == "no"
    assert rule(registry, "torch.Tensor.detach_").grad == "no"
    assert rule(registry, "torch.detach").grad == "no"
    rg = rule(registry, "torch.Tensor.requires_grad_")
    assert rg.grad == "yes" and rg.inplace_param == "self" and rg.linearity is LINEAR
    param = rule(registry, "torch.nn.Parameter")
    assert param.grad == "leaf" and param.linearity is LINEAR and param.returns is Returns.TENSOR


# ---------------------------------------------------------------- section 2.5: MULTILINEAR

MULTILINEAR_FUNCS = ["mul", "multiply", "matmul", "mm", "bmm", "einsum", "dot", "mv"]
MULTILINEAR_METHODS = [
    "mul",
    "mul_",
    "multiply",
    "__mul__",
    "__rmul__",
    "__imul__",
    "matmul",
    "mm",
    "bmm",
    "dot",
    "mv",
    "__matmul__",
    "__rmatmul__",
]


@pytest.mark.parametrize("name", MULTILINEAR_FUNCS)
def test_multilinear_functions(registry: Registry, name: str) -> None:
    assert rule(registry, f"torch.{name}").linearity is MULTILINEAR


@pytest.mark.parametrize("name", MULTILINEAR_METHODS)
def test_multilinear_methods(registry: Registry, name: str) -> None:
    assert rule(registry, f"torch.Tensor.{name}").linearity is MULTILINEAR


@pytest.mark.parametrize(
    "qualname,equation",
    [
        ("torch.matmul", "matmul"),
        ("torch.Tensor.matmul", "matmul"),
        ("torch.Tensor.__matmul__", "matmul"),
        ("torch.einsum", "einsum"),
        ("torch.mm", "mk,kn->mn"),
        ("torch.Tensor.mm", "mk,kn->mn"),
        ("torch.bmm", "bmk,bkn->bmn"),
        ("torch.mv", "mk,k->m"),
        ("torch.dot", "k,k->"),
        ("torch.outer", "i,j->ij"),
    ],
)
def test_contractions(registry: Registry, qualname: str, equation: str) -> None:
    r = rule(registry, qualname)
    assert r.linearity is MULTILINEAR
    assert r.contraction == equation
    assert r.bias is None


def test_einsum_reads_equation_then_operands(registry: Registry) -> None:
    r = rule(registry, "torch.einsum")
    assert r.params[0].role is ParamRole.OTHER
    assert r.params[1].variadic and r.params[1].role is ParamRole.TENSOR


@pytest.mark.parametrize(
    "qualname,divisor",
    [
        ("torch.div", "other"),
        ("torch.divide", "other"),
        ("torch.true_divide", "other"),
        ("torch.Tensor.div", "other"),
        ("torch.Tensor.div_", "other"),
        ("torch.Tensor.divide", "other"),
        ("torch.Tensor.true_divide", "other"),
        ("torch.Tensor.__truediv__", "other"),
        ("torch.Tensor.__itruediv__", "other"),
        ("torch.Tensor.__rtruediv__", "self"),
    ],
)
def test_division(registry: Registry, qualname: str, divisor: str) -> None:
    r = rule(registry, qualname)
    assert r.linearity is MULTILINEAR
    assert r.divisors == (divisor,)
    assert r.param("other").role is ParamRole.TENSOR_OR_NUMBER  # P / 2 -> P, 2 / P -> error


@pytest.mark.parametrize(
    "name,equation",
    [
        ("addmm", "mk,kn->mn"),
        ("addmv", "mk,k->m"),
        ("addbmm", "bmk,bkn->mn"),
        ("baddbmm", "bmk,bkn->bmn"),
        ("addr", "i,j->ij"),
    ],
)
def test_affine_compounds(registry: Registry, name: str, equation: str) -> None:
    f = rule(registry, f"torch.{name}")
    assert f.linearity is MULTILINEAR and f.affine_bias == "input" and f.contraction == equation
    m = rule(registry, f"torch.Tensor.{name}")
    assert m.linearity is MULTILINEAR and m.affine_bias == "self" and m.contraction == equation


# ---------------------------------------------------------------- in place, dunders, nonlinear


@pytest.mark.parametrize(
    "name",
    [
        "add_",
        "sub_",
        "mul_",
        "div_",
        "__iadd__",
        "__isub__",
        "__imul__",
        "__itruediv__",
        "squeeze_",
        "unsqueeze_",
        "transpose_",
        "t_",
        "masked_fill_",
        "copy_",
        "zero_",
        "addmm_",
    ],
)
def test_inplace_methods_mutate_self(registry: Registry, name: str) -> None:
    assert rule(registry, f"torch.Tensor.{name}").inplace_param == "self"


def test_out_is_a_keyword_never_an_operand(registry: Registry) -> None:
    for q in ("torch.add", "torch.matmul", "torch.cat", "torch.exp", "torch.sum"):
        out = rule(registry, q).param("out")
        assert out is not None and out.keyword and not out.positional, q


@pytest.mark.parametrize(
    "qualname",
    [
        "torch.exp",
        "torch.log",
        "torch.sqrt",
        "torch.rsqrt",
        "torch.abs",
        "torch.pow",
        "torch.relu",
        "torch.sigmoid",
        "torch.tanh",
        "torch.sin",
        "torch.cos",
        "torch.clamp",
        "torch.clip",
        "torch.where",
        "torch.maximum",
        "torch.minimum",
        "torch.masked_fill",
        "torch.softmax",
        "torch.log_softmax",
        "torch.gt",
        "torch.lt",
        "torch.ge",
        "torch.le",
        "torch.eq",
        "torch.ne",
        "torch.erf",
        "torch.square",
        "torch.reciprocal",
        "torch.sign",
        "torch.Tensor.exp",
        "torch.Tensor.pow",
        "torch.Tensor.masked_fill",
        "torch.Tensor.__pow__",
        "torch.Tensor.__gt__",
        "torch.Tensor.__lt__",
        "torch.Tensor.__eq__",
        "torch.Tensor.__ne__",
    ],
)
def test_elementwise_nonlinear(registry: Registry, qualname: str) -> None:
    r = rule(registry, qualname)
    assert r.linearity is NONLINEAR
    assert r.dims is not None and r.dims.name in ("keep", "narrow")


@pytest.mark.parametrize("name", ["max", "min", "amax", "amin", "argmax", "norm", "var", "std", "logsumexp", "prod"])
def test_nonlinear_reductions_are_not_pending_sums(registry: Registry, name: str) -> None:
    for q in (f"torch.{name}", f"torch.Tensor.{name}"):
        r = rule(registry, q)
        assert r.linearity is NONLINEAR, q
        assert r.dims is None or r.dims.name != "reduce", q


def test_unlisted_ops_are_nonlinear(registry: Registry) -> None:
    assert registry.lookup("torch.Tensor.index_add") is None  # not stubbed: NONLINEAR by default
    assert rule(registry, "torch.Tensor.copy_").linearity is NONLINEAR


# ---------------------------------------------------------------- section 2.6: factories


@pytest.mark.parametrize(
    "qualname,kind",
    [
        *[
            (f"torch.{n}", "deterministic")
            for n in ("zeros", "ones", "full", "arange", "linspace", "logspace", "eye", "tensor")
        ],
        *[(f"torch.{n}", "random") for n in ("randn", "rand", "randint", "empty", "randperm", "normal")],
        *[
            (f"torch.{n}", "like")
            # as_tensor(t) returns t: typed like its input (deterministic would make V into R)
            for n in ("zeros_like", "ones_like", "full_like", "randn_like", "rand_like", "empty_like", "as_tensor")
        ],
        *[(f"torch.Tensor.{n}", "new") for n in ("new_zeros", "new_ones", "new_full", "new_empty", "new_tensor")],
    ],
)
def test_factories(registry: Registry, qualname: str, kind: str) -> None:
    r = rule(registry, qualname)
    assert r.factory == kind
    requires_grad = r.param("requires_grad")
    assert requires_grad is not None and requires_grad.default is False
    assert r.returns is Returns.TENSOR


def test_zeros_like_keeps_partial(registry: Registry) -> None:
    assert rule(registry, "torch.zeros_like").linearity is LINEAR
    assert rule(registry, "torch.as_tensor").linearity is LINEAR
    assert rule(registry, "torch.ones_like").linearity is NONLINEAR


# ---------------------------------------------------------------- section 2.8: passthrough


@pytest.mark.parametrize(
    "name",
    [
        "size",
        "dim",
        "ndimension",
        "numel",
        "nelement",
        "stride",
        "storage_offset",
        "element_size",
        "get_device",
        "is_contiguous",
        "is_floating_point",
        "is_complex",
        "dim_order",
        "__len__",
        "item",
        "tolist",
        "data_ptr",
        "retain_grad",
    ],
)
def test_passthrough_methods(registry: Registry, name: str) -> None:
    r = rule(registry, f"torch.Tensor.{name}")
    assert r.passthrough and r.returns in (Returns.VALUE, Returns.NUMBER)


@pytest.mark.parametrize("name", ["shape", "dtype", "device", "ndim", "requires_grad", "grad_fn", "is_leaf", "is_cuda"])
def test_passthrough_properties(registry: Registry, name: str) -> None:
    r = rule(registry, f"torch.Tensor.{name}")
    assert r.is_property and r.passthrough


@pytest.mark.parametrize("name", ["grad", "data"])
def test_opaque_properties(registry: Registry, name: str) -> None:
    r = rule(registry, f"torch.Tensor.{name}")
    assert r.is_property and r.opaque and r.returns is Returns.TENSOR


def test_backward_and_contexts(registry: Registry) -> None:
    backward = rule(registry, "torch.Tensor.backward")
    assert backward.spmd_api == "backward" and backward.returns is Returns.NONE
    assert rule(registry, "torch.no_grad").context == "no_grad"
    assert rule(registry, "torch.inference_mode").context == "no_grad"
    assert rule(registry, "torch.enable_grad").context == "enable_grad"


# ---------------------------------------------------------------- torch.nn.functional


def test_functional_linear_is_a_contraction_with_bias(registry: Registry) -> None:
    r = rule(registry, "torch.nn.functional.linear")
    assert r.contraction == "linear" and r.bias == "bias" and r.linearity is MULTILINEAR
    assert r.param("bias").role is ParamRole.TENSOR


@pytest.mark.parametrize(
    "name",
    [
        "gelu",
        "relu",
        "silu",
        "softmax",
        "log_softmax",
        "dropout",
        "layer_norm",
        "rms_norm",
        "group_norm",
        "batch_norm",
        "cross_entropy",
        "mse_loss",
        "nll_loss",
        "embedding",
        "scaled_dot_product_attention",
        "pad",
        "normalize",
        "sigmoid",
        "tanh",
    ],
)
def test_functional_nonlinear(registry: Registry, name: str) -> None:
    assert rule(registry, f"torch.nn.functional.{name}").linearity is NONLINEAR


def test_functional_elementwise_keep_shards(registry: Registry) -> None:
    for name in ("gelu", "relu", "silu", "dropout", "sigmoid", "tanh"):
        assert rule(registry, f"torch.nn.functional.{name}").dims.name == "keep"  # type: ignore[union-attr]
    # statistics over the trailing normalized dims: a sequence/batch shard is kept
    assert rule(registry, "torch.nn.functional.layer_norm").dims.name == "keep"  # type: ignore[union-attr]


def test_nn_reexports_functional(registry: Registry) -> None:
    assert rule(registry, "torch.nn.functional.gelu") is registry.lookup("torch.nn.functional.gelu")


# ---------------------------------------------------------------- section 3.2-3.4: spmd_types


def _t(spec: str) -> frozenset[Transition]:
    return frozenset(Transition(*p.split("->")) for p in spec.split())


@pytest.mark.parametrize(
    "name,src,dst,default_src,default_dst",
    [
        ("all_reduce", {"P"}, {"R", "I"}, "P", None),
        ("all_gather", {"V", "S"}, {"R", "I"}, "V", None),
        ("reduce_scatter", {"P"}, {"V", "S"}, "P", "V"),
        ("all_to_all", {"V", "S"}, {"V", "S"}, "V", "V"),
        ("unshard", {"S"}, {"R", "I"}, None, None),
    ],
)
def test_collectives(registry: Registry, name: str, src: set, dst: set, default_src, default_dst) -> None:
    c = rule(registry, f"spmd_types.{name}").collective
    assert c is not None and c.family == "collective" and c.op == name
    assert c.src == frozenset(src) and c.dst == frozenset(dst)
    assert c.default_src == default_src and c.default_dst == default_dst
    assert c.implicit_partial
    assert c.tensor_param == "x" and c.axis_param == "axis"


def test_convert_table(registry: Registry) -> None:
    c = rule(registry, "spmd_types.convert").collective
    assert c is not None and c.family == "conversion"
    assert c.allowed == _t("I->R R->V R->S I->V I->S R->P V->S S->V")
    assert c.expert == _t("R->I I->P V->P S->P")
    assert c.forbidden_hints[Transition("P", "R")] == "all_reduce"
    assert c.forbidden_hints[Transition("P", "S")] == "reduce_scatter"
    assert c.forbidden_hints[Transition("V", "I")] == "all_gather"
    assert c.forbidden_hints[Transition("S", "S")] == "all_to_all"
    assert not c.implicit_partial


def test_reinterpret_table(registry: Registry) -> None:
    c = rule(registry, "spmd_types.reinterpret").collective
    assert c is not None
    assert c.allowed == _t("I->V I->P V->P")
    assert c.expert == _t("R->I I->R R->V R->P")
    assert c.forbidden_hints[Transition("P", "R")] == "all_reduce"
    assert c.forbidden_hints[Transition("R", "S")] == "convert"


def test_other_conversions(registry: Registry) -> None:
    shard = rule(registry, "spmd_types.shard").collective
    assert shard is not None and shard.allowed == _t("R->S I->S V->S")
    i2r = rule(registry, "spmd_types.invariant_to_replicate").collective
    assert i2r is not None and i2r.allowed == _t("I->R") and (i2r.default_src, i2r.default_dst) == ("I", "R")
    redistribute = rule(registry, "spmd_types.redistribute").collective
    assert redistribute is not None and redistribute.allowed is None and redistribute.implicit_partial


@pytest.mark.parametrize(
    "name,letter",
    [
        ("R", "R"),
        ("I", "I"),
        ("V", "V"),
        ("P", "P"),
        ("Replicate", "R"),
        ("Invariant", "I"),
        ("Varying", "V"),
        ("Partial", "P"),
    ],
)
def test_type_constants(registry: Registry, name: str, letter: str) -> None:
    assert rule(registry, f"spmd_types.{name}").const_type == letter
    assert rule(registry, f"spmd_types.types.{name}").const_type == letter


@pytest.mark.parametrize(
    "qualname,handler",
    [
        ("spmd_types.S", "shard_type"),
        ("spmd_types.Shard", "shard_type"),
        ("spmd_types.assert_type", "assert_type"),
        ("spmd_types.assert_local_type", "assert_type"),
        ("spmd_types.assert_type_like", "assert_type_like"),
        ("spmd_types.assert_local_type_like", "assert_type_like"),
        ("spmd_types.mutate_type", "mutate_type"),
        ("spmd_types.reinterpret_no_grad", "reinterpret_no_grad"),
        ("spmd_types.Scalar", "scalar"),
        ("spmd_types.local_map", "local_map"),
        ("spmd_types.checker.local_map", "local_map"),
        ("spmd_types.reinterpret_mesh", "ignore"),
        ("spmd_types.runtime.assert_type", "assert_type"),
    ],
)
def test_spmd_api(registry: Registry, qualname: str, handler: str) -> None:
    assert rule(registry, qualname).spmd_api == handler


@pytest.mark.parametrize(
    "qualname,ctx",
    [
        ("spmd_types.set_current_mesh", "mesh"),
        ("spmd_types.no_typecheck", "no_typecheck"),
        ("spmd_types.checker.no_typecheck", "no_typecheck"),
        ("spmd_types.local", "local"),
        ("spmd_types.checker.typecheck", "typecheck"),
    ],
)
def test_spmd_contexts(registry: Registry, qualname: str, ctx: str) -> None:
    assert rule(registry, qualname).context == ctx


@pytest.mark.parametrize(
    "name",
    [
        "register_local_autograd_function",
        "register_local_backward_hook",
        "register_autograd_function",
        "register_decomposition",
        "get_local_type",
    ],
)
def test_spmd_passthrough(registry: Registry, name: str) -> None:
    assert rule(registry, f"spmd_types.{name}").passthrough


# ---------------------------------------------------------------- section 3.7: raw torch.distributed


@pytest.mark.parametrize(
    "name,src,dst,inp,out,mutates",
    [
        ("all_reduce", {"P"}, {"R"}, "tensor", None, True),
        ("all_gather", {"V"}, {"R", "I"}, "tensor", "tensor_list", False),
        ("all_gather_into_tensor", {"V"}, {"R", "I"}, "input_tensor", "output_tensor", False),
        ("reduce_scatter_tensor", {"P"}, {"V"}, "input", "output", False),
        ("all_to_all_single", {"V"}, {"V"}, "input", "output", False),
        ("broadcast", {"*"}, {"R"}, "tensor", None, True),
        ("reduce", {"P"}, {"V"}, "tensor", None, True),
    ],
)
def test_raw_collectives(registry: Registry, name: str, src, dst, inp, out, mutates) -> None:
    raw = rule(registry, f"torch.distributed.{name}").raw
    assert raw is not None
    assert raw.src == frozenset(src) and raw.dst == frozenset(dst)
    assert (raw.input, raw.output, raw.mutates) == (inp, out, mutates)
    assert raw.group_param == "group" and not raw.differentiable


@pytest.mark.parametrize(
    "name,src,dst",
    [
        ("all_reduce", {"P"}, {"R"}),
        ("all_gather_tensor", {"V"}, {"R"}),
        ("all_gather_tensor_autograd", {"V"}, {"R"}),
        ("all_gather_single", {"V"}, {"R"}),
        ("reduce_scatter_tensor", {"P"}, {"V"}),
        ("reduce_scatter_tensor_autograd", {"P"}, {"V"}),
        ("all_to_all_single", {"V"}, {"V"}),
        ("all_to_all_single_autograd", {"V"}, {"V"}),
    ],
)
def test_functional_collectives(registry: Registry, name: str, src, dst) -> None:
    raw = rule(registry, f"torch.distributed._functional_collectives.{name}").raw
    assert raw is not None
    assert raw.src == frozenset(src) and raw.dst == frozenset(dst)
    assert raw.input == "self" and raw.output is None and not raw.mutates
    # torch 2.13 registers autograd for these ops (register_autograd in _functional_collectives.py)
    assert raw.differentiable


def test_functional_broadcast_has_no_autograd(registry: Registry) -> None:
    raw = rule(registry, "torch.distributed._functional_collectives.broadcast").raw
    assert raw is not None and not raw.differentiable


def test_distributed_nn_all_reduce(registry: Registry) -> None:
    for q in ("torch.distributed.nn.functional.all_reduce", "torch.distributed.nn.all_reduce"):
        (m,) = rule(registry, q).mappings
        assert m.op == "all_reduce" and m.axis is None
        assert (m.src.kind, m.dst.kind) == (Kind.P, Kind.R)
        assert m.tensor_param == "tensor" and m.group_param == "group"


@pytest.mark.parametrize(
    "name", ["get_rank", "get_world_size", "barrier", "is_initialized", "init_process_group", "new_group"]
)
def test_distributed_passthrough(registry: Registry, name: str) -> None:
    assert rule(registry, f"torch.distributed.{name}").passthrough


def test_device_mesh(registry: Registry) -> None:
    for q in ("torch.distributed.init_device_mesh", "torch.distributed.device_mesh.init_device_mesh"):
        assert rule(registry, q).mesh_factory_names == "mesh_dim_names"
    for q in ("torch.distributed.DeviceMesh.get_group", "torch.distributed.device_mesh.DeviceMesh.get_group"):
        assert rule(registry, q).mesh_group_param == "mesh_dim"
    for name in ("size", "get_local_rank", "get_rank"):
        assert rule(registry, f"torch.distributed.DeviceMesh.{name}").passthrough


# ---------------------------------------------------------------- section 6: Megatron

MEGATRON = [
    ("copy_to_tensor_model_parallel_region", "convert", "I", "R"),
    ("reduce_from_tensor_model_parallel_region", "all_reduce", "P", "I"),
    # Megatron's actual autograd pairs (split/all-gather), not the guide's reading
    ("scatter_to_tensor_model_parallel_region", "convert", "I", "S(-1)"),
    ("gather_from_tensor_model_parallel_region", "all_gather", "S(-1)", "I"),
    ("scatter_to_sequence_parallel_region", "convert", "I", "S(0)"),
    ("gather_from_sequence_parallel_region", "all_gather", "S(0)", "R"),
    ("reduce_scatter_to_sequence_parallel_region", "reduce_scatter", "P", "S(0)"),
    ("all_gather_last_dim_from_tensor_parallel_region", "all_gather", "S(-1)", "R"),
    ("reduce_scatter_last_dim_to_tensor_parallel_region", "reduce_scatter", "P", "S(-1)"),
]


def _spell(t) -> str:
    return f"S({t.shard})" if t.shard is not None else t.kind.value


@pytest.mark.parametrize("name,op,src,dst", MEGATRON)
def test_megatron_mappings(registry: Registry, name: str, op: str, src: str, dst: str) -> None:
    for module in ("megatron.core.tensor_parallel.mappings", "megatron.core.tensor_parallel"):
        r = rule(registry, f"{module}.{name}")
        default = [m for m in r.mappings if not m.when]
        assert len(default) == 1
        (m,) = default
        assert (m.op, _spell(m.src), _spell(m.dst)) == (op, src, dst)
        assert m.axis == "tp" and m.group_param == "group" and m.tensor_param == "input_"


def test_gather_from_sequence_parallel_without_output_grad(registry: Registry) -> None:
    r = rule(registry, "megatron.core.tensor_parallel.gather_from_sequence_parallel_region")
    (m,) = [m for m in r.mappings if m.when]
    assert m.when == (("tensor_parallel_output_grad", False),)
    assert (m.op, _spell(m.src), _spell(m.dst)) == ("all_gather", "S(0)", "I")


def test_megatron_all_to_all_uses_its_group(registry: Registry) -> None:
    (m,) = rule(registry, "megatron.core.tensor_parallel.mappings.all_to_all").mappings
    assert m.op == "all_to_all" and m.axis is None and m.group_param == "group"
    assert (m.src.kind, m.dst.kind) == (Kind.V, Kind.V)


@pytest.mark.parametrize(
    "name,axis",
    [
        ("get_tensor_model_parallel_group", "tp"),
        ("get_data_parallel_group", "dp"),
        ("get_context_parallel_group", "cp"),
        ("get_expert_model_parallel_group", "ep"),
        ("get_pipeline_model_parallel_group", "pp"),
    ],
)
def test_megatron_process_groups(registry: Registry, name: str, axis: str) -> None:
    for module in ("megatron.core.parallel_state", "megatron.core.mpu"):
        assert rule(registry, f"{module}.{name}").process_group_axis == axis


@pytest.mark.parametrize(
    "name",
    [
        "get_tensor_model_parallel_world_size",
        "get_tensor_model_parallel_rank",
        "get_data_parallel_world_size",
        "get_context_parallel_world_size",
    ],
)
def test_megatron_passthrough(registry: Registry, name: str) -> None:
    assert rule(registry, f"megatron.core.parallel_state.{name}").passthrough


# ---------------------------------------------------------------- internal consistency


def test_every_named_parameter_exists(registry: Registry) -> None:
    """Parameter names in decorators must name parameters of the stub signature."""
    problems = []
    for q, r in registry.rules.items():
        if r.alias_of is not None:
            continue
        names = {p.name for p in r.params}
        wanted: list[str] = []
        if r.dims is not None:
            wanted += list(r.dims.params)
        wanted += list(r.divisors)
        wanted += [
            n
            for n in (r.bias, r.affine_bias, r.inplace_param, r.mesh_factory_names, r.mesh_group_param)
            if n is not None
        ]
        if r.raw is not None:
            wanted += [r.raw.input, r.raw.group_param] + ([r.raw.output] if r.raw.output else [])
        if r.collective is not None:
            wanted += [r.collective.tensor_param, r.collective.axis_param]
        for m in r.mappings:
            wanted += [m.tensor_param] + ([m.group_param] if m.group_param else []) + [k for k, _ in m.when]
        if r.factory is not None:
            wanted.append("requires_grad")
        problems += [f"{q}: {n}" for n in wanted if n not in names]
    assert problems == []


def test_every_alias_resolves(registry: Registry) -> None:
    modules = {"megatron.core.mpu"}  # module aliases resolve through their members
    dangling = [
        q
        for q, r in registry.rules.items()
        if r.alias_of is not None and q not in modules and registry.lookup(q) is None
    ]
    assert dangling == []


def test_stubbed_torch_names_exist_in_torch() -> None:
    """Catch typos: every torch function/method stubbed here exists in the installed torch."""
    torch = pytest.importorskip("torch")
    for submodule in (
        "torch.nn.functional",
        "torch.distributed._functional_collectives",
        "torch.distributed.nn.functional",
        "torch.distributed.device_mesh",
        "torch.distributed.tensor",
        "torch.distributed.tensor.experimental",
    ):
        importlib.import_module(submodule)

    registry = load_stub_dirs([STUBS])
    missing = []
    for q, r in registry.rules.items():
        if not q.startswith("torch.") or r.alias_of is not None:
            continue
        obj: object = torch
        for part in q.split(".")[1:]:
            if not hasattr(obj, part):
                missing.append(q)
                break
            obj = getattr(obj, part)
    # stub-only helper classes of the torch stub
    allowed = {"torch.Number", "torch.distributed.group.WORLD", "torch.distributed.nn.functional.Number"}
    assert [m for m in missing if m not in allowed] == []


OVERLOADED_STUB = '''
from typing import Literal, overload

from torch import Tensor

from spmdcheck.annotations import linear, maps_to


@overload
@maps_to("all_reduce", axis="tp", src="P", dst="I", tensor="x")
def finish(x: Tensor, reduce: Literal[True] = True) -> Tensor: ...
@overload
@linear
def finish(x: Tensor, reduce: Literal[False]) -> Tensor: ...
'''

OVERLOAD_USER = '''
import torch.nn.functional as F
import spmd_types as spmd
from spmd_types import P
from mylib import finish


def reduced(y):
    spmd.assert_type(y, {"tp": P})
    return F.gelu(finish(y))


def kept(y):
    spmd.assert_type(y, {"tp": P})
    return F.gelu(finish(y, reduce=False))


def unknown(y, flag):
    spmd.assert_type(y, {"tp": P})
    return F.gelu(finish(y, reduce=flag))
'''


def test_overloads_with_literal_keywords_choose_the_rule(tmp_path) -> None:
    """`@overload` stubs whose parameters are `Literal[...]`: a call takes the first overload its constants
    (or the defaults) satisfy; a keyword the checker cannot read matches none and the call is unknown."""
    from spmdcheck.api import Settings, check_source, load_registry

    (tmp_path / "mylib.pyi").write_text(OVERLOADED_STUB)
    registry = load_registry((str(tmp_path),))
    assert not [e for e in registry.errors if "mylib" in e], registry.errors
    rule = registry.lookup("mylib.finish")
    assert rule is not None and len(rule.overloads) == 2
    diags = check_source(OVERLOAD_USER, "user.py", Settings(mesh=("tp",)), registry)
    # reduced: all_reduce then gelu is fine; kept: gelu of the partial sum; unknown: silent
    assert [(d.line, d.code) for d in diags] == [(15, "SPMD101")], [(d.line, d.code, d.message) for d in diags]

"""Gradient synchronisation checked at the optimizer step (analysis/gradients/, issue 21): small programs."""

from __future__ import annotations

import libcst as cst
import pytest

from spmdcheck.analysis.gradients.state import AxisGrad
from spmdcheck.analysis.gradients.sync import accumulate
from spmdcheck.analysis.gradients.trigger import steps_optimizer
from spmdcheck.api import Settings, check_source

HEADER = """\
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def shard(t):
    return t.chunk(dist.get_world_size())[dist.get_rank()]
"""


def _check(body: str, mesh: tuple[str, ...] = ("dp",), registry=None) -> list:
    return check_source(HEADER + body, "<gradsync>", Settings(mesh=mesh), registry)


def _codes(diags: list) -> list[tuple[int, str]]:
    offset = HEADER.count("\n")
    return sorted((d.line - offset, d.code) for d in diags)


def _step(sync: str, model: str = "nn.Linear(8, 4)", loss: str = "F.mse_loss(model(shard(x)), shard(y))") -> str:
    lines = [
        "def train_step(x, y):",
        f"    model = {model}",
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
        f"    loss = {loss}",
        "    loss.backward()",
        *("    " + line for line in sync.splitlines() if line),
        "    optimizer.step()",
    ]
    return "\n".join(lines) + "\n"


def test_a_step_without_any_reduction_names_every_parameter_and_the_axis(registry):
    diags = _check(_step(""), registry=registry)
    assert _codes(diags) == [(6, "SPMD601")]
    assert "`weight`, `bias`" in diags[0].message and "axis 'dp'" in diags[0].message


def test_an_averaging_loop_over_the_parameters_is_clean(registry):
    sync = "for p in model.parameters():\n    p.grad.div_(dist.get_world_size())\n    dist.all_reduce(p.grad)"
    assert _check(_step(sync), registry=registry) == []


def test_a_filter_on_the_name_leaves_the_other_parameters_pending(registry):
    sync = 'for name, p in model.named_parameters():\n    if name.endswith("weight"):\n        dist.all_reduce(p.grad)'
    diags = _check(_step(sync), registry=registry)
    assert _codes(diags) == [(9, "SPMD601")]
    assert "`bias`" in diags[0].message and "`weight`" not in diags[0].message


def test_a_condition_the_walk_cannot_decide_is_silent(registry):
    sync = "for p in model.parameters():\n    if p.ndim > 1:\n        dist.all_reduce(p.grad)"
    assert _check(_step(sync), registry=registry) == []


def test_ddp_averages_in_backward_and_a_second_reduction_is_double(registry):
    model = "DistributedDataParallel(nn.Linear(8, 4))"
    assert _check(_step("", model=model), registry=registry) == []
    diags = _check(_step("for p in model.parameters():\n    dist.all_reduce(p.grad)", model=model), registry=registry)
    assert _codes(diags) == [(7, "SPMD602")]


def test_a_loss_divided_by_the_world_size_under_ddp_is_averaged_twice(registry):
    model = "DistributedDataParallel(nn.Linear(8, 4))"
    loss = "F.mse_loss(model(shard(x)), shard(y)) / dist.get_world_size()"
    assert _codes(_check(_step("", model=model, loss=loss), registry=registry)) == [(4, "SPMD606")]


BUCKET = """\
grads = [p.grad for p in model.parameters()]
flat = _flatten_dense_tensors(grads)
flat.div_(dist.get_world_size())
dist.all_reduce(flat)
for grad, synced in zip(grads, _unflatten_dense_tensors(flat, grads)):
    {copy}
"""


@pytest.mark.parametrize(
    "copy,expected",
    [("grad.copy_(synced)", []), ("grad = synced", [(12, "SPMD601")]), ("grad.copy_(synced / 2)", [])],
    ids=["copied-back", "rebound", "copied-scaled-by-a-number"],
)
def test_a_flattened_bucket_counts_only_when_copied_back(copy, expected, registry):
    body = "from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors\n\n\n" + _step(
        BUCKET.format(copy=copy)
    )
    assert [(line - 3, code) for line, code in _codes(_check(body, registry=registry))] == expected


def test_dividing_before_and_after_the_reduction_is_averaged_twice(registry):
    body = "from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors\n\n\n" + _step(
        BUCKET.format(copy="grad.copy_(synced / dist.get_world_size())")
    )
    assert [(line - 3, code) for line, code in _codes(_check(body, registry=registry))] == [(11, "SPMD606")]


def test_a_functional_all_reduce_assigned_back_is_followed(registry):
    sync = 'for p in model.parameters():\n    p.grad = funcol.all_reduce(p.grad, "avg", dist.group.WORLD)'
    assert _check(_step(sync), registry=registry) == []
    sync = 'for p in model.parameters():\n    g = funcol.all_reduce(p.grad, "avg", dist.group.WORLD)'
    assert _codes(_check(_step(sync), registry=registry)) == [(8, "SPMD601")]


def test_a_model_handed_to_code_the_walk_does_not_follow_is_silent(registry):
    body = _step("", model="nn.Linear(8, 4)").replace(
        "    optimizer = torch", "    fully_shard(model)\n    optimizer = torch"
    )
    assert _check(body, registry=registry) == []


MEGATRON = """\
class Norm(nn.LayerNorm):
    def __init__(self, hidden):
        super().__init__(hidden)
        setattr(self.weight, "sequence_parallel", True)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Norm(8)
        self.proj = nn.Linear(8, 8, bias=False)
        self.proj.weight.tensor_model_parallel = True

    def forward(self, x):
        return self.proj(self.norm(x))


def local(t):
    t = t.chunk(dist.get_world_size(dp_group), dim=1)[dist.get_rank(dp_group)]
    return t.chunk(dist.get_world_size(tp_group))[dist.get_rank(tp_group)]


def train_step(x, y):
    model = Block()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = F.mse_loss(model(local(x)), local(y))
    loss.backward()
    for p in model.parameters():
        if getattr(p, "sequence_parallel", False):
            dist.all_reduce(p.grad, group=tp_group)
        dist.all_reduce(p.grad, group=dp_group)
    optimizer.step()
"""


def test_megatron_marks_decide_the_tensor_parallel_reduction(registry, monkeypatch):
    import spmdcheck.analysis.gradients.exprs as exprs
    from spmdcheck.analysis.gradients.state import Group

    groups = {"dp_group": Group("dp"), "tp_group": Group("tp")}
    lookup = exprs.lookup
    monkeypatch.setattr(exprs, "lookup", lambda w, name: groups.get(name) or lookup(w, name))
    diags = _check(MEGATRON, mesh=("dp", "tp"), registry=registry)
    assert [d.code for d in diags] == ["SPMD601"]
    assert "`norm.bias` is still a per-rank partial sum over axis 'tp'" in diags[0].message
    assert diags[0].suggestions[0].replacement == 'setattr(param, "sequence_parallel", True)'
    marked = MEGATRON.replace(
        'setattr(self.weight, "sequence_parallel", True)',
        "self.bias.sequence_parallel = True\n        self.weight.sequence_parallel = True",
    )
    assert _check(marked, mesh=("dp", "tp"), registry=registry) == []


EXPERTS = """\
class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(8, 2)
        self.expert = nn.Linear(8, 8)
        for p in self.expert.parameters():
            p.allreduce = False

    def forward(self, x):
        return self.expert(x) * self.gate(x)[:, :1]


def train_step(x, y, expert_group):
    model = MoE()
    optimizer = torch.optim.Adam(model.parameters())
    F.mse_loss(model(shard(x)), shard(y)).backward()
    for p in model.parameters():
        if getattr(p, "allreduce", True):
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        else:
            dist.all_reduce(p.grad, {group})
    optimizer.step()
"""


def test_expert_gradients_reduced_over_the_whole_group(registry):
    diags = _check(EXPERTS.format(group="group=dist.group.WORLD"), registry=registry)
    assert _codes(diags) == [(21, "SPMD603")]
    assert _check(EXPERTS.format(group="group=expert_group"), registry=registry) == []


def test_only_functions_that_step_an_optimizer_are_walked():
    module = cst.parse_module(
        "def f(m):\n    for x in m:\n        if x:\n            opt.step()\n\n"
        "def g(m):\n    m.backward()\n    return opt.step\n"
    )
    found = [fn.name.value for fn in module.body if isinstance(fn, cst.FunctionDef) and steps_optimizer(fn)]
    assert found == ["f"]


def test_accumulating_into_a_reduced_gradient_remembers_the_earlier_reduction():
    reduced = AxisGrad("summed", reduced_at=cst.Name("r"))
    pending = AxisGrad("pending")
    assert accumulate(None, pending) is pending
    assert accumulate(pending, AxisGrad("pending")).status == "pending"
    again = accumulate(reduced, pending)
    assert again.status == "pending" and again.synced_before is reduced.reduced_at


@pytest.mark.parametrize(
    "setup",
    [
        "Wrapper(model)",
        "for p in model.parameters():\n        p.register_post_accumulate_grad_hook(hook)",
    ],
    ids=["object-the-walk-does-not-build", "hook-on-each-parameter"],
)
def test_parameters_handed_to_what_the_walk_does_not_follow_are_silent(setup, registry):
    # a library base (its `__init__` is not the program's): the walk does not build the object
    wrapper = "class Wrapper(dist.Work):\n    def __init__(self, model):\n        self.model = model\n\n\n"
    body = wrapper + _step("").replace(
        "    optimizer = torch", f"    {setup}\n    optimizer = torch"
    )
    assert _check(body, registry=registry) == []
    assert _codes(_check(body.replace(f"    {setup}\n", ""), registry=registry)) == [(11, "SPMD601")]


# --------------------------------------------------------------------------- idioms (issue 20) in the walk
# Each idiom form gives the finding its direct form gives: the walk follows it with the same precision.
FORWARD_CALL = "def forward_call(fn, /, *args, **kwargs):\n    return fn(*args, **kwargs)\n\n\n"


def _same_as_direct(direct: str, idiom: str, registry, prelude: str = "", **step) -> list:
    """The codes of `idiom`'s step; asserted equal to (and as many as) its direct form's, which has some."""
    expected = [code for _, code in _codes(_check(prelude + _step(direct, **step), registry=registry))]
    assert expected, "the direct form has a finding"
    got = [code for _, code in _codes(_check(prelude + _step(idiom, **step), registry=registry))]
    assert got == expected
    return got


@pytest.mark.parametrize(
    "call",
    [
        'dist.all_reduce(**{"tensor": p.grad})',
        "dist.all_reduce(p.grad, **dict(op=dist.ReduceOp.SUM))",
        'kw = {"op": dist.ReduceOp.SUM}\n    dist.all_reduce(p.grad, **kw)',
        "dist.all_reduce(*[p.grad])",
        "forward_call(dist.all_reduce, p.grad, op=dist.ReduceOp.SUM)",
    ],
    ids=["dict-literal", "dict-call", "local-dict", "star-list", "forwarding-function"],
)
def test_keywords_splatted_from_a_dict_reach_the_reduction(call, registry):
    ddp = "DistributedDataParallel(nn.Linear(8, 4))"
    direct, idiom = (f"for p in model.parameters():\n    {c}" for c in ("dist.all_reduce(p.grad)", call))
    assert _same_as_direct(direct, idiom, registry, FORWARD_CALL, model=ddp) == ["SPMD602"]


def test_a_one_tensor_bucket_is_reduced_once(registry):
    """`_flatten_dense_tensors([g])` is a view of `g`: reduced in place, then copied back onto itself (no
    second reduction: a model the walk only partly knows can leave one gradient in a bucket)."""
    bucket = BUCKET.format(copy="grad.copy_(synced)").replace(
        "grads = [p.grad for p in model.parameters()]", "grads = [model.weight.grad]"
    )
    body = "from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors\n\n\n" + _step(bucket)
    diags = _check(body, registry=registry)
    assert [d.code for d in diags] == ["SPMD601"] and "`bias`" in diags[0].message


REGISTRY = """\
from dataclasses import dataclass
from types import SimpleNamespace

SYNCS = {}


def register(name):
    def add(fn):
        SYNCS[name] = fn
        return fn
    return add


@register("reduce")
def reduce_grads(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)


@dataclass
class SyncConfig:
    sync: str = "reduce"


LITERAL = {"reduce": reduce_grads}
NAMESPACE = SimpleNamespace(sync="reduce")
CONFIG = SyncConfig()


"""


@pytest.mark.parametrize(
    "call", ['SYNCS["reduce"](model)', "SYNCS[NAMESPACE.sync](model)", 'LITERAL["reduce"](model)',
             "LITERAL[CONFIG.sync](model)"],
    ids=["decorator-filled", "namespace-key", "dict-literal", "dataclass-key"],
)
def test_a_sync_function_called_through_a_registry_is_walked(call, registry):
    ddp = "DistributedDataParallel(nn.Linear(8, 4))"
    assert _same_as_direct("reduce_grads(model)", call, registry, REGISTRY, model=ddp) == ["SPMD602"]


PARTIALS = "import functools\n\nREDUCE = functools.partial(dist.all_reduce, op=dist.ReduceOp.SUM)\n\n\n"


@pytest.mark.parametrize(
    "call", ["functools.partial(dist.all_reduce, op=dist.ReduceOp.SUM)(p.grad)", "REDUCE(p.grad)"],
    ids=["inline", "module-level"],
)
def test_a_reduction_bound_by_functools_partial_is_followed(call, registry):
    ddp = "DistributedDataParallel(nn.Linear(8, 4))"
    direct, idiom = (f"for p in model.parameters():\n    {c}" for c in ("dist.all_reduce(p.grad)", call))
    assert _same_as_direct(direct, idiom, registry, PARTIALS, model=ddp) == ["SPMD602"]


def test_an_optimizer_made_through_functools_partial_steps_its_parameters(registry):
    body = PARTIALS + _step("").replace(
        "torch.optim.SGD(model.parameters(), lr=0.1)", "functools.partial(torch.optim.SGD, lr=0.1)(model.parameters())"
    )
    assert [d.code for d in _check(body, registry=registry)] == ["SPMD601"]


GENERATORS = """\
def each(items):
    for item in items:
        yield item


def every(items):
    yield from items


"""


@pytest.mark.parametrize("loop", ["each(model.parameters())", "every(model.parameters())"], ids=["yield", "yield-from"])
def test_a_loop_over_a_generator_walks_each_element(loop, registry):
    ddp = "DistributedDataParallel(nn.Linear(8, 4))"
    direct, idiom = (f"for p in {it}:\n    dist.all_reduce(p.grad)" for it in ("model.parameters()", loop))
    assert _same_as_direct(direct, idiom, registry, GENERATORS, model=ddp) == ["SPMD602"]
    averaged = f"for p in {loop}:\n    p.grad.div_(dist.get_world_size())\n    dist.all_reduce(p.grad)"
    assert _check(GENERATORS + _step(averaged), registry=registry) == []


@pytest.mark.parametrize(
    "value", ['dict(params=model.parameters())["params"]', 'dict(zip(["params"], [model.parameters()]))["params"]',
              '{"params": model.parameters()}.get("params")'],
    ids=["dict-call", "dict-zip", "dict-get"],
)
def test_a_value_read_back_from_a_dict_is_followed(value, registry):
    direct, idiom = (f"for p in {v}:\n    dist.all_reduce(p.grad)" for v in ("model.parameters()", value))
    ddp = "DistributedDataParallel(nn.Linear(8, 4))"
    assert _same_as_direct(direct, idiom, registry, model=ddp) == ["SPMD602"]


DYNAMIC = """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        {store}

    def forward(self, x):
        return x @ {load}


"""


def test_parameters_set_and_read_through_setattr_and_getattr_are_the_models(registry):
    direct = DYNAMIC.format(store="self.w = nn.Parameter(torch.ones(8, 4))", load="self.w")
    idiom = DYNAMIC.format(store='setattr(self, "w", nn.Parameter(torch.ones(8, 4)))', load='getattr(self, "w")')
    expected = _codes(_check(direct + _step("", model="Net()"), registry=registry))
    assert [code for _, code in expected] == ["SPMD601"]
    assert _codes(_check(idiom + _step("", model="Net()"), registry=registry)) == expected


ITERABLE = """\
class Params:
    def __init__(self, model):
        self.model = model

    def __iter__(self):
        for p in self.model.parameters():
            yield p


"""


def test_a_loop_over_an_object_whose_iter_yields_walks_each_element(registry):
    ddp = "DistributedDataParallel(nn.Linear(8, 4))"
    direct, idiom = (f"for p in {it}:\n    dist.all_reduce(p.grad)" for it in ("model.parameters()", "Params(model)"))
    assert _same_as_direct(direct, idiom, registry, ITERABLE, model=ddp) == ["SPMD602"]


def test_a_dict_filled_by_a_method_the_walk_does_not_model_is_not_read_as_empty(registry):
    """`groups.setdefault(p.dtype, []).append(p)`: the walk does not know the keys; the dict is not left empty
    (the reductions in the loop over its values would be lost: a false SPMD601)."""
    sync = (
        "groups = {}\nfor p in model.parameters():\n    groups.setdefault(p.dtype, []).append(p)\n"
        "for group in groups.values():\n    for p in group:\n        p.grad.div_(dist.get_world_size())\n"
        "        dist.all_reduce(p.grad)"
    )
    assert _check(_step(sync), registry=registry) == []


FSDP = """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def train_step(x, y):
    {mesh}
    model = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4))
    for layer in model:
        fully_shard(layer{mesh_arg})
    fully_shard(model{mesh_arg})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = F.mse_loss(model(shard(x)), shard(y))
    {loss}.backward()
    {sync}
    optimizer.step()
"""

ONE_DIM = 'mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("dp",))'
TWO_DIM = 'mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))["dp"]'
REDUCE_AFTER = "for p in model.parameters():\n        dist.all_reduce(p.grad)"
DIVIDED = "(loss / dist.get_world_size())"


@pytest.mark.parametrize(
    "mesh,mesh_arg,loss,sync,expected",
    [
        ("pass", "", "loss", "pass", []),  # the world's mesh: every gradient averaged over dp in backward
        (ONE_DIM, ", mesh=mesh", "loss", "pass", []),
        (TWO_DIM, ", mesh=mesh", "loss", "pass", []),  # the dp dim of a dp x tp mesh
        ("pass", "", "loss", REDUCE_AFTER, [("dist.all_reduce(p.grad)", "SPMD602")]),
        (ONE_DIM, ", mesh=mesh", DIVIDED, "pass", [(DIVIDED, "SPMD606")]),
        ("mesh = make_mesh()", ", mesh=mesh", "loss", "pass", []),  # a mesh the walk cannot place: unknown
    ],
    ids=["world", "one-dim", "dp-of-two-dims", "all-reduce-after", "loss-divided", "unknown-mesh"],
)
def test_fully_shard_averages_the_gradients_over_its_mesh_in_backward(mesh, mesh_arg, loss, sync, expected, registry):
    source = FSDP.format(mesh=mesh, mesh_arg=mesh_arg, loss=loss, sync=sync)
    mesh_axes = ("dp", "tp") if mesh == TWO_DIM else ("dp",)
    lines = (HEADER + source).splitlines()
    found = [(lines[d.line - 1], d.code) for d in _check(source, mesh_axes, registry)]
    assert len(found) == len(expected)
    for (line, code), (text, expected_code) in zip(found, expected):
        assert text in line and code == expected_code, (line, code)


FSDP_ACCUMULATION = """
from torch.distributed.fsdp import fully_shard


def train_step(x, y):
    model = nn.Linear(8, 4)
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (micro_x, micro_y) in enumerate(zip(shard(x).chunk(4), shard(y).chunk(4))):
        model.set_requires_gradient_sync({flag})
        F.mse_loss(model(micro_x), micro_y).backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    "flag,reported",
    [("i == 3", False), ("True", False), ("False", True), ("i < 3", True)],
    ids=["last-only", "every", "never", "all-but-last"],
)
def test_fully_shard_gradient_sync_switched_off_for_micro_batches(flag, reported, registry):
    found = _codes(_check(FSDP_ACCUMULATION.format(flag=flag), ("dp",), registry))
    assert [code for _, code in found] == (["SPMD601"] if reported else [])

"""Lambdas are followed as the `def`s they stand for (analysis/lambdas.py; the `lambda` family of
tests/fuzz/idioms.py holds every verdict to its direct form): a value through a lambda keeps its type, a bug
inside one is reported at its place in the lambda with the code of the direct form, and the gradient walk
calls lambdas too."""
from __future__ import annotations

import libcst as cst
import pytest

from spmdcheck.api import Settings, check_source

HEADER = '''# spmdcheck: mesh = ["tp"]
import torch
import torch.distributed as dist
import spmd_types as spmd
from spmd_types import I, P, R, S, V
from spmdcheck.annotations import Local, reveal_spmd_type


def row_parallel(x):
    return spmd.all_reduce(x, "tp", src=P, dst=R)


def apply(fn, t):
    return fn(t)

'''


def _check(body: str, registry) -> list[tuple[int, int, str, str]]:  # noqa: ANN001
    """(line in `body`, column, code, message) of each diagnostic."""
    source = HEADER + body
    offset = HEADER.count("\n")
    return [(d.line - offset, d.column, d.code, d.message) for d in check_source(source, "t.py", Settings(), registry)]


def _revealed(body: str, registry) -> list[str]:  # noqa: ANN001
    found = sorted((line, msg) for line, _, code, msg in _check(body, registry) if code == "SPMD901")
    return [msg.split("forward ", 1)[1].split(";")[0] for _, msg in found]


# --------------------------------------------------------------------------- types through lambdas
@pytest.mark.parametrize(
    "spelling",
    [
        "row_parallel(x)",  # the direct form the others must agree with
        "(lambda t: row_parallel(t))(x)",
        "(lambda t, fn=row_parallel: fn(t))(x)",
        "(lambda *args, **kwargs: row_parallel(*args, **kwargs))(x)",
        "apply(lambda t: spmd.all_reduce(t, 'tp', src=P, dst=R), x)",
        "REGISTRY['row'](x)",
        "CALLS['row'](x)",
    ],
)
def test_a_value_through_a_lambda_keeps_its_type(spelling, registry):
    body = f'''
REGISTRY = {{"row": lambda x: row_parallel(x)}}
CALLS = {{"row": lambda *args, **kwargs: row_parallel(*args, **kwargs)}}


def step(x: Local["tp: P"]):
    f = lambda t: t
    reveal_spmd_type(f(x))
    reveal_spmd_type({spelling})
'''
    assert _revealed(body, registry) == ["{tp: P}", "{tp: R}"]


def test_a_lambda_closes_over_the_enclosing_names_and_binds_defaults_star_args_and_keywords(registry):
    body = '''
def step(x: Local["tp: P"], y: Local["tp: R"]):
    scale = 3
    g = lambda t, k=scale, *rest, **kw: (t * k, rest[0], kw["other"], y)
    a, b, c, d = g(x, 2, y, other=x)
    reveal_spmd_type(a)
    reveal_spmd_type(b)
    reveal_spmd_type(c)
    reveal_spmd_type(d)
'''
    assert _revealed(body, registry) == ["{tp: P}", "{tp: R}", "{tp: P}", "{tp: R}"]


def test_a_lambda_made_at_a_modules_top_level_reads_the_globals_at_its_call(registry):
    body = '''
LATER = lambda t: helper(t)


def helper(t):
    return spmd.all_reduce(t, "tp", src=P, dst=R)


def step(x: Local["tp: P"]):
    reveal_spmd_type(LATER(x))
'''
    assert _revealed(body, registry) == ["{tp: R}"]


# --------------------------------------------------------------------------- bugs through lambdas
def _bug(body: str, registry) -> list[tuple[int, int, str]]:  # noqa: ANN001
    return sorted((line, column, code) for line, column, code, _ in _check(body, registry) if code != "SPMD901")


NONLINEAR = '''
def step(x: Local["tp: P"]):
    {line}
    return y
'''


def test_a_partial_sum_through_a_nonlinear_op_in_a_lambda_is_the_direct_forms_finding(registry):
    direct = _bug(NONLINEAR.format(line="y = torch.relu(x)"), registry)
    assert [code for _, _, code in direct] == ["SPMD101"]
    # the same code, on the lambda's line, at the op inside the lambda
    through = _bug(NONLINEAR.format(line="y = (lambda t: torch.relu(t))(x)"), registry)
    assert through == [(direct[0][0], direct[0][1] + len("(lambda t: "), "SPMD101")]
    bound = _bug(NONLINEAR.format(line="f = lambda t: torch.relu(t); y = f(x)"), registry)
    assert bound == [(direct[0][0], direct[0][1] + len("f = lambda t: ") - len("y = "), "SPMD101")]


def test_a_bug_in_a_lambda_on_a_line_of_its_own_is_reported_there(registry):
    body = '''
def step(x: Local["tp: P"]):
    act = lambda t: torch.relu(t)
    h = x * 2
    return act(h)
'''
    assert _bug(body, registry) == [(3, 21, "SPMD101")]


def test_a_bug_in_a_lambda_over_an_enclosing_partial_sum(registry):
    body = '''
def step(x: Local["tp: P"]):
    later = lambda: torch.relu(x)
    return later()
'''
    assert _bug(body, registry) == [(3, 21, "SPMD101")]


def test_a_module_level_pass_through_lambda_reports_at_the_call_as_the_direct_call_does(registry):
    body = '''
def reduce_r(x: Local["tp: R"]):
    return x


CALLS = {{"r": lambda *args, **kwargs: reduce_r(*args, **kwargs)}}


def step(x: Local["tp: P"]):
    return {call}(x)
'''
    direct = _bug(body.format(call="reduce_r"), registry)
    assert direct and direct[0][0] == 10
    assert [(line, code) for line, _, code in _bug(body.format(call='CALLS["r"]'), registry)] == [
        (line, code) for line, _, code in direct]


GEMM = '''
@spmd.register_autograd_function
class RowParallelGemm(torch.autograd.Function):
    @staticmethod
    def typecheck_forward(x_shard_k, w_shard_k, group):
        spmd.assert_type(x_shard_k, {group: spmd.S(1)})
        spmd.assert_type(w_shard_k, {group: spmd.S(1)})
        result = CALL
        spmd.assert_type(result, {group: spmd.I})
        return result

    @staticmethod
    def forward(ctx, x_shard_k, w_shard_k, group):
        return x_shard_k @ w_shard_k.t()


def row_parallel(h, w):
    h = spmd.assert_type(h, {"tp": spmd.S(1)})
    w = spmd.assert_type(w, {"tp": spmd.S(1)})
    return RowParallelGemm.apply(h, w, "tp")
'''


def test_cls_apply_in_a_lambda_of_typecheck_forward_runs_forward_as_the_direct_call_does(registry):
    """Inside typecheck_forward, `Cls.apply(...)` runs forward (not typecheck_forward again): also from a lambda
    written there (the findings of `row_parallel`'s call, on axis 'tp')."""
    direct = _check(GEMM.replace("CALL", "RowParallelGemm.apply(x_shard_k, w_shard_k, group)"), registry)
    assert {code for _, _, code, _ in direct} == {"SPMD201", "SPMD401"}
    through = _check(GEMM.replace("CALL", "(lambda *args: RowParallelGemm.apply(*args))(x_shard_k, w_shard_k, group)"),
                     registry)
    assert sorted(through) == sorted(direct)


# --------------------------------------------------------------------------- syntax read through a lambda
@pytest.mark.parametrize(
    "source,made",
    [
        ("(lambda p, fn=dist.new_group: fn(p))(list(ranks))", "dist.new_group(list(ranks))"),
        ("(lambda *args, **kwargs: dist.new_group(*args, **kwargs))(r, backend=b)", "dist.new_group(r, backend=b)"),
        ("(lambda p: dist.new_group(p + 1))(r)", None),  # a parameter inside an argument: not read
        ("(lambda p: f(p))(p)", None),  # the caller's name is the parameter's: left alone
    ],
)
def test_a_lambda_called_at_once_reads_as_the_call_it_makes(source, made):
    from spmdcheck.analysis.lambdas import applied

    node = cst.parse_expression(source)
    out = applied(node)
    assert (None if out is node else cst.Module([]).code_for_node(out)) == made


PARALLEL_STATE = '''
import torch.distributed as dist

_FIRST_GROUP = None


def initialize(tp):
    global _FIRST_GROUP
    world, rank = dist.get_world_size(), dist.get_rank()
    for i in range(world // tp):
        ranks = range(i * tp, (i + 1) * tp)
        group = {make}
        if rank in ranks:
            _FIRST_GROUP = group
'''


@pytest.mark.parametrize("make", ["dist.new_group(list(ranks))", "(lambda r: dist.new_group(r))(list(ranks))",
                                  "(lambda r, fn=dist.new_group: fn(r))(list(ranks))"])
def test_process_groups_made_through_a_lambda_are_read_as_made_directly(make):
    """A program's own parallel_state (group_inference.py) reads the rank grid of a group made through a lambda."""
    from spmdcheck.analysis import group_inference

    module = cst.parse_module(PARALLEL_STATE.format(make=make))
    assert group_inference._group_grids(module) == {"_FIRST_GROUP": group_inference.CONTIGUOUS}


# --------------------------------------------------------------------------- the gradient walk
GRAD_HEADER = """\
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def shard(t):
    return t.chunk(dist.get_world_size())[dist.get_rank()]


def train_step(x, y):
    model = {model}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = F.mse_loss(model(shard(x)), shard(y))
    loss.backward()
"""


def _grad_codes(body: str, model: str = "nn.Linear(8, 4)", registry=None) -> list[tuple[int, str]]:  # noqa: ANN001
    header = GRAD_HEADER.format(model=model)
    lines = "".join("    " + line + "\n" for line in body.strip("\n").splitlines())
    diags = check_source(header + lines, "<gradsync>", Settings(mesh=("dp",)), registry)
    offset = header.count("\n")
    return sorted((d.line - offset, d.code) for d in diags)


@pytest.mark.parametrize("step", ["optimizer.step()", "(lambda: optimizer.step())()",
                                  "(lambda fn=optimizer.step: fn())()", "step = lambda: optimizer.step()\nstep()"])
def test_a_step_through_a_lambda_is_checked(step, registry):
    assert _grad_codes(step, registry=registry)[-1][1] == "SPMD601"


@pytest.mark.parametrize("sync", [
    "for p in model.parameters():\n    dist.all_reduce(p.grad)",
    "reduce = lambda m: [dist.all_reduce(p.grad) for p in m.parameters()]\nreduce(model)",
    'SYNCS = {"dp": lambda m: [dist.all_reduce(p.grad) for p in m.parameters()]}\nSYNCS["dp"](model)',
])
def test_a_sync_through_a_lambda_in_the_walk_is_the_direct_forms(sync, registry):
    codes = _grad_codes(sync + "\noptimizer.step()", model="DistributedDataParallel(nn.Linear(8, 4))",
                        registry=registry)
    assert [code for _, code in codes] == ["SPMD602"]

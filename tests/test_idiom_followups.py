"""Python idioms of issue 20 the idiom rewrites found the checker missing (tests/fuzz/idioms.py): each is
checked on a small program against its direct form, by the types the checker reveals or the findings it
gives (the same code and line as the direct form, the operand named as the direct form names it)."""
from __future__ import annotations

import pytest

from spmdcheck.api import Settings, check_source

HEADER = '''# spmdcheck: mesh = ["tp"]
import functools
import torch
import torch.distributed as dist
import spmd_types as spmd
from spmd_types import I, P, R, S, V
from spmdcheck.annotations import Local, reveal_spmd_type

'''


def _check(body: str, registry) -> list[tuple[int, str, str]]:  # noqa: ANN001
    source = HEADER + body
    return [(d.line - HEADER.count("\n"), d.code, d.message) for d in check_source(source, "t.py", Settings(),
                                                                                     registry)]


def _revealed(body: str, registry) -> list[str]:  # noqa: ANN001
    """The forward types revealed, in line order (one per reveal: the step is checked as a root)."""
    found = sorted((line, msg) for line, code, msg in _check(body, registry) if code == "SPMD901")
    return [msg.split("forward ", 1)[1].split(";")[0] for _, msg in found]


GENERATORS = '''
def pairs(items):
    for item in items:
        yield item


def pairs_from(items):
    yield from items


class Items:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        for item in self.items:
            yield item


def step(a: Local["tp: P"], b: Local["tp: R"]):
    x, y = {call}
    reveal_spmd_type(x)
    reveal_spmd_type(y)
'''


@pytest.mark.parametrize("call", ["pairs((a, b))", "pairs_from((a, b))", "Items((a, b))", "list(Items((a, b)))"])
def test_a_generator_yields_its_items_in_order(call, registry):
    assert _revealed(GENERATORS.replace("{call}", call), registry) == ["{tp: P}", "{tp: R}"]


def test_a_generator_whose_yield_may_not_run_keeps_one_shared_item(registry):
    body = GENERATORS.replace("        yield item\n\n\ndef pairs_from", "        if item is not None:\n"
                              "            yield item\n\n\ndef pairs_from").replace("{call}", "pairs((a, b))")
    assert _revealed(body, registry) == ["unknown", "unknown"]


def test_a_generator_over_a_rank_dependent_range_makes_the_loop_rank_dependent(registry):
    body = '''
def pieces(n):
    yield from range(n)


def step(x: Local["tp: S(0)"]):
    n = dist.get_rank()
    for i in pieces(n):
        spmd.all_gather(x, "tp", src=S(0), dst=R)
'''
    assert [(line, code) for line, code, _ in _check(body, registry)] == [(9, "SPMD501")]


@pytest.mark.parametrize("read", ['dict(zip(["a"], [a]))["a"]', 'dict([("a", a)])["a"]', '{"a": a}.get("a")'])
def test_a_dict_built_from_pairs_keeps_each_value(read, registry):
    body = f'''
def step(a: Local["tp: P"]):
    reveal_spmd_type({read})
'''
    assert _revealed(body, registry) == ["{tp: P}"]


@pytest.mark.parametrize("target", ['{"h": h}["h"]', 'dict(h=h)["h"]', "[t for t in [h]][0]", "(h, h)[1]",
                                    '{k: t for k, t in [("h", h)]}["h"]', 'dict(zip(["h"], [h]))["h"]'])
def test_an_in_place_write_through_a_container_read_changes_the_variable(target, registry):
    body = '''
def step(h: Local["tp: P"]):
    dist.all_reduce(TARGET)
    reveal_spmd_type(h)
'''
    direct = _revealed(body.replace("TARGET", "h"), registry)
    assert direct != ["{tp: P}"]
    assert _revealed(body.replace("TARGET", target), registry) == direct


FORWARDED = '''
def forward_call(fn, /, *args, **kwargs):
    """Time the call."""
    return fn(*args, **kwargs)


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@traced
def typed(x: Local["tp: S(0)"]):
    return x


def step(h: Local["tp: R"]):
    y = {call}
    return y
'''


@pytest.mark.parametrize(("call", "direct"), [
    ('forward_call(spmd.convert, h, "tp", src=I, dst=R)', 'spmd.convert(h, "tp", src=I, dst=R)'),
    ("typed(h)", None),
])
def test_a_pass_through_forwarder_calls_its_callee_at_the_call_site(call, direct, registry):
    found = _check(FORWARDED.replace("{call}", call), registry)
    assert [(line, code) for line, code, _ in found] == [(21, found[0][1])], found
    assert "args" not in found[0][2], found
    if direct is not None:
        assert _check(FORWARDED.replace("{call}", direct), registry) == found


def test_a_decorator_given_two_functions_wraps_each_its_own(registry):
    """`timed`'s wrapper is itself decorated: the call `traced(wrapper)` is made once per function `timed`
    wraps, with a wrapper of the same definition and another closure each time."""
    body = '''
def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


def timed(fn):
    @functools.wraps(fn)
    @traced
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        return out

    return wrapper


@timed
def first(x):
    return x


@timed
def second(x, y):
    return y


def step(a: Local["tp: P"], b: Local["tp: R"]):
    reveal_spmd_type(first(a))
    reveal_spmd_type(second(a, b))
'''
    assert _revealed(body, registry)[-2:] == ["{tp: P}", "{tp: R}"]


def test_dynamic_attributes_read_module_methods_and_keep_declared_types(registry):
    body = '''
from torch import nn


class Inner(nn.Module):
    def __init__(self, v):
        super().__init__()
        self.v = v


class Experts(nn.Module):
    w: Local["tp: S(0)"]

    def __init__(self, w, v):
        super().__init__()
        setattr(self, "w", nn.Parameter(w))
        getattr(self, "add_module")("inner", Inner(v))

    def forward(self, x):
        reveal_spmd_type(getattr(self, "w"))
        reveal_spmd_type(self.inner.v)
        return x


def step(w, v: Local["tp: P"], x: Local["tp: R"]):
    return Experts(w, v)(x)
'''
    direct = body.replace('setattr(self, "w", nn.Parameter(w))', "self.w = nn.Parameter(w)").replace(
        'getattr(self, "add_module")("inner", Inner(v))', "self.inner = Inner(v)")
    assert {"{tp: S(0)}", "{tp: P}"} <= set(_revealed(direct, registry))
    assert _revealed(body, registry) == _revealed(direct, registry)

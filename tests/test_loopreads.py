"""Which names one pass of a loop body may read before writing them (analysis/interp/loopreads.py)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from spmdcheck.analysis.interp.loopreads import exposed_reads


def _loop(source: str) -> cst.For | cst.While:
    module = cst.parse_module(textwrap.dedent(source))
    loop = module.body[0]
    assert isinstance(loop, (cst.For, cst.While))
    return loop


_ELIF = "for p in ps:\n    if p:\n        x = 1\n    elif q:\n        {middle}\n    else:\n        x = 3\n    use(x)\n"


@pytest.mark.parametrize(
    ("source", "exposed", "not_exposed"),
    [
        # written first, then read: not exposed; the target is written before the body
        ("for p in ps:\n    g = p.grad\n    use(g)\n", {"use", "p.grad"}, {"g", "p"}),
        # a counter is read before it is written
        ("for p in ps:\n    offset = offset + p.numel()\n", {"offset"}, set()),
        ("for p in ps:\n    n += 1\n", {"n"}, set()),
        # written in one arm of an `if` only: read after it, exposed
        ("for p in ps:\n    if p:\n        x = 1\n    use(x)\n", {"x"}, set()),
        # written in both arms: defined after the `if`
        ("for p in ps:\n    if p:\n        x = 1\n    else:\n        x = 2\n    use(x)\n", set(), {"x"}),
        (_ELIF.format(middle="x = 2"), set(), {"x"}),
        (_ELIF.format(middle="pass"), {"x"}, set()),
        # a nested loop's body may not run: what it writes is not defined after it
        ("for p in ps:\n    for q in qs:\n        y = q\n    use(y)\n", {"y"}, set()),
        # inside the nested loop, its own writes count
        ("for p in ps:\n    for q in qs:\n        y = q\n        use(y)\n", set(), {"y"}),
        # a `with` body always runs
        ("for p in ps:\n    with ctx() as c:\n        z = c\n    use(z)\n", set(), {"z", "c"}),
        # a try body may stop anywhere: a handler sees only what was written before the `try`
        ("for p in ps:\n    try:\n        w = f()\n    except E:\n        use(w)\n", {"w"}, set()),
        ("for p in ps:\n    try:\n        w = f()\n    except E:\n        pass\n    use(w)\n", {"w"}, set()),
        # attribute chains are names of their own; reading a.b.c reads a and a.b
        ("for p in ps:\n    self.total = p\n    use(self.total)\n", {"self"}, {"self.total"}),
        ("for p in ps:\n    use(self.total.x)\n    self.total = p\n", {"self.total", "self.total.x"}, set()),
        # a subscript target reads its value and index
        ("for p in ps:\n    buf[i] = p\n", {"buf", "i"}, set()),
        # unpacking writes every name
        ("for p in ps:\n    a, (b, *c) = p\n    use(a, b, c)\n", set(), {"a", "b", "c"}),
        # a nested function reads what it names (its own name is written)
        ("for p in ps:\n    def hook(g):\n        return g * scale\n    register(hook)\n", {"scale"}, {"hook"}),
        # a lambda or comprehension reads every name in it
        ("for p in ps:\n    fs = [lambda: k for k in ks]\n", {"k", "ks"}, {"fs"}),
        # a while loop has no target
        ("while left:\n    left = left - 1\n", {"left"}, set()),
    ],
)
def test_exposed_reads(source: str, exposed: set[str], not_exposed: set[str]) -> None:
    found = exposed_reads(_loop(source))
    assert found is not None
    assert exposed <= found, exposed - found
    assert not (not_exposed & found), not_exposed & found


@pytest.mark.parametrize(
    "source",
    [
        "for p in ps:\n    del x\n",
        "for p in ps:\n    global g\n    g = p\n",
        "for p in ps:\n    if p:\n        del p\n",
    ],
)
def test_rebinding_it_does_not_follow_is_unknown(source: str) -> None:
    assert exposed_reads(_loop(source)) is None

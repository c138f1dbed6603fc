"""Fuzzing the frontend (issue 9): arbitrary valid Python, and SPMD programs with random annotation strings,
einsum equations, shard dims and expressions, checked in-process. Never an exception (nor an SPMD000: an
exception the checker caught), never a hang: each example has a time budget enforced by a timer signal.

Seeded (`derandomize`), so CI runs the same examples every time; `SPMDCHECK_FUZZ_EXAMPLES` runs more.
"""

from __future__ import annotations

import functools
import os
import signal
from contextlib import contextmanager

import hypothesmith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spmdcheck.api import check_source, load_registry

SCALE = int(os.environ.get("SPMDCHECK_FUZZ_EXAMPLES", "1"))
# Per example: CPU seconds (counted over all threads, so a loaded machine does not make it flaky) and,
# against a hang that does not spin, wall seconds.
BUDGET_CPU_S = 20.0
BUDGET_WALL_S = 600.0


def fuzz_settings(examples: int):  # noqa: ANN201
    return settings(
        max_examples=examples * SCALE,
        derandomize=True,
        deadline=None,  # the timer below is the budget: hypothesis' deadline would not stop a hang
        suppress_health_check=list(HealthCheck),
        database=None,
    )


@contextmanager
def time_budget(cpu_seconds: float, wall_seconds: float):  # noqa: ANN201
    def expired(signum, frame):  # noqa: ANN001
        kind = "CPU" if signum == signal.SIGPROF else "wall"
        raise TimeoutError(f"the checker took more than its {kind} time budget on this example")

    previous = {sig: signal.signal(sig, expired) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
    signal.setitimer(signal.ITIMER_REAL, wall_seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@functools.cache
def registry():  # noqa: ANN201 - not a fixture: hypothesis would print its repr with every failure
    return load_registry(())


def check_never_fails(source: str) -> None:
    with time_budget(BUDGET_CPU_S, BUDGET_WALL_S):
        diags = check_source(source, "fuzz.py", registry=registry())
    internal = [d for d in diags if d.code == "SPMD000"]
    assert not internal, (source, [d.message for d in internal])
    for d in diags:
        assert d.line >= 1 and d.column >= 1, d


@fuzz_settings(60)
@given(source=hypothesmith.from_grammar())
def test_arbitrary_valid_python(source):
    check_never_fails(source)


# ------------------------------------------------------------- SPMD programs with random pieces
AXES = st.sampled_from(["tp", "dp", "ep", "cp", "x", "tp2", ""])
SHARD = st.one_of(
    st.integers(-70, 70),
    st.sampled_from([-(10**30), 10**30, 2**63, 99999999999999999999999999]),
)
TYPE = st.one_of(
    st.sampled_from(["R", "I", "V", "P", "Replicate", "Invariant", "Varying", "Partial", "Q", "", "S()", "S(x)"]),
    SHARD.map(lambda d: f"S({d})"),
    SHARD.map(lambda d: f"Shard({d})"),
)
VALID_TYPE = st.one_of(st.sampled_from(["R", "I", "V", "P"]), st.integers(-3, 3).map(lambda d: f"S({d})"))
SPEC_TEXT = st.one_of(
    # mostly well-formed over the usual axes, so that the analysis behind the annotation runs too
    st.lists(st.tuples(st.sampled_from(["tp", "dp"]), VALID_TYPE), min_size=1, max_size=2, unique_by=lambda p: p[0])
    .map(lambda pairs: ", ".join(f"{a}: {t}" for a, t in pairs)),
    st.lists(st.tuples(st.sampled_from(["tp", "dp"]), VALID_TYPE), min_size=1, max_size=2, unique_by=lambda p: p[0])
    .map(lambda pairs: ", ".join(f"{a}: {t}" for a, t in pairs)),
    st.lists(st.tuples(AXES, TYPE), max_size=4).map(lambda pairs: ", ".join(f"{a}: {t}" for a, t in pairs)),
    st.text(alphabet="tpd:, SRIVP()0123456789-{}'\"[]x", max_size=30),
)
LETTERS = "abcijkmn"
EQUATION = st.one_of(
    st.text(alphabet=LETTERS + ".,->", max_size=20),
    st.tuples(
        st.text(alphabet=LETTERS, min_size=0, max_size=4),
        st.text(alphabet=LETTERS, min_size=0, max_size=4),
        st.text(alphabet=LETTERS, min_size=0, max_size=4),
        st.booleans(),
    ).map(lambda t: f"{'...' if t[3] else ''}{t[0]},{t[1]}->{'...' if t[3] else ''}{t[2]}"),
)
DIM_EXPR = st.one_of(
    SHARD.map(str),
    st.sampled_from(["10**10**10", "10**100", "2**64", "-1", "1 << 100", "x.dim()", "len(x.shape)", "k"]),
)
TYPE_EXPR = st.one_of(
    st.sampled_from(["R", "I", "V", "P", "spmd.R", "spmd.P"]),
    DIM_EXPR.map(lambda d: f"S({d})"),
)
TENSORS = ["x", "w", "y", "z"]
UNARY = [
    "{}.sum(0)", "{}.sum(-1)", "{}.mean()", "{}.exp()", "{}.T", "{}.t()", "{}.float()", "{}[0]", "{}[:, :2]",
    "{}.transpose(0, 1)", "{}.unsqueeze({d})", "{}.view(-1)", "{}.reshape(2, -1)", "{}.movedim(0, {d})",
    "F.gelu({})", "torch.relu({})", "{}.detach()", "{}.clone()", "-{}", "{}.softmax(-1)",
    "spmd.all_reduce({}, 'tp', src=P, dst=R)", "spmd.all_gather({}, 'tp', src=V, dst=R)",
    "spmd.reduce_scatter({}, 'tp', src=P, dst=V)", "spmd.convert({}, 'tp', src=I, dst=R)",
    "dist.all_reduce({})", "spmd.assert_type({}, {{'tp': {t}}})", "{}.chunk(2, {d})[0]",
]
BINARY = ["{} + {}", "{} * {}", "{} @ {}", "{} - {}", "torch.matmul({}, {})", "F.linear({}, {})",
          "torch.einsum({eq!r}, {}, {})", "torch.cat([{}, {}], {d})"]


@st.composite
def tensor_expr(draw, depth: int = 0):  # noqa: ANN001, ANN201
    if depth > 4 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(TENSORS))
    d, t = draw(DIM_EXPR), draw(TYPE_EXPR)
    eq = draw(EQUATION)
    if draw(st.booleans()):
        return draw(st.sampled_from(UNARY)).format(draw(tensor_expr(depth + 1)), d=d, t=t)
    return draw(st.sampled_from(BINARY)).format(draw(tensor_expr(depth + 1)), draw(tensor_expr(depth + 1)), d=d, eq=eq)


STATEMENT = st.one_of(
    st.tuples(st.sampled_from(TENSORS), tensor_expr()).map(lambda t: f"{t[0]} = {t[1]}"),
    tensor_expr().map(lambda e: f"if rank == 0:\n        y = {e}\n    else:\n        y = x"),
    tensor_expr().map(lambda e: f"for _ in range(k):\n        z = {e}"),
    st.tuples(st.sampled_from(TENSORS), SPEC_TEXT).map(lambda t: f"{t[0]}: Local[{t[1]!r}] = {t[0]}"),
)


@st.composite
def spmd_program(draw):  # noqa: ANN001, ANN201
    mesh = draw(st.one_of(st.just(["tp", "dp"]), st.just(["tp"]), st.lists(AXES, max_size=3)))
    body = "\n    ".join(draw(st.lists(STATEMENT, min_size=1, max_size=6)))
    return (
        f"# spmdcheck: mesh = {mesh!r}\n"
        "import torch\nimport torch.distributed as dist\nimport torch.nn.functional as F\n"
        "import spmd_types as spmd\nfrom spmd_types import I, P, R, S, V\n"
        "from spmdcheck.annotations import Local\n\n\n"
        f"def step(x: Local[{draw(SPEC_TEXT)!r}], w: Local[{draw(SPEC_TEXT)!r}], k: int, rank: int) "
        f"-> Local[{draw(SPEC_TEXT)!r}]:\n"
        f"    y = torch.einsum({draw(EQUATION)!r}, x, w)\n"
        f"    z = spmd.assert_type(y, {{{draw(AXES)!r}: {draw(TYPE_EXPR)}}})\n"
        f"    {body}\n"
        f"    return {draw(tensor_expr())}\n"
    )


@fuzz_settings(250)
@given(source=spmd_program())
def test_spmd_programs_with_random_annotations_equations_and_dims(source):
    check_never_fails(source)


def test_the_time_budget_stops_a_hang():
    import time

    def spin() -> None:  # Python bytecode: the signal handler runs between instructions
        while True:
            pass

    for cpu, wall, work in ((0.2, 60, spin), (60, 0.2, lambda: time.sleep(5))):
        try:
            with time_budget(cpu, wall):
                work()
        except TimeoutError:
            continue
        raise AssertionError("the budget did not stop the example")

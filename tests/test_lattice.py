"""Unit tests for spmdcheck.lattice (pure module).

The reference is shared/reference/type_system.md: section 2.1 (per-axis
inference and its compact truth table), 2.3 (no-grad R/I relaxation), 2.4 and
2.5 (scalars, the division divisor), 5.3/5.4 (fix suggestions), and
einsum_rules.md section 1.3/4.1 (Vp shadow rules).

The oracle below is written from the reference's prose only; it does not call
the code under test.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spmdcheck import lattice
from spmdcheck.lattice import (
    FIX_CANDIDATES,
    SCALAR,
    AxisError,
    AxisType,
    Fix,
    GradState,
    Kind,
    Linearity,
    Operand,
    Rule,
    S,
    Site,
    SpmdType,
    backward_kind,
    infer_axis,
    shadow_partial_check,
    suggest_fixes,
)

# ---------------------------------------------------------------------------
# Independent oracle (type_system.md 2.1 + 2.3 + 2.5 divisor), on plain strings
# ---------------------------------------------------------------------------

KINDS = ("R", "I", "V", "P", "s")  # "s" = a weak Python number (Scalar marker)
GRADS = ("YES", "NO", "UNKNOWN")
LINS = ("nonlinear", "linear", "multilinear")

ERR_IMIX = "invariant-mix"
ERR_PV = "partial-with-varying"
ERR_PNL = "partial-nonlinear"
ERR_AFF = "partial-affine"
ERR_PP = "partial-several-factors"
ERR_DIV = "partial-divisor"


def oracle_relax(ops):
    """2.3: 'Only when I occurs among the operands and not all operands are
    I/scalars. Let G = the set of types among R/I operands that can receive
    gradients. If G has at most one element, every no-grad R/I operand is
    recast to I if G == {I}, else to R; V/P operands are untouched.'
    An UNKNOWN grad state may receive a gradient (only NO is 'never')."""
    kinds = [k for k, _g, _d in ops]
    if "I" not in kinds or all(k in ("I", "s") for k in kinds):
        return kinds
    G = {k for k, g, _d in ops if k in ("R", "I") and g != "NO"}
    if len(G) > 1:
        return kinds
    target = "I" if G == {"I"} else "R"
    return [target if (k in ("R", "I") and g == "NO") else k for k, g, _d in ops]


def oracle(ops, lin, relax=True):
    """2.1 steps 1-7; a P in a divisor position is its own error, checked before inference (2.5)."""
    if any(d and k == "P" for k, _g, d in ops):
        return ("err", ERR_DIV)
    T = oracle_relax(ops) if relax else [k for k, _g, _d in ops]
    U = set(T)
    if U <= {"R", "s"}:
        return "R"
    if U <= {"I", "s"}:
        return "I"
    if U <= {"R", "V", "s"}:
        return "V"
    if "I" in U:
        return ("err", ERR_IMIX)
    assert "P" in U
    non_p = [k for k in T if k != "P"]
    if "V" in non_p:
        return ("err", ERR_PV)
    if lin == "nonlinear":
        return ("err", ERR_PNL)
    if lin == "linear":
        if "R" in non_p or "s" in non_p:
            return ("err", ERR_AFF)
        return "P"
    if T.count("P") >= 2:
        return ("err", ERR_PP)
    return "P"


# ---------------------------------------------------------------------------
# Adapters between oracle strings and the code's values
# ---------------------------------------------------------------------------

K = {"R": Kind.R, "I": Kind.I, "V": Kind.V, "P": Kind.P, "s": SCALAR}
G_ = {"YES": GradState.YES, "NO": GradState.NO, "UNKNOWN": GradState.UNKNOWN}
L = {"nonlinear": Linearity.NONLINEAR, "linear": Linearity.LINEAR, "multilinear": Linearity.MULTILINEAR}


def mk_ops(ops):
    return [Operand(K[k], G_[g], d) for k, g, d in ops]


def normalize(result):
    if isinstance(result, AxisError):
        return ("err", result.rule.value)
    assert isinstance(result, Kind), result
    return result.value


def printed(k):
    return "Scalar" if k == "s" else k


def grad_combos(n):
    return itertools.product(GRADS, repeat=n)


# ---------------------------------------------------------------------------
# Exhaustive comparison with the oracle
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lin", LINS)
@pytest.mark.parametrize("kinds", list(itertools.product(KINDS, repeat=2)), ids="".join)
def test_infer_axis_pairs_all_grad_states(kinds, lin):
    for grads in grad_combos(2):
        ops = [(k, g, False) for k, g in zip(kinds, grads)]
        got = infer_axis(mk_ops(ops), L[lin])
        assert normalize(got) == oracle(ops, lin), (ops, lin)
        if isinstance(got, AxisError):
            assert got.found == tuple(printed(k) for k in kinds)


@pytest.mark.parametrize("lin", LINS)
def test_infer_axis_all_triples_all_grad_states(lin):
    mismatches = []
    for kinds in itertools.product(KINDS, repeat=3):
        for grads in grad_combos(3):
            ops = [(k, g, False) for k, g in zip(kinds, grads)]
            got = infer_axis(mk_ops(ops), L[lin])
            want = oracle(ops, lin)
            if normalize(got) != want:
                mismatches.append((ops, normalize(got), want))
            elif isinstance(got, AxisError) and got.found != tuple(printed(k) for k in kinds):
                mismatches.append((ops, got.found, "found"))
    assert mismatches == []


@pytest.mark.parametrize("lin", LINS)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_infer_axis_strict_without_relaxation(n, lin):
    """relax=False must ignore grad states entirely (strict R/I semantics, as 5.3 uses)."""
    mismatches = []
    for kinds in itertools.product(KINDS, repeat=n):
        for grads in grad_combos(n):
            ops = [(k, g, False) for k, g in zip(kinds, grads)]
            got = normalize(infer_axis(mk_ops(ops), L[lin], relax=False))
            if got != oracle(ops, lin, relax=False):
                mismatches.append((ops, got))
    assert mismatches == []


@pytest.mark.parametrize("lin", LINS)
def test_infer_axis_divisor_flag_exhaustive(lin):
    """Every pair/triple with every divisor-flag placement (grads UNKNOWN and NO)."""
    mismatches = []
    for n in (1, 2, 3):
        for kinds in itertools.product(KINDS, repeat=n):
            for flags in itertools.product((False, True), repeat=n):
                for g in ("UNKNOWN", "NO"):
                    ops = [(k, g, f) for k, f in zip(kinds, flags)]
                    got = normalize(infer_axis(mk_ops(ops), L[lin]))
                    if got != oracle(ops, lin):
                        mismatches.append((ops, got))
    assert mismatches == []


# ---------------------------------------------------------------------------
# The reference's own tables, literally
# ---------------------------------------------------------------------------

X = "x"
# type_system.md 2.1 compact truth table: operands -> (NONLINEAR, LINEAR, MULTILINEAR); grads may flow.
TRUTH_TABLE = [
    (("R", "R"), ("R", "R", "R")),
    (("R", "s"), ("R", "R", "R")),
    (("I", "I"), ("I", "I", "I")),
    (("I", "s"), ("I", "I", "I")),
    (("V", "V"), ("V", "V", "V")),
    (("V", "s"), ("V", "V", "V")),
    (("R", "V"), ("V", "V", "V")),
    (("I", "R"), (X, X, X)),
    (("I", "V"), (X, X, X)),
    (("P",), (X, "P", "P")),
    (("P", "P"), (X, "P", X)),
    (("P", "R"), (X, X, "P")),
    (("P", "s"), (X, X, "P")),
    (("P", "V"), (X, X, X)),
    (("P", "I"), (X, X, X)),
]


@pytest.mark.parametrize("kinds,row", TRUTH_TABLE, ids=lambda v: "".join(v) if isinstance(v[0], str) else None)
def test_compact_truth_table(kinds, row):
    for lin, want in zip(LINS, row):
        for order in {kinds, tuple(reversed(kinds))}:
            got = infer_axis([Operand(K[k], GradState.YES) for k in order], L[lin])
            if want == X:
                assert isinstance(got, AxisError), (order, lin, got)
            else:
                assert got is Kind(want), (order, lin, got)


@pytest.mark.parametrize(
    "kinds,lin,rule",
    [
        (("I", "R"), "multilinear", Rule.INVARIANT_MIX),
        (("P", "V"), "linear", Rule.PARTIAL_WITH_VARYING),
        (("P", "V"), "nonlinear", Rule.PARTIAL_WITH_VARYING),  # 6a fires regardless of linearity
        (("P",), "nonlinear", Rule.PARTIAL_NONLINEAR),
        (("P", "R"), "linear", Rule.PARTIAL_AFFINE),
        (("s", "P"), "linear", Rule.PARTIAL_AFFINE),  # 1 - P
        (("P", "P"), "multilinear", Rule.PARTIAL_SEVERAL_FACTORS),
        (("P", "I"), "linear", Rule.INVARIANT_MIX),  # the I rule fires first
    ],
)
def test_error_rules_named(kinds, lin, rule):
    got = infer_axis([Operand(K[k], GradState.YES) for k in kinds], L[lin])
    assert got == AxisError(rule, tuple(printed(k) for k in kinds))


# 2.3 probed examples; the result does not depend on the linearity.
RELAX_EXAMPLES = [
    ([("I", "YES"), ("R", "NO")], "I"),
    ([("I", "NO"), ("R", "YES")], "R"),
    ([("I", "NO"), ("V", "YES")], "V"),
    ([("I", "YES"), ("V", "YES")], X),
    ([("I", "YES"), ("R", "YES")], X),
    ([("I", "NO"), ("R", "NO")], "R"),  # under torch.no_grad(): any I/R mix -> R
    ([("R", "NO"), ("I", "NO"), ("I", "NO")], "R"),
    ([("I", "UNKNOWN"), ("R", "NO")], "I"),  # UNKNOWN may receive a gradient
    ([("I", "UNKNOWN"), ("R", "UNKNOWN")], X),
]


@pytest.mark.parametrize("lin", LINS)
@pytest.mark.parametrize("ops,want", RELAX_EXAMPLES)
def test_no_grad_relaxation_probed_examples(ops, want, lin):
    got = infer_axis([Operand(K[k], G_[g]) for k, g in ops], L[lin])
    if want == X:
        assert isinstance(got, AxisError) and got.rule is Rule.INVARIANT_MIX
    else:
        assert got is Kind(want)
    # relax=False never recasts: an I/R mix is always an error
    assert isinstance(infer_axis([Operand(K[k], G_[g]) for k, g in ops], L[lin], relax=False), AxisError)


def test_relaxation_only_when_i_present_and_not_all_i():
    # no I: nothing to relax, a no-grad R stays R (R with V -> V, R with P multilinear -> P)
    assert infer_axis([Operand(Kind.R, GradState.NO), Operand(Kind.P)], Linearity.MULTILINEAR) is Kind.P
    # all I / scalars: stays I even though no grads flow
    ops = [Operand(Kind.I, GradState.NO), Operand(SCALAR), Operand(Kind.I, GradState.NO)]
    assert infer_axis(ops, Linearity.NONLINEAR) is Kind.I


def test_partial_times_no_grad_invariant():
    """Truth table: P·I(no grad) -> P under MULTILINEAR; LINEAR then sees P + R (affine)."""
    ops = [Operand(Kind.P, GradState.YES), Operand(Kind.I, GradState.NO)]
    assert infer_axis(ops, Linearity.MULTILINEAR) is Kind.P
    assert infer_axis(ops, Linearity.LINEAR).rule is Rule.PARTIAL_AFFINE
    assert infer_axis(ops, Linearity.NONLINEAR).rule is Rule.PARTIAL_NONLINEAR
    # the error reports the operand types as written, not the relaxed ones
    assert infer_axis(ops, Linearity.LINEAR).found == ("P", "I")


@pytest.mark.parametrize(
    "ops,want",
    [
        # P / 2 -> P ; 2 / P -> error ; P / R -> P ; R / P -> error ; P / P -> divisor error first
        ([Operand(Kind.P), Operand(SCALAR, divisor=True)], Kind.P),
        ([Operand(SCALAR), Operand(Kind.P, divisor=True)], Rule.PARTIAL_DIVISOR),
        ([Operand(Kind.P), Operand(Kind.R, divisor=True)], Kind.P),
        ([Operand(Kind.R), Operand(Kind.P, divisor=True)], Rule.PARTIAL_DIVISOR),
        ([Operand(Kind.P), Operand(Kind.P, divisor=True)], Rule.PARTIAL_DIVISOR),
        ([Operand(Kind.I), Operand(Kind.P, divisor=True)], Rule.PARTIAL_DIVISOR),
        ([Operand(Kind.V), Operand(Kind.P, divisor=True)], Rule.PARTIAL_DIVISOR),
        ([Operand(Kind.P, divisor=True)], Rule.PARTIAL_DIVISOR),
        ([Operand(Kind.V), Operand(Kind.R, divisor=True)], Kind.V),
        ([Operand(Kind.P), Operand(Kind.V, divisor=True)], Rule.PARTIAL_WITH_VARYING),
    ],
)
def test_divisor_flag(ops, want):
    got = infer_axis(ops, Linearity.MULTILINEAR)
    if isinstance(want, Rule):
        assert isinstance(got, AxisError) and got.rule is want
    else:
        assert got is want


def test_scalar_is_weak_and_printed_as_scalar():
    assert infer_axis([Operand(SCALAR)], Linearity.LINEAR) is Kind.R
    assert infer_axis([Operand(Kind.I), Operand(SCALAR)], Linearity.LINEAR) is Kind.I  # I + 1 -> I
    err = infer_axis([Operand(Kind.P), Operand(SCALAR)], Linearity.LINEAR)  # P + 1
    assert err == AxisError(Rule.PARTIAL_AFFINE, ("P", "Scalar"))


def test_grad_state_join():
    J = GradState.join
    assert J([]) is GradState.NO
    assert J([GradState.NO, GradState.NO]) is GradState.NO
    assert J([GradState.NO, GradState.UNKNOWN]) is GradState.UNKNOWN
    assert J([GradState.UNKNOWN, GradState.YES, GradState.NO]) is GradState.YES
    assert J(iter([GradState.YES])) is GradState.YES


# ---------------------------------------------------------------------------
# backward_kind, AxisType, SpmdType
# ---------------------------------------------------------------------------


def test_backward_kind_duality():
    assert backward_kind(Kind.R) is Kind.P
    assert backward_kind(Kind.P) is Kind.R
    assert backward_kind(Kind.I) is Kind.I
    assert backward_kind(Kind.V) is Kind.V
    for k in Kind:
        assert backward_kind(backward_kind(k)) is k


def test_kind_str_and_names():
    assert [str(k) for k in Kind] == ["R", "I", "V", "P"]
    assert lattice.LONG_NAMES[Kind.P] == "Partial"
    assert (lattice.R, lattice.I, lattice.V, lattice.P) == (Kind.R, Kind.I, Kind.V, Kind.P)


@pytest.mark.parametrize("kind", [Kind.R, Kind.I, Kind.P])
def test_axis_type_only_v_carries_refinements(kind):
    with pytest.raises(ValueError):
        AxisType(kind, shard=0)
    with pytest.raises(ValueError):
        AxisType(kind, pending=Site(1))
    with pytest.raises(ValueError):
        AxisType(kind, shard=-1, pending=Site(1))
    assert str(AxisType(kind)) == kind.value
    assert not AxisType(kind).is_pending


def test_axis_type_v_refinements():
    site = Site(3, "mm")
    vp = AxisType(Kind.V, pending=site)
    assert vp.is_pending and vp.shard is None and str(vp) == "V"
    assert vp.plain() == AxisType(Kind.V) == lattice.AV
    assert S(2) == AxisType(Kind.V, shard=2)
    assert S(2).plain() == AxisType(Kind.V)
    assert not S(2).is_pending
    assert S(0) != S(1) != AxisType(Kind.V)
    assert AxisType(Kind.V, pending=Site(1)) != AxisType(Kind.V, pending=Site(2))
    assert hash(S(1)) == hash(AxisType(Kind.V, shard=1))
    assert (lattice.AR, lattice.AI, lattice.AP) == (AxisType(Kind.R), AxisType(Kind.I), AxisType(Kind.P))


@pytest.mark.parametrize("d,text", [(0, "S(0)"), (1, "S(1)"), (-1, "S(-1)"), (12, "S(12)")])
def test_shard_printing(d, text):
    assert str(S(d)) == text
    assert str(AxisType(Kind.V, shard=d, pending=Site(0))) == text
    assert str(AxisType(Kind.V)) == "V"


def test_axis_type_is_frozen():
    t = S(0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.shard = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.kind = Kind.R  # type: ignore[misc]


def test_spmd_type_mapping_equality_hash():
    src = {"tp": S(0), "dp": AxisType(Kind.R)}
    a = SpmdType(src)
    b = SpmdType([("dp", AxisType(Kind.R)), ("tp", S(0))])
    assert a == b and hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert list(a) == ["dp", "tp"]  # sorted by axis name
    assert len(a) == 2 and a["tp"] == S(0) and "dp" in a
    assert repr(a) == "{dp: R, tp: S(0)}"
    # refinements count for equality; without_refinements drops them
    c = SpmdType({"dp": AxisType(Kind.R), "tp": AxisType(Kind.V)})
    assert a != c and hash(a.without_refinements()) == hash(c)
    assert a.without_refinements() == c
    assert SpmdType() == SpmdType({}) and len(SpmdType()) == 0
    assert SpmdType({"tp": AxisType(Kind.R)}) != SpmdType({"tp": AxisType(Kind.I)})
    assert SpmdType({"tp": AxisType(Kind.R)}) != SpmdType({"dp": AxisType(Kind.R)})


def test_spmd_type_is_immutable():
    src = {"tp": AxisType(Kind.P)}
    t = SpmdType(src)
    h = hash(t)
    src["tp"] = AxisType(Kind.R)  # the source dict is copied
    src["dp"] = AxisType(Kind.R)
    assert t["tp"] == AxisType(Kind.P) and len(t) == 1
    with pytest.raises(TypeError):
        t["tp"] = AxisType(Kind.R)  # type: ignore[index]
    with pytest.raises(TypeError):
        del t["tp"]  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        t.extra = 1  # type: ignore[attr-defined]
    u = t.with_axis("tp", AxisType(Kind.R))
    assert t["tp"] == AxisType(Kind.P) and u["tp"] == AxisType(Kind.R)
    v = t.with_axis("dp", S(1))
    assert list(v) == ["dp", "tp"] and len(t) == 1
    assert hash(t) == h
    assert t.without_refinements() == t


# ---------------------------------------------------------------------------
# suggest_fixes (type_system.md 5.3, 5.4)
# ---------------------------------------------------------------------------

CAND = {(c.src, c.dst): c for c in FIX_CANDIDATES}


def test_fix_candidates_order_and_effects():
    """5.3 table: the fixed order and the stated fwd/bwd effects."""
    got = [(c.src, c.dst, c.api) for c in FIX_CANDIDATES]
    assert got == [
        (Kind.I, Kind.R, "convert"),
        (Kind.I, Kind.P, "convert"),
        (Kind.P, Kind.R, "all_reduce"),
        (Kind.P, Kind.I, "all_reduce"),
        (Kind.R, Kind.P, "convert"),
    ]
    assert (CAND[Kind.I, Kind.R].forward, CAND[Kind.I, Kind.R].backward) == ("no-op", "all-reduce")
    assert CAND[Kind.P, Kind.R].forward == CAND[Kind.P, Kind.R].backward == "all-reduce"
    assert (CAND[Kind.P, Kind.I].forward, CAND[Kind.P, Kind.I].backward) == ("all-reduce", "no-op")
    # deliberately never suggested: R -> I, P -> V, V -> P
    pairs = set(CAND)
    assert (Kind.R, Kind.I) not in pairs and (Kind.P, Kind.V) not in pairs and (Kind.V, Kind.P) not in pairs


def test_suggest_example_1_gelu_on_partial():
    ops = [Operand(Kind.P, GradState.YES)]
    assert isinstance(infer_axis(ops, Linearity.NONLINEAR), AxisError)
    assert suggest_fixes(ops, Linearity.NONLINEAR) == [
        Fix(0, CAND[Kind.P, Kind.R]),
        Fix(0, CAND[Kind.P, Kind.I]),
    ]


def test_suggest_example_2_residual_add_of_partial():
    ops = [Operand(Kind.R, GradState.YES), Operand(Kind.P, GradState.YES)]
    assert infer_axis(ops, Linearity.LINEAR).rule is Rule.PARTIAL_AFFINE
    # all-reduce the Partial operand to R, or convert R -> P on the Replicate operand
    assert suggest_fixes(ops, Linearity.LINEAR) == [
        Fix(1, CAND[Kind.P, Kind.R]),
        Fix(0, CAND[Kind.R, Kind.P]),
    ]


def test_suggest_example_3_invariant_weight_in_layer_norm():
    ops = [Operand(Kind.V, GradState.YES), Operand(Kind.I, GradState.YES)]
    assert infer_axis(ops, Linearity.NONLINEAR).rule is Rule.INVARIANT_MIX
    assert suggest_fixes(ops, Linearity.NONLINEAR) == [Fix(1, CAND[Kind.I, Kind.R])]


def test_suggest_first_operand_of_source_kind_and_filter():
    # P * P: all-reduce the first P factor (P -> I would be an I mix; R <- no R operand)
    ops = [Operand(Kind.P), Operand(Kind.P)]
    assert suggest_fixes(ops, Linearity.MULTILINEAR) == [Fix(0, CAND[Kind.P, Kind.R])]
    # I @ R (einsum row 14): only convert(x, I -> R); I -> P would change the natural R
    ops = [Operand(Kind.I), Operand(Kind.R)]
    assert suggest_fixes(ops, Linearity.MULTILINEAR) == [Fix(0, CAND[Kind.I, Kind.R])]
    # fixes are computed without the relaxation: an I(grad) + R(no grad) still gets the convert
    ops = [Operand(Kind.I, GradState.YES), Operand(Kind.R, GradState.NO), Operand(Kind.V)]
    assert Fix(0, CAND[Kind.I, Kind.R]) in suggest_fixes(ops, Linearity.NONLINEAR)


def oracle_suggest(kinds, lin):
    """5.3 from the prose, for scalar-free operand lists (strict R/I, first operand of the source kind)."""
    order = [("I", "R"), ("I", "P"), ("P", "R"), ("P", "I"), ("R", "P")]
    out = []
    for src, dst in order:
        if src not in kinds:
            continue
        idx = kinds.index(src)
        fixed = list(kinds)
        fixed[idx] = dst
        res = oracle([(k, "YES", False) for k in fixed], lin, relax=False)
        if isinstance(res, tuple):
            continue
        others = [k for i, k in enumerate(kinds) if i != idx]
        if others:
            nat = oracle([(k, "YES", False) for k in others], lin, relax=False)
            if not isinstance(nat, tuple) and nat != res:
                continue
        out.append((idx, src, dst))
    return out


@pytest.mark.parametrize("lin", LINS)
def test_suggest_fixes_matches_oracle_without_scalars(lin):
    mismatches = []
    for n in (1, 2, 3):
        for kinds in itertools.product("RIVP", repeat=n):
            ops = [Operand(K[k], GradState.YES) for k in kinds]
            if not isinstance(infer_axis(ops, L[lin], relax=False), AxisError):
                continue
            got = [(f.operand, f.candidate.src.value, f.candidate.dst.value) for f in suggest_fixes(ops, L[lin])]
            want = oracle_suggest(list(kinds), lin)
            if got != want:
                mismatches.append((kinds, got, want))
    assert mismatches == []


def _check_fix_property(ops, lin):
    fixes = suggest_fixes(ops, lin)
    cand_pos = [FIX_CANDIDATES.index(f.candidate) for f in fixes]
    assert cand_pos == sorted(set(cand_pos))  # fixed order, one operand per candidate
    for f in fixes:
        # applies to the first operand of the source kind
        assert f.operand == next(i for i, o in enumerate(ops) if o.kind is f.candidate.src)
        repaired = list(ops)
        repaired[f.operand] = dataclasses.replace(ops[f.operand], kind=f.candidate.dst)
        assert not isinstance(infer_axis(repaired, lin, relax=False), AxisError), (ops, f)


@pytest.mark.parametrize("lin", list(Linearity))
def test_every_kept_fix_repairs_exhaustive(lin):
    for n in (1, 2, 3):
        for kinds in itertools.product(KINDS, repeat=n):
            for flags in itertools.product((False, True), repeat=n):
                ops = [Operand(K[k], GradState.YES, f) for k, f in zip(kinds, flags)]
                if isinstance(infer_axis(ops, lin, relax=False), AxisError):
                    _check_fix_property(ops, lin)


operand_st = st.builds(
    Operand,
    st.sampled_from([Kind.R, Kind.I, Kind.V, Kind.P, SCALAR]),
    st.sampled_from(list(GradState)),
    st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(operand_st, min_size=1, max_size=6), st.sampled_from(list(Linearity)))
def test_every_kept_fix_repairs_property(ops, lin):
    if isinstance(infer_axis(ops, lin), AxisError):
        _check_fix_property(ops, lin)


# ---------------------------------------------------------------------------
# shadow_partial_check (einsum_rules.md 1.3 step 5, 1.6 W-PSUM, 4.1, 4.2)
# ---------------------------------------------------------------------------

VP = Operand(Kind.V)  # the pending operand's primary kind is V


@pytest.mark.parametrize(
    "ops,pending,lin,want",
    [
        # misuses: nonlinear op, + R bias/residual, + number, + V, x V, two factors, divisor
        ([VP], [True], Linearity.NONLINEAR, Rule.PARTIAL_NONLINEAR),
        ([VP, Operand(Kind.R)], [True, False], Linearity.LINEAR, Rule.PARTIAL_AFFINE),
        ([Operand(Kind.R), VP], [False, True], Linearity.LINEAR, Rule.PARTIAL_AFFINE),
        ([VP, Operand(SCALAR)], [True, False], Linearity.LINEAR, Rule.PARTIAL_AFFINE),
        ([VP, Operand(Kind.V)], [True, False], Linearity.LINEAR, Rule.PARTIAL_WITH_VARYING),
        ([VP, Operand(Kind.V)], [True, False], Linearity.MULTILINEAR, Rule.PARTIAL_WITH_VARYING),
        ([VP, Operand(Kind.V)], [True, False], Linearity.NONLINEAR, Rule.PARTIAL_WITH_VARYING),
        ([VP, VP], [True, True], Linearity.MULTILINEAR, Rule.PARTIAL_SEVERAL_FACTORS),
        ([VP, VP], [True, True], Linearity.NONLINEAR, Rule.PARTIAL_NONLINEAR),
        ([Operand(Kind.R), Operand(Kind.V, divisor=True)], [False, True], Linearity.MULTILINEAR, Rule.PARTIAL_DIVISOR),
        ([VP, Operand(Kind.I, GradState.YES)], [True, False], Linearity.MULTILINEAR, Rule.INVARIANT_MIX),
        # survivals: Vp + Vp, neg/sum/view, scale by R or a number, einsum with R operands
        ([VP, VP], [True, True], Linearity.LINEAR, Kind.P),
        ([VP], [True], Linearity.LINEAR, Kind.P),
        ([VP], [True], Linearity.MULTILINEAR, Kind.P),
        ([VP, Operand(Kind.R)], [True, False], Linearity.MULTILINEAR, Kind.P),
        ([Operand(Kind.R), VP, Operand(Kind.R)], [False, True, False], Linearity.MULTILINEAR, Kind.P),
        ([VP, Operand(SCALAR)], [True, False], Linearity.MULTILINEAR, Kind.P),
        ([VP, Operand(Kind.R, divisor=True)], [True, False], Linearity.MULTILINEAR, Kind.P),
        # P * I(no grad): the relaxation applies to the shadow pass too
        ([VP, Operand(Kind.I, GradState.NO)], [True, False], Linearity.MULTILINEAR, Kind.P),
        # nothing pending: plain V
        ([Operand(Kind.V), Operand(Kind.R)], [False, False], Linearity.NONLINEAR, Kind.V),
        ([Operand(Kind.V)], [False], Linearity.LINEAR, Kind.V),
    ],
)
def test_shadow_partial_check(ops, pending, lin, want):
    got = shadow_partial_check(ops, pending, lin)
    if isinstance(want, Rule):
        assert isinstance(got, AxisError) and got.rule is want, got
    else:
        assert got is want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(operand_st, st.booleans()), min_size=1, max_size=5), st.sampled_from(list(Linearity)))
def test_shadow_equals_infer_on_p_substitution(pairs, lin):
    """The shadow reads every pending operand as P and otherwise follows 2.1 exactly."""
    pairs = [(dataclasses.replace(o, kind=Kind.V) if p else o, p) for o, p in pairs]
    ops = [o for o, _ in pairs]
    pending = [p for _, p in pairs]
    got = shadow_partial_check(ops, pending, lin)
    if not any(pending):
        assert got is Kind.V
        return
    spec = [
        (
            "P" if p else {Kind.R: "R", Kind.I: "I", Kind.V: "V", Kind.P: "P", SCALAR: "s"}[o.kind],
            o.grad.name,
            o.divisor,
        )
        for o, p in pairs
    ]
    assert normalize(got) == oracle(spec, lin.value)

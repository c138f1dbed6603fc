"""Unit tests for spmdcheck.einsum (pure module).

Reference: shared/reference/einsum_rules.md section 1 (decision procedure),
section 2 (matmul family -> equations) and section 4 (numbered test vectors,
the "spmdcheck (local)" column).
"""

from __future__ import annotations

import pytest

from spmdcheck.einsum import (
    ELLIPSIS,
    EinsumError,
    Equation,
    LayoutIssue,
    Outcome,
    Spec,
    equation_for,
    expand,
    judge_axis,
    parse_equation,
)
from spmdcheck.lattice import (
    FIX_CANDIDATES,
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
    shadow_partial_check,
    suggest_fixes,
)

SITE = Site(0, "c")
R, I, V, P = AxisType(Kind.R), AxisType(Kind.I), AxisType(Kind.V), AxisType(Kind.P)
E = ELLIPSIS

# ---------------------------------------------------------------------------
# parse_equation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "eq,n,inputs,output",
    [
        ("mk,kn->mn", 2, (("m", "k"), ("k", "n")), ("m", "n")),
        ("k,k->", 2, (("k",), ("k",)), ()),
        ("ij->ji", 1, (("i", "j"),), ("j", "i")),
        ("ii", 1, (("i", "i"),), None),
        ("ij,jk", 2, (("i", "j"), ("j", "k")), None),
        (" b n , a n m , b m -> b a ", 3, (("b", "n"), ("a", "n", "m"), ("b", "m")), ("b", "a")),
        ("...i,oi->...o", 2, ((E, "i"), ("o", "i")), (E, "o")),
        ("...ij->ij", 1, ((E, "i", "j"),), ("i", "j")),
        ("i...j,j...->...", 2, (("i", E, "j"), ("j", E)), (E,)),
        ("...,...->...", 2, ((E,), (E,)), (E,)),
        ("AbZ,bz->AZz", 2, (("A", "b", "Z"), ("b", "z")), ("A", "Z", "z")),
        ("ij", None, (("i", "j"),), None),
    ],
)
def test_parse_valid(eq, n, inputs, output):
    parsed = parse_equation(eq, n)
    assert parsed == Equation(inputs, output)


def test_equation_str_round_trip():
    assert str(parse_equation("mk,kn->mn")) == "mk,kn->mn"
    assert str(parse_equation("ij,jk")) == "ij,jk"
    assert str(parse_equation("k,k->")) == "k,k->"
    assert str(parse_equation("...i,oi->...o")) == "...i,oi->...o"


@pytest.mark.parametrize(
    "eq,n",
    [
        ("ij->j->i", 1),  # two arrows
        ("ij,jk->ik->ki", 2),
        ("i1,1k->ik", 2),  # bad label
        ("i_,jk", 2),
        ("ié->i", 1),  # non-ASCII letter
        ("i.j->i", 1),  # a lone dot
        ("..ij->ij", 1),
        ("ij,jk->ik", 1),  # wrong operand count
        ("ij,jk->ik", 3),
        ("ij", 2),
        ("ij,jk->iz", 2),  # output label in no operand
        ("ij->k", 1),
        ("->i", 1),
        ("ij->...ij", 1),  # '...' only in the output
        ("ij,jk->...", 2),
        ("......ij->ij", 1),  # two ellipses in one term
        ("...ij->......", 1),
        ("ij->ii", 1),  # output repeats a label
    ],
)
def test_parse_errors(eq, n):
    with pytest.raises(EinsumError):
        parse_equation(eq, n)


def test_einsum_error_is_value_error():
    assert issubclass(EinsumError, ValueError)


# ---------------------------------------------------------------------------
# Implicit output and expand
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "eq,ranks,out",
    [
        ("ji", [2], ("i", "j")),  # transpose
        ("kj,ji", [2, 2], ("i", "k")),  # ik, not ki
        ("ii", [2], ()),  # trace
        ("ij,jk", [2, 2], ("i", "k")),
        ("aB", [2], ("B", "a")),  # uppercase before lowercase
        ("zA,AB,Bc", [2, 2, 2], ("c", "z")),
        ("zA,Ab,Bc", [2, 2, 2], ("B", "b", "c", "z")),
        ("ba,Zy", [2, 2], ("Z", "a", "b", "y")),
        ("iij", [3], ("j",)),
        ("...ij,jk", [3, 2], ("E1", "i", "k")),  # ellipsis first
        ("j...,ji", [3, 2], ("E2", "E1", "i")),
    ],
)
def test_implicit_output_order(eq, ranks, out):
    spec = expand(parse_equation(eq, len(ranks)), ranks)
    assert spec is not None and spec.output == out


@pytest.mark.parametrize(
    "eq,ranks,inputs,output",
    [
        # no ellipsis: unchanged
        ("mk,kn->mn", [2, 2], (("m", "k"), ("k", "n")), ("m", "n")),
        # right-aligned fresh labels E_w ... E_1
        ("...i,oi->...o", [4, 2], (("E3", "E2", "E1", "i"), ("o", "i")), ("E3", "E2", "E1", "o")),
        ("...i,oi->...o", [1, 2], (("i",), ("o", "i")), ("o",)),  # zero-width ellipsis
        # broadcasting widths: the shorter ellipsis lacks the high-numbered labels
        ("...mk,...kn->...mn", [4, 3], (("E2", "E1", "m", "k"), ("E1", "k", "n")), ("E2", "E1", "m", "n")),
        ("...mk,...kn->...mn", [2, 5], (("m", "k"), ("E3", "E2", "E1", "k", "n")), ("E3", "E2", "E1", "m", "n")),
        # ellipsis in the middle
        ("i...j->j...i", [4], (("i", "E2", "E1", "j"),), ("j", "E2", "E1", "i")),
        # explicit output without '...': ellipsis dims are contracted
        ("...ij->ij", [3], (("E1", "i", "j"),), ("i", "j")),
        ("...,...->", [2, 1], (("E2", "E1"), ("E1",)), ()),
    ],
)
def test_expand_known_ranks(eq, ranks, inputs, output):
    spec = expand(parse_equation(eq, len(ranks)), ranks)
    assert spec == Spec(inputs, output)


def test_expand_unknown_rank_returns_none_only_when_needed():
    eq = parse_equation("...i,oi->...o", 2)
    assert expand(eq, [None, 2]) is None
    # unknown rank of a term without an ellipsis is not needed
    spec = expand(eq, [3, None])
    assert spec == Spec((("E2", "E1", "i"), ("o", "i")), ("E2", "E1", "o"))
    assert expand(parse_equation("mk,kn->mn"), [None, None]) == Spec((("m", "k"), ("k", "n")), ("m", "n"))


@pytest.mark.parametrize(
    "eq,ranks",
    [
        ("mk,kn->mn", [3, 2]),  # a term without ellipsis must match its rank
        ("mk,kn->mn", [2, 1]),
        ("...ij->ij", [1]),  # ellipsis term needs more dims than the operand has
        ("i...jk", [2]),
    ],
)
def test_expand_rank_errors(eq, ranks):
    with pytest.raises(EinsumError):
        expand(parse_equation(eq, len(ranks)), ranks)


def test_spec_contains():
    spec = expand(parse_equation("bn,anm,bm->ba"), [2, 3, 2])
    assert spec.contains(0, "n") and spec.contains(1, "n") and not spec.contains(2, "n")


# ---------------------------------------------------------------------------
# equation_for (section 2)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ranks,eq",
    [
        ((1, 1), "k,k->"),
        ((2, 1), "mk,k->m"),
        ((1, 2), "k,kn->n"),
        ((2, 2), "...mk,kn->...mn"),  # equivalent to mk,kn->mn once expanded
        ((3, 2), "...mk,kn->...mn"),
        ((3, 1), "...mk,k->...m"),
        ((1, 3), "k,...kn->...n"),
        ((3, 3), "...mk,...kn->...mn"),
        ((4, 3), "...mk,...kn->...mn"),
        ((None, 1), "...mk,k->...m"),
        ((1, None), "k,...kn->...n"),
        # an unknown rank is taken to be >= 2 (matrices or batches of them); judge_axis then tries widths
        ((None, None), "...mk,...kn->...mn"),
        ((None, 2), "...mk,kn->...mn"),
        ((2, None), "...mk,...kn->...mn"),
        ((None, 3), "...mk,...kn->...mn"),
    ],
)
def test_equation_for_matmul(ranks, eq):
    assert equation_for("matmul", list(ranks)) == eq


def test_equation_for_matmul_2x2_expands_to_mm():
    spec = expand(parse_equation(equation_for("matmul", [2, 2]), 2), [2, 2])
    assert spec == Spec((("m", "k"), ("k", "n")), ("m", "n"))


def test_equation_for_other_kinds():
    assert equation_for("linear", [3, 2]) == "...i,oi->...o"
    assert equation_for("linear", [None, None]) == "...i,oi->...o"
    assert equation_for("matmul", [2]) is None
    assert equation_for("bmk,bkn->bmn", [3, 3]) == "bmk,bkn->bmn"  # a fixed equation passes through


# ---------------------------------------------------------------------------
# Section 4 test vectors
# ---------------------------------------------------------------------------

VP = "Vp"


def ERR(rule):
    return ("err", rule)


def SPLIT(label, operand):
    return ("split", label, operand)


MIXED = ("mixed",)


def DIAG(label):
    return ("diag", label)


IMIX, PMIX, PP = Rule.INVARIANT_MIX, Rule.PARTIAL_WITH_VARYING, Rule.PARTIAL_SEVERAL_FACTORS

MM = "mk,kn->mn"
BMM = "bmk,bkn->bmn"
LIN = "...i,oi->...o"
BIL = "bn,anm,bm->ba"

# (id, equation, ranks, types, expected)
VECTORS = [
    ("1", MM, [2, 2], [R, R], R),
    ("2", MM, [2, 2], [S(0), R], S(0)),
    ("3", MM, [2, 2], [R, S(1)], S(1)),
    ("4", MM, [2, 2], [S(1), S(0)], VP),
    ("5", MM, [2, 2], [R, S(0)], SPLIT("k", 0)),
    pytest.param("6", MM, [2, 2], [S(0), S(0)], SPLIT("k", 0), id="6"),
    ("7", MM, [2, 2], [S(0), S(1)], MIXED),
    ("8", MM, [2, 2], [P, R], P),
    ("9", MM, [2, 2], [R, P], P),
    ("10", MM, [2, 2], [P, P], ERR(PP)),
    ("11", MM, [2, 2], [P, S(1)], ERR(PMIX)),
    ("12", MM, [2, 2], [P, V], ERR(PMIX)),
    ("13", MM, [2, 2], [I, I], I),
    ("14", MM, [2, 2], [I, R], ERR(IMIX)),
    ("15", MM, [2, 2], [I, S(1)], ERR(IMIX)),
    ("16", MM, [2, 2], [V, R], V),
    ("17", MM, [2, 2], [V, S(1)], V),
    ("18", "k,k->", [1, 1], [S(0), S(0)], VP),
    ("19", "i,j->ij", [1, 1], [S(0), R], S(0)),
    ("20", "i,j->ij", [1, 1], [S(0), S(0)], MIXED),
    ("21", "mk,k->m", [2, 1], [S(1), S(0)], VP),
    ("22", BMM, [3, 3], [S(0), S(0)], S(0)),
    ("23", BMM, [3, 3], [S(0), R], SPLIT("b", 1)),
    ("24", BMM, [3, 3], [S(1), R], S(1)),
    ("25", BMM, [3, 3], [R, S(2)], S(2)),
    ("26", BMM, [3, 3], [S(2), S(1)], VP),
    ("27", "bsh,ho->bso", [3, 2], [S(1), R], S(1)),
    ("27-matmul", equation_for("matmul", [3, 2]), [3, 2], [S(1), R], S(1)),
    ("28", equation_for("matmul", [3, 3]), [3, 3], [S(0), S(0)], S(0)),
    ("29", equation_for("matmul", [3, 1]), [3, 1], [S(0), R], S(0)),
    ("29-eq", "bmk,k->bm", [3, 1], [S(0), R], S(0)),
    ("30", equation_for("matmul", [1, 3]), [1, 3], [S(0), S(1)], VP),
    ("30-eq", "k,bkn->bn", [1, 3], [S(0), S(1)], VP),
    # row 31: w [1,K,N]; by 1.1.5 the size-1 batch dim counts as absent, i.e. w enters with rank 2
    ("31", equation_for("matmul", [3, 3]), [3, 2], [S(0), R], S(0)),
    ("31-contrast", equation_for("matmul", [3, 3]), [3, 3], [S(0), R], SPLIT("E1", 1)),
    ("32", LIN, [3, 2], [R, S(0)], S(2)),
    ("32-eq", "sbi,oi->sbo", [3, 2], [R, S(0)], S(2)),
    ("33", LIN, [3, 2], [S(2), S(1)], VP),
    ("35-einsum-part", LIN, [3, 2], [R, S(0)], S(2)),
    ("36", LIN, [3, 2], [S(0), S(0)], MIXED),
    ("37", LIN, [3, 2], [S(0), R], S(0)),
    ("38", "sbh,h->sbh", [3, 1], [S(0), R], S(0)),
    ("39", "sbh,h->sbh", [3, 1], [S(0), I], ERR(IMIX)),
    ("40", "sbo,oi->sbi", [3, 2], [S(2), S(0)], VP),
    ("41", "sbi,sbo->oi", [3, 3], [R, S(2)], S(0)),
    ("42", "sbh,sbh->h", [3, 3], [S(0), S(0)], VP),
    ("43", "sbo,oi->sbi", [3, 2], [R, S(1)], S(2)),
    ("44", "ij,jk", [2, 2], [S(1), S(0)], VP),
    ("45", "kj,ji", [2, 2], [S(0), R], S(1)),
    ("46", "ji", [2], [S(0)], S(1)),
    ("47", "ii", [2], [S(0)], DIAG("i")),
    ("48-ii->i-P", "ii->i", [2], [P], P),
    ("48-ii-P", "ii", [2], [P], P),
    ("48-ii->i-R", "ii->i", [2], [R], R),
    ("48-ii-R", "ii", [2], [R], R),
    ("49", "ij->i", [2], [S(1)], VP),
    ("50", "...ij,jk->...ik", [4, 2], [S(1), R], S(1)),
    ("51", "...ij->ij", [3], [S(0)], VP),
    ("52", BIL, [2, 3, 2], [S(1), S(1), R], VP),
    ("53", BIL, [2, 3, 2], [R, S(1), R], SPLIT("n", 0)),
    ("54", "ij,ij->ij", [2, 2], [P, P], ERR(PP)),
    ("55", "ij,ij->ij", [2, 2], [P, R], P),
    ("56", "ij->ji", [2], [P], P),
    ("57", BIL, [2, 3, 2], [P, R, R], P),
    # multi-axis rows, one judge_axis call per axis
    ("58-dp", LIN, [2, 2], [S(0), R], S(0)),
    ("58-tp", LIN, [2, 2], [R, S(0)], S(1)),
    ("59-dp", LIN, [2, 2], [S(0), R], S(0)),
    ("59-tp", LIN, [2, 2], [S(1), S(1)], VP),
    ("60-dp", "bi,bo->oi", [2, 2], [S(0), S(0)], VP),
    ("60-tp", "bi,bo->oi", [2, 2], [R, S(1)], S(0)),
    ("61-dp", LIN, [2, 2], [S(0), I], ERR(IMIX)),
    ("61-tp", LIN, [2, 2], [R, S(0)], S(1)),
    ("65-dp", MM, [2, 2], [S(0), R], S(0)),
    ("65-tp", MM, [2, 2], [I, I], I),
    ("66", LIN, [2, 2], [P, R], P),
]


def _ops(types):
    return [Operand(t.kind, GradState.UNKNOWN) for t in types]


def judge(eq, ranks, types):
    return judge_axis(parse_equation(eq, len(types)), ranks, types, _ops(types), SITE)


def check(out: Outcome, want):
    assert isinstance(out, Outcome)
    if want == VP:
        assert out.issue is None
        assert out.result == AxisType(Kind.V, pending=SITE)
        assert out.result.kind is Kind.V and out.result.shard is None and out.result.is_pending
    elif isinstance(want, AxisType):
        assert out.issue is None
        assert out.result == want
    elif want[0] == "err":
        assert out.issue is None
        assert isinstance(out.result, AxisError) and out.result.rule is want[1], out
    elif want[0] == "split":
        assert out.issue is not None, out
        assert (out.issue.kind, out.issue.label, out.issue.operand) == ("split", want[1], want[2]), out
    elif want[0] == "mixed":
        assert out.issue is not None and out.issue.kind == "mixed", out
        assert out.result == AxisType(Kind.V)
    elif want[0] == "diag":
        assert out.issue is not None and (out.issue.kind, out.issue.label) == ("diag", want[1]), out
        assert out.result == AxisType(Kind.V)
    else:  # pragma: no cover
        raise AssertionError(want)


def _param(v):
    return v if hasattr(v, "marks") else pytest.param(*v, id=v[0])


@pytest.mark.parametrize("row,eq,ranks,types,want", [_param(v) for v in VECTORS])
def test_vectors(row, eq, ranks, types, want):
    check(judge(eq, ranks, types), want)


def test_vector_row_14_fix_is_convert_i_to_r():
    """E-IMIX -> convert(x, I -> R) on the I operand (row 14, section 1.6)."""
    ops = _ops([I, R])
    fixes = suggest_fixes(ops, Linearity.MULTILINEAR)
    assert fixes == [Fix(0, FIX_CANDIDATES[0])]
    assert (FIX_CANDIDATES[0].src, FIX_CANDIDATES[0].dst) == (Kind.I, Kind.R)


def test_vector_row_34_row_parallel_bias_is_w_psum():
    """Row 34: the row-parallel linear gives Vp; adding an R bias (LINEAR) is a shadow affine error."""
    out = judge(LIN, [3, 2], [S(2), S(1)])
    check(out, VP)
    shadow = shadow_partial_check([Operand(Kind.V), Operand(Kind.R)], [True, False], Linearity.LINEAR)
    assert isinstance(shadow, AxisError) and shadow.rule is Rule.PARTIAL_AFFINE
    # Row 33 then all-reduced (or two pending sums added) survives
    assert shadow_partial_check([Operand(Kind.V), Operand(Kind.V)], [True, True], Linearity.LINEAR) is Kind.P


def test_split_wins_over_mixed_when_a_sharded_operand_holds_the_label_whole():
    out = judge(BIL, [2, 3, 2], [S(1), S(1), S(1)])  # l: n, A: n, r: m
    check(out, SPLIT("m", 1))


def test_plain_v_operand_disables_refinement():
    # 1.3: if any V operand is plain V the answer is plain V ...
    check(judge(MM, [2, 2], [S(0), V]), V)
    check(judge(BIL, [2, 3, 2], [S(0), V, R]), V)


def test_plain_v_operand_with_a_sharded_contracted_label_is_a_pending_sum():
    # ... except (spmdcheck's soundness addition, found by differential fuzzing) when another operand is
    # sharded on a contracted label: the local shapes only match if the plain-V operand is split there too.
    check(judge(MM, [2, 2], [S(1), V]), VP)
    check(judge(BIL, [2, 3, 2], [S(1), V, R]), VP)


def test_negative_shard_dims_with_known_ranks():
    check(judge(MM, [2, 2], [S(-1), S(-2)]), VP)
    check(judge(LIN, [3, 2], [S(-1), S(-1)]), VP)
    check(judge(LIN, [3, 2], [S(-3), R]), S(0))
    check(judge(LIN, [3, 2], [R, S(-2)]), S(2))


def test_out_of_range_shard_gives_plain_v():
    check(judge(MM, [2, 2], [S(5), R]), V)


def test_vp_carries_the_given_site():
    site = Site(42, "mm")
    types = [S(1), S(0)]
    out = judge_axis(parse_equation(MM), [2, 2], types, _ops(types), site)
    assert out.result == AxisType(Kind.V, pending=site)


# ---------------------------------------------------------------------------
# Unknown ranks
# ---------------------------------------------------------------------------


def test_unknown_rank_linear_row_parallel_is_vp():
    check(judge(LIN, [None, 2], [S(-1), S(1)]), VP)


def test_unknown_rank_linear_negative_contraction_split():
    check(judge(LIN, [None, 2], [S(-1), R]), SPLIT("i", 1))


def test_unknown_rank_base_types_do_not_need_ranks():
    check(judge(LIN, [None, 2], [P, R]), P)
    check(judge(LIN, [None, 2], [R, R]), R)
    check(judge(LIN, [None, 2], [I, I]), I)
    check(judge(LIN, [None, 2], [I, S(0)]), ERR(IMIX))
    check(judge(LIN, [None, 2], [P, S(0)]), ERR(PMIX))
    check(judge(LIN, [None, None], [V, S(0)]), V)


def test_unknown_rank_without_ellipsis_is_fine():
    check(judge(MM, [None, None], [S(1), S(0)]), VP)
    check(judge(MM, [None, 2], [S(0), R]), S(0))


def test_unknown_rank_output_position_counts_from_the_right():
    # section 2 shortcuts: F.linear W S(0) -> output S(-1); x S(d) (not the contraction) -> output S(d)
    check(judge(LIN, [None, 2], [R, S(0)]), S(-1))
    # matmul N-D x N-D: x S(-2) -> output S(-2), w S(-1) -> output S(-1), x S(-1)/w S(-2) -> contraction
    mm_nd = "...mk,...kn->...mn"
    check(judge(mm_nd, [None, None], [S(-2), R]), S(-2))
    check(judge(mm_nd, [None, None], [R, S(-1)]), S(-1))
    check(judge(mm_nd, [None, None], [S(-1), S(-2)]), VP)
    check(judge(mm_nd, [None, None], [S(-1), R]), SPLIT("k", 1))


def test_unknown_rank_linear_batch_shard_from_the_right():
    # F.linear x S(-2) of unknown rank: the last ellipsis dim E1 -> output S(-2) (x's rank is >= 2)
    check(judge(LIN, [None, 2], [S(-2), R]), S(-2))


def test_unknown_rank_matmul_batch_shard_from_the_right():
    # matmul N-D x N-D: a batch dim S(d), d <= -3, sharded in both -> output S(d)
    check(judge("...mk,...kn->...mn", [None, None], [S(-3), S(-3)]), S(-3))


def test_known_rank_batch_shard_counterparts():
    check(judge(LIN, [3, 2], [S(-2), R]), S(1))
    check(judge("...mk,...kn->...mn", [3, 3], [S(-3), S(-3)]), S(0))


def test_unknown_rank_linear_x_s0_w_s0_is_mixed():
    out = judge(LIN, [None, 2], [S(0), S(0)])
    assert out.issue is not None and out.issue.kind == "mixed"
    assert out.result == AxisType(Kind.V)


def test_layout_issue_fields():
    issue = LayoutIssue("split", "k", 0)
    assert (issue.kind, issue.label, issue.operand) == ("split", "k", 0)
    assert Outcome(R) == Outcome(R, None)

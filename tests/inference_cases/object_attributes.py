# spmdcheck: mesh = ["tp"]
"""Attributes of objects are joined over if arms and loop passes like variables."""
import torch.nn.functional as F
import spmd_types as spmd
from spmd_types import P, R
from spmdcheck.annotations import Local


class Holder:
    pass


def written_in_the_if_arm_only_is_unknown_after(p: Local["tp: P"], flag: bool):
    h = Holder()
    if flag:
        h.out = p
    return F.gelu(h.out)


def written_in_both_arms_is_their_join(p: Local["tp: P"], r: Local["tp: R"], flag: bool):
    h = Holder()
    h.out = r
    if flag:
        h.out = p
    else:
        h.out = r
    return F.gelu(h.out)  # error: SPMD101 col 12


def the_else_arm_starts_from_the_value_before_the_if(p: Local["tp: P"], flag: bool):
    h = Holder()
    h.out = p
    if flag:
        h.out = spmd.all_reduce(h.out, "tp", src=P, dst=R)
    else:
        h.out = spmd.all_reduce(h.out, "tp", src=P, dst=R)
    return F.gelu(h.out)


def a_loop_may_run_zero_times(p: Local["tp: P"], n: int):
    h = Holder()
    h.out = p
    for _ in range(n):
        h.out = spmd.all_reduce(p, "tp", src=P, dst=R)
    return F.gelu(h.out)  # error: SPMD101 col 12


def a_loop_reaches_the_attribute_fixed_point(p: Local["tp: P"], n: int):
    h = Holder()
    h.out = p
    for _ in range(n):
        h.out = spmd.all_reduce(h.out, "tp", src=P, dst=R)  # error: SPMD302 col 17
    return h.out


def a_handler_may_start_before_the_body_changed_anything(p: Local["tp: P"]):
    try:
        out = spmd.all_reduce(p, "tp", src=P, dst=R)
    except RuntimeError:
        out = p
    return F.gelu(out)  # error: SPMD101 col 12


def a_handler_that_reraises_does_not_reach_the_code_after(p: Local["tp: P"]):
    try:
        out = spmd.all_reduce(p, "tp", src=P, dst=R)
    except RuntimeError:
        out = p
        raise
    return F.gelu(out)


def a_value_the_body_made_is_unknown_in_the_handler(p: Local["tp: P"]):
    out = p
    try:
        out = spmd.all_reduce(p, "tp", src=P, dst=R)
    except RuntimeError:
        F.gelu(out)
    return out

# [expected messages] line:column CODE: message
# 27:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `h.out`: P) (when the `if` at line 23 takes the if branch)
# 45:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `h.out`: P) (before the loop at line 43 runs)
# 52:17 SPMD302: `all_reduce` expects a Partial on axis 'tp' but `h.out` is R: it is already reduced (by the reduction at line 52), and reducing again multiplies it by the axis size (after an iteration of the loop at line 51)
# 61:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `out`: P) (when the `try` at line 57 handles an exception)

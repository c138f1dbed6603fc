# spmdcheck: mesh = ["tp"]
"""Values kept in containers and registries type as their direct form (analysis/containers.py, registries.py):
a known key picks its entry, an unknown key checks every entry, lists keep their items."""
import torch
import torch.nn.functional as F
import spmd_types as spmd
from spmd_types import P, R
from spmdcheck.annotations import Local


def nonlinear(x):
    return F.gelu(x)  # error: SPMD101 col 12


def reduced(x):
    return spmd.all_reduce(x, "tp", src=P, dst=R)


def doubled(x):
    return x * 2


ACTIVATIONS = {"gelu": nonlinear, "reduce": reduced}
SCALES = {"double": doubled, "reduce": reduced}
REGISTRY = {}


def register(name):
    def deco(fn):
        REGISTRY[name] = fn
        return fn

    return deco


@register("shifted")
def shifted(x):
    return x + 1  # error: SPMD104 col 12


def a_known_key_picks_its_entry(p: Local["tp: P"]):
    return F.gelu(SCALES["reduce"](p))


def a_known_key_picks_the_wrong_entry(p: Local["tp: P"]):
    return F.gelu(SCALES["double"](p))  # error: SPMD101 col 12


def an_unknown_key_checks_every_entry(p: Local["tp: P"], name: str):
    return ACTIVATIONS[name](p)


def get_with_an_unknown_key_too(p: Local["tp: P"], name: str):
    return F.gelu(SCALES.get(name)(p))  # error: SPMD101 col 12


def a_registered_entry(p: Local["tp: P"], name: str):
    return REGISTRY[name](p)


def per_key_values(p: Local["tp: P"]):
    parts = {"partial": p, "reduced": spmd.all_reduce(p, "tp", src=P, dst=R)}
    F.gelu(parts["reduced"])
    return F.gelu(parts["partial"])  # error: SPMD101 col 12


def written_entries(p: Local["tp: P"]):
    parts = {}
    parts["reduced"] = spmd.all_reduce(p, "tp", src=P, dst=R)
    parts["partial"] = p
    F.gelu(parts.get("reduced"))
    return F.gelu(parts.get("partial"))  # error: SPMD101 col 12


def dict_comprehension_over_known_keys(p: Local["tp: P"]):
    parts = {name: fn(p) for name, fn in (("partial", doubled), ("reduced", reduced))}
    F.gelu(parts["reduced"])
    return F.gelu(parts["partial"])  # error: SPMD101 col 12


def values_and_items(p: Local["tp: P"], r: Local["tp: R"]):
    parts = {"a": r, "b": p}
    for value in parts.values():
        F.gelu(value)  # error: SPMD101 col 9
    for key, value in parts.items():
        value + 1  # error: SPMD104 col 9


def an_unknown_index_checks_every_item(p: Local["tp: P"], r: Local["tp: R"], i: int):
    pair = [r, p]
    return F.gelu(pair[i])  # error: SPMD101 col 12


def appended_in_a_loop(p: Local["tp: P"], n: int):
    outs = []
    for _ in range(n):
        outs.append(p * 2)
    for out in outs:
        F.gelu(out)  # error: SPMD101 col 9
    return F.gelu(torch.stack(outs))  # error: SPMD101 col 12


def sum_of_partial_losses_stays_partial(p: Local["tp: P"]):
    losses = [p.sum(), (p * 2).sum()]
    return F.gelu(sum(losses))  # error: SPMD101 col 12


def sum_of_reduced_losses(p: Local["tp: P"]):
    losses = [spmd.all_reduce(x.sum(), "tp", src=P, dst=R) for x in (p, p * 2)]
    return F.gelu(sum(losses))


def cat_of_a_comprehension(p: Local["tp: P"]):
    return F.gelu(torch.cat([x * 2 for x in (p, p + p)]))  # error: SPMD101 col 12


def layers_applied_in_order(x: Local["tp: P"]):
    h = x
    for fn in (reduced, nonlinear):
        h = fn(h)
    return h


class Block:
    REDUCED = ("out", "proj")

    def reduce_if_listed(self, name: str, p):
        if name in self.REDUCED:
            p = spmd.all_reduce(p, "tp", src=P, dst=R)
        return F.gelu(p)  # error: SPMD101 col 16

    def listed(self, p: Local["tp: P"]):
        return self.reduce_if_listed("out", p)

    def not_listed(self, p: Local["tp: P"]):
        return self.reduce_if_listed("norm", p)

# [expected messages] line:column CODE: message
# 12:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `x`: P) (when the lookup at line 50 gives its entry 'gelu')
# 38:12 SPMD104: `Tensor.__add__` adds a Replicate or scalar term to a Partial on axis 'tp': it is counted once per rank (operands: `x`: P, `1`: Scalar)
# 46:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `SCALES["double"](p)`: P)
# 54:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `SCALES.get(name)(p)`: P) (when the lookup at line 54 gives its entry 'double')
# 64:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `parts["partial"]`: P)
# 72:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `parts.get("partial")`: P)
# 78:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `parts["partial"]`: P)
# 84:9 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `value`: P)
# 86:9 SPMD104: `Tensor.__add__` adds a Replicate or scalar term to a Partial on axis 'tp': it is counted once per rank (operands: `value`: P, `1`: Scalar)
# 91:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `pair[i]`: P) (when the lookup at line 91 gives its item 1)
# 99:9 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `out`: P)
# 100:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `torch.stack(outs)`: P)
# 105:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `sum(losses)`: P)
# 114:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `torch.cat([x * 2 for x in (p, p + p)])`: P)
# 130:16 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `p`: P)

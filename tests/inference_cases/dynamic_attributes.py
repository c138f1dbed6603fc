# spmdcheck: mesh = ["dp", "tp"]
"""Layers reached by name or through nn.Module's views of its children type as the direct form does: each
model below reduces its input over `tp`, then over `dp`, so the result is R on both axes, which the
`assert_type` of each function (declaring the unreduced P) shows, as it does for the direct form."""
import torch.nn.functional as F
from torch import nn

import spmd_types as spmd
from spmd_types import P, R
from spmdcheck.annotations import Local


class Reduce(nn.Module):
    def __init__(self, axis):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        return spmd.all_reduce(x, self.axis, src=P, dst=R)


class ReduceDp(nn.Module):
    def forward(self, x):
        return spmd.all_reduce(x, "dp", src=P, dst=R)


class Direct(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer_0 = Reduce("tp")
        self.layer_1 = Reduce("dp")

    def forward(self, x):
        return self.layer_1(self.layer_0(x))


class ByName(nn.Module):
    """`setattr`/`getattr` over `range(n)` with `n` known: each layer by its own name."""

    def __init__(self, axes, n):
        super().__init__()
        self.n = n
        for i in range(n):
            setattr(self, f"layer_{i}", Reduce(axes[i]))

    def forward(self, x):
        for i in range(self.n):
            x = getattr(self, f"layer_{i}")(x)
        return x


class AddModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module("first", Reduce("tp"))
        self.add_module("second", Reduce("dp"))

    def forward(self, x):
        return self.second(self.first(x))


class ByModules(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Reduce("tp")
        self.second = Reduce("dp")

    def forward(self, x):
        return self._modules["second"](self._modules["first"](x))


class Children(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Reduce("tp")
        self.second = ReduceDp()

    def forward(self, x):
        for child in self.children():
            x = child(x)
        return x


class NamedChildren(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Reduce("tp")
        self.second = Reduce("dp")

    def forward(self, x):
        for _, child in self.named_children():
            x = child(x)
        return x


class Zipped(nn.Module):
    def __init__(self):
        super().__init__()
        self.norms = nn.ModuleList([Reduce("tp")])
        self.mlps = nn.ModuleList([Reduce("dp")])

    def forward(self, x):
        for norm, mlp in zip(self.norms, self.mlps):
            x = mlp(norm(x))
        return x


class Enumerated(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Reduce("tp"), Reduce("dp")])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
        return x


class Submodule(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Direct()

    def forward(self, x):
        return self.get_submodule("inner.layer_1")(self.get_submodule("inner").layer_0(x))



class Params(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.weights = nn.ParameterDict({"up": nn.Parameter(w)})

    def forward(self, x):
        return F.linear(x, self.weights["up"])


class GradientSync(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.weight = nn.Parameter(w)

    def sync(self):
        for name, p in self.named_parameters():
            spmd.all_reduce(p, "dp", src=P, dst=R)  # error: SPMD302 col 13


UNREDUCED = {"tp": P, "dp": P}


def the_direct_form(x: Local["tp: P, dp: P"]):
    return spmd.assert_type(Direct()(x), UNREDUCED)  # error: SPMD401 col 12


def by_name(x: Local["tp: P, dp: P"]):
    return spmd.assert_type(ByName(("tp", "dp"), 2)(x), UNREDUCED)  # error: SPMD401 col 12


def add_module_then_attribute(x: Local["tp: P, dp: P"]):
    return spmd.assert_type(AddModule()(x), UNREDUCED)  # error: SPMD401 col 12


def the_modules_dict(x: Local["tp: P, dp: P"]):
    return spmd.assert_type(ByModules()(x), UNREDUCED)  # error: SPMD401 col 12


def children_in_order(x: Local["tp: P, dp: P"]):
    return spmd.assert_type(Children()(x), UNREDUCED)  # error: SPMD401 col 12


def named_children(x: Local["tp: P, dp: P"]):
    return spmd.assert_type(NamedChildren()(x), UNREDUCED)  # error: SPMD401 col 12


def zip_of_module_lists(x: Local["tp: P, dp: P"]):
    return spmd.assert_type(Zipped()(x), UNREDUCED)  # error: SPMD401 col 12


def enumerate_of_a_module_list(x: Local["tp: P, dp: P"]):
    return spmd.assert_type(Enumerated()(x), UNREDUCED)  # error: SPMD401 col 12


def get_submodule(x: Local["tp: P, dp: P"]):
    return spmd.assert_type(Submodule()(x), UNREDUCED)  # error: SPMD401 col 12


def an_unknown_name_reads_nothing(x: Local["tp: P, dp: P"], name: str):
    model = Direct()
    return spmd.assert_type(getattr(model, name)(x), UNREDUCED)


def a_parameter_dict(x: Local["tp: R, dp: R"], w: Local["tp: S(0), dp: R"]):
    return spmd.assert_type(Params(w)(x), {"tp": R, "dp": R})  # error: SPMD401 col 12


def named_parameters(w: Local["tp: S(0), dp: R"]):
    GradientSync(w).sync()

# [expected messages] line:column CODE: message
# 145:13 SPMD302: `all_reduce` expects a Partial on axis 'dp' but `p` is R: it is already reduced, and reducing again multiplies it by the axis size
# 152:12 SPMD401: assert_type: on axis 'dp' the value is R but P is declared
# 152:12 SPMD401: assert_type: on axis 'tp' the value is R but P is declared
# 156:12 SPMD401: assert_type: on axis 'dp' the value is R but P is declared
# 156:12 SPMD401: assert_type: on axis 'tp' the value is R but P is declared
# 160:12 SPMD401: assert_type: on axis 'dp' the value is R but P is declared
# 160:12 SPMD401: assert_type: on axis 'tp' the value is R but P is declared
# 164:12 SPMD401: assert_type: on axis 'dp' the value is R but P is declared
# 164:12 SPMD401: assert_type: on axis 'tp' the value is R but P is declared
# 168:12 SPMD401: assert_type: on axis 'dp' the value is R but P is declared
# 168:12 SPMD401: assert_type: on axis 'tp' the value is R but P is declared
# 172:12 SPMD401: assert_type: on axis 'dp' the value is R but P is declared
# 172:12 SPMD401: assert_type: on axis 'tp' the value is R but P is declared
# 176:12 SPMD401: assert_type: on axis 'dp' the value is R but P is declared
# 176:12 SPMD401: assert_type: on axis 'tp' the value is R but P is declared
# 180:12 SPMD401: assert_type: on axis 'dp' the value is R but P is declared
# 180:12 SPMD401: assert_type: on axis 'tp' the value is R but P is declared
# 184:12 SPMD401: assert_type: on axis 'dp' the value is R but P is declared
# 184:12 SPMD401: assert_type: on axis 'tp' the value is R but P is declared
# 193:12 SPMD401: assert_type: on axis 'tp' the value is V but R is declared

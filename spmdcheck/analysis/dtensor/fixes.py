"""The DTensor spelling of a fix: an Invariant operand made at a `to_local()` / `full_tensor()` boundary is
fixed where it leaves DTensor, by declaring its gradient placement Partial (`grad_placements=(Partial(),)`),
so that DTensor all-reduces its gradient on the way back."""

from __future__ import annotations

import libcst as cst

from spmdcheck.analysis.binding import Slot
from spmdcheck.analysis.context import Analysis
from spmdcheck.analysis.findings import Suggestion


def dtensor_fixes(interp: Analysis, slots: list[Slot], axis: str) -> list[Suggestion]:
    """One suggestion per boundary that made an operand Invariant on `axis` (in the file being reported)."""
    out: list[Suggestion] = []
    for slot in slots:
        for entry_axis, ref, api, fixed in getattr(slot.value, "boundary", ()):
            if entry_axis != axis or not fixed:
                continue
            node, ctx = interp.ctx.program.sites[ref]
            if ctx is not interp.ctx or not isinstance(node, cst.Call):
                continue
            replaced = _with_grad_placements(node, fixed)
            title = (
                f"declare the gradient placement Partial where `{interp.ctx.code_of(slot.node)}` leaves DTensor "
                f"(`{api}(grad_placements=...)`: its gradient is then all-reduced)"
            )
            suggestion = Suggestion(title, ctx.code_of(replaced), node)
            if suggestion not in out:
                out.append(suggestion)
    return out


def _with_grad_placements(call: cst.Call, spelled: str) -> cst.Call:
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value == "grad_placements")]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    keyword = cst.Arg(
        value=cst.parse_expression(spelled),
        keyword=cst.Name("grad_placements"),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    return call.with_changes(args=[*args, keyword])


def fixed_grads(grads: tuple, dim: int) -> str:
    """The gradient placements with mesh dim `dim` made Partial, spelled (empty when one is not known)."""
    spelled = []
    for i, g in enumerate(grads):
        if i == dim:
            spelled.append("Partial()")
        elif g is None:
            return ""
        else:
            spelled.append(str(g))
    return "(" + ", ".join(spelled) + ("," if len(spelled) == 1 else "") + ")"

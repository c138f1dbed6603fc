"""The transfer function of every `@dtensor_api` stub rule: its handler by the rule's name."""

from __future__ import annotations

import libcst as cst

from spmdcheck.analysis.binding import Arg, Bound
from spmdcheck.analysis.dtensor import boundary, localmap
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.values import UNKNOWN, Value
from spmdcheck.rules.model import OpRule

HANDLERS: dict[str, boundary.Handler] = {**boundary.HANDLERS, "local_map": localmap.local_map}  # type: ignore[dict-item]


def transfer(a: Engine, rule: OpRule, bound: Bound, args: list[Arg], node: cst.CSTNode) -> Value:
    """analysis/transfer.py's entry for `dtensor_api` rules."""
    handler = HANDLERS.get(rule.dtensor_api or "")
    return handler(a, rule, bound, node) if handler is not None else UNKNOWN

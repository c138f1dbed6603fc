"""Analyse one parsed module: build the context, run the interpreter, return findings."""

from __future__ import annotations

import libcst as cst

from spmdcheck.analysis.context import FileContext, Options
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.interp.engine import Interpreter
from spmdcheck.rules.stubs import Registry


def analyze_module(
    module: cst.Module, registry: Registry, options: Options, extra_axes: set[str] | frozenset[str] = frozenset()
) -> FileContext:
    ctx = FileContext(registry=registry, options=options, module=module)
    ctx.known_axes.update(options.mesh)
    ctx.known_axes.update(extra_axes)
    Interpreter(ctx).run_module(module)
    return ctx


__all__ = ["analyze_module", "Finding", "Options"]

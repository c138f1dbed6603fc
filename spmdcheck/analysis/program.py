"""Analyse several files as one program: modules run in import order, calls cross files.

Each module's top level runs once, in strongly-connected-component order of the import graph
(an import of a checked module that has not run yet runs it first, as Python does; inside an
import cycle the partly-run module's names are what is known). Then every function and method
of every module is checked on its own; calls into other files are inlined (and memoised) by the
one interpreter, so a type built in model.py reaches the helper in layers.py that misuses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from spmdcheck.analysis.context import FileContext, Options, ProgramState
from spmdcheck.analysis.interpreter import Frame, Interpreter, Scope
from spmdcheck.program.graph import ModuleFile, ModuleGraph
from spmdcheck.rules.stubs import Registry


@dataclass
class SourceUnit:
    """One parsed file of the program, with the settings that apply to it."""

    path: str
    module: cst.Module
    options: Options
    file: ModuleFile
    axes: frozenset[str] = frozenset()  # axis names the file mentions (known valid there)


@dataclass
class _ModuleRun:
    unit: SourceUnit
    ctx: FileContext
    scope: Scope | None = None
    state: str = "pending"  # pending -> running -> done


@dataclass
class ProgramResult:
    program: ProgramState
    contexts: dict[str, FileContext] = field(default_factory=dict)  # path -> its file's context


def analyze_program(units: list[SourceUnit], registry: Registry, graph: ModuleGraph | None = None) -> ProgramResult:
    program = ProgramState()
    runs: dict[str, _ModuleRun] = {}
    ordered: list[_ModuleRun] = []
    for unit in units:
        ctx = FileContext(registry, unit.options, unit.module, path=unit.path, module_file=unit.file, program=program)
        ctx.known_axes.update(unit.options.mesh)
        ctx.known_axes.update(unit.axes)
        run = _ModuleRun(unit, ctx)
        ordered.append(run)
        runs.setdefault(unit.file.name, run)  # two files with one module name: the first is importable
    if not ordered:
        return ProgramResult(program)

    interp = Interpreter(ordered[0].ctx)

    def load(name: str) -> Scope | None:
        run = runs.get(name)
        if run is None:
            return None
        if run.state == "pending":
            _run_top_level(interp, run)
        return run.scope

    interp.importer = load
    order = [name for component in graph.sccs() for name in component] if graph is not None else []
    for name in order:
        load(name)
    for run in ordered:
        if run.state == "pending":
            _run_top_level(interp, run)
    interp.check_functions()
    return ProgramResult(program, {run.unit.path: run.ctx for run in ordered})


def _run_top_level(interp: Interpreter, run: _ModuleRun) -> None:
    """Run one module's top level, leaving the interpreter as it was (imports nest)."""
    saved = (interp.ctx, interp.scope, interp.frame, interp.mesh, interp.grad_enabled, interp.checking)
    run.state = "running"
    interp.ctx = run.ctx
    interp.frame = Frame({}, {})
    interp.frame.globals = interp.frame.env
    run.scope = Scope(run.ctx, interp.frame.env)
    interp.scope = run.scope
    interp.mesh, interp.grad_enabled, interp.checking = run.unit.options.mesh, True, True
    try:
        interp.exec_block(run.unit.module.body)
    finally:
        run.state = "done"
        interp.ctx, interp.scope, interp.frame, interp.mesh, interp.grad_enabled, interp.checking = saved

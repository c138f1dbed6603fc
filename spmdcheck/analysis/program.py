"""Analyse several files as one program: modules run in import order, calls cross files.

Each module's top level runs once, in strongly-connected-component order of the import graph
(an import of a checked module that has not run yet runs it first, as Python does; inside an
import cycle the partly-run module's names are what is known). Then every function and method
of every module is checked on its own; calls into other files are inlined (and memoised) by the
one interpreter, so a type built in model.py reaches the helper in layers.py that misuses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from spmdcheck.analysis.context import BindObserver, FileContext, Options, ProgramState
from spmdcheck.analysis.interpreter import Interpreter, Scope
from spmdcheck.program.graph import ModuleFile, ModuleGraph
from spmdcheck.rules.stubs import Registry


@dataclass
class SourceUnit:
    """One file of the program, with the settings that apply to it.

    A unit without a parsed `module` is a library of the program: a file the checked files import
    that cannot hold a finding by itself. It is parsed (by `parse`) only when an import of it runs,
    its functions are not checked on their own, and calls into it are followed only with typed values.
    """

    path: str
    module: cst.Module | None
    options: Options
    file: ModuleFile
    axes: frozenset[str] = frozenset()  # axis names the file mentions (known valid there)
    text: str = ""


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


def analyze_program(
    units: list[SourceUnit],
    registry: Registry,
    graph: ModuleGraph | None = None,
    parse: Callable[[str], cst.Module | None] | None = None,
    on_bind: BindObserver | None = None,
) -> ProgramResult:
    program = ProgramState(on_bind=on_bind)
    runs: dict[str, _ModuleRun] = {}
    ordered: list[_ModuleRun] = []
    for unit in units:
        ctx = _context(unit, registry, program)
        run = _ModuleRun(unit, ctx)
        if unit.module is not None:
            ordered.append(run)
        runs.setdefault(unit.file.name, run)  # two files with one module name: the first is importable
    if not ordered:
        return ProgramResult(program)

    interp = Interpreter(ordered[0].ctx)
    loader = _Loader(interp, runs, parse)
    interp.importer = loader
    load = loader.load
    order = [name for component in graph.sccs() for name in component] if graph is not None else []
    for name in order:
        if runs.get(name) is not None and runs[name].unit.module is not None:
            load(name)
    for run in ordered:
        if run.state == "pending":
            _run_top_level(interp, run)
    interp.check_functions()
    return ProgramResult(program, {run.unit.path: run.ctx for run in runs.values() if run.unit.module is not None})


class _Loader:
    """Runs modules on first import; parses a library only then."""

    def __init__(
        self, interp: Interpreter, runs: dict[str, _ModuleRun], parse: Callable[[str], cst.Module | None] | None
    ) -> None:
        self.interp, self.runs, self.parse = interp, runs, parse

    def kind(self, name: str) -> str | None:
        run = self.runs.get(name)
        if run is None:
            return None
        return "library" if run.ctx.library else "checked"

    def load(self, name: str) -> Scope | None:
        run = self.runs.get(name)
        if run is None:
            return None
        if run.unit.module is None:
            module = self.parse(run.unit.text) if self.parse is not None and run.state == "pending" else None
            if module is None:
                run.state = "done"
                return None
            run.unit.module = module
            run.ctx.module = module
        if run.state == "pending":
            _run_top_level(self.interp, run)
        return run.scope


def _context(unit: SourceUnit, registry: Registry, program: ProgramState) -> FileContext:
    module = unit.module if unit.module is not None else cst.Module(body=[])
    ctx = FileContext(registry, unit.options, module, path=unit.path, module_file=unit.file, program=program)
    ctx.library = unit.module is None
    ctx.known_axes.update(unit.options.mesh)
    ctx.known_axes.update(unit.axes)
    return ctx


def _run_top_level(interp: Interpreter, run: _ModuleRun) -> None:
    assert run.unit.module is not None
    run.state = "running"
    # the scope exists (and is importable, for cycles) before the body finishes
    run.scope = Scope(run.ctx, {})
    try:
        interp.run_scope(run.scope, run.unit.module)
    finally:
        run.state = "done"

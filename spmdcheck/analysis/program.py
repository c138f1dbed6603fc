"""Analyse several files as one program: modules run in import order, calls cross files.

Each module's top level runs once, in strongly-connected-component order of the import graph
(an import of a checked module that has not run yet runs it first, as Python does; inside an
import cycle the partly-run module's names are what is known). Then every function and method
of every module is checked on its own; calls into other files are inlined (and memoised) by the
one interpreter, so a type built in model.py reaches the helper in layers.py that misuses it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import libcst as cst

from spmdcheck.analysis.context import BindObserver, FileContext, Options, ProgramState
from spmdcheck.analysis.frames import Scope
from spmdcheck.analysis.interp.engine import Interpreter
from spmdcheck.analysis.interp.syntax import is_main_guard
from spmdcheck.analysis.memo import forget_program_facts
from spmdcheck.analysis.roots import TOP, ElidedBody, RootLog
from spmdcheck.analysis.values import Generation
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
    text: str | Callable[[], str] = ""  # a library's or a deferred file's text (or what makes it, when parsed)
    bodies: int | None = None  # function bodies the pre-pass cut in the file (roots.py), None: unknown
    # a checked file a selective run parses and runs only when a name of it is first read (roots.py `top_only`)
    deferred: bool = False


@dataclass
class _ModuleRun:
    unit: SourceUnit
    ctx: FileContext
    index: int = 0  # the file's place in the program (its top level runs as generation -1 - index)
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
    log: RootLog | None = None,
) -> ProgramResult:
    """`log`: record what each root depends on (see roots.py); each unit's `bodies` is the number of
    function bodies the pre-pass cut in its file, which the walk of its syntax tree must find again."""
    try:
        return _analyze_program(units, registry, graph, parse, on_bind, log)
    finally:
        forget_program_facts()  # the facts read from its syntax trees must not keep them alive


def _analyze_program(
    units: list[SourceUnit],
    registry: Registry,
    graph: ModuleGraph | None = None,
    parse: Callable[[str], cst.Module | None] | None = None,
    on_bind: BindObserver | None = None,
    log: RootLog | None = None,
) -> ProgramResult:
    program = ProgramState(on_bind=on_bind, log=log)
    runs: dict[str, _ModuleRun] = {}
    ordered: list[_ModuleRun] = []
    for index, unit in enumerate(units):
        ctx = _context(unit, registry, program)
        run = _ModuleRun(unit, ctx, index)
        if unit.module is not None:
            ordered.append(run)
        runs.setdefault(unit.file.name, run)  # two files with one module name: the first is importable
    if not ordered:
        return ProgramResult(program)

    interp = Interpreter(ordered[0].ctx)
    interp.log = log
    if log is not None:
        for index, unit in enumerate(units):
            if unit.module is not None:
                map_units(log, index, unit)
    loader = _Loader(interp, runs, parse, units if log is not None else None)
    interp.importer = loader
    load = loader.load
    components = graph.sccs() if graph is not None else []
    order = [name for component in components for name in component]
    if log is not None and log.top_only is not None:
        # a part of the top levels (a selective run): those of `top_only`, and of the other checked files only
        # when a name of theirs is read; in the order of the recorded run, cycles included (`_Loader.defer`)
        by_index = {run.index: name for name, run in runs.items()}
        started = [by_index[i] for i in log.recorded_order if i in by_index]
        order = [name for name in started if runs[name].index in log.top_only]
        loader.defer(components, started)
        interp.defer_imports = True
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
        self,
        interp: Interpreter,
        runs: dict[str, _ModuleRun],
        parse: Callable[[str], cst.Module | None] | None,
        units: list[SourceUnit] | None = None,
    ) -> None:
        self.interp, self.runs, self.parse = interp, runs, parse
        self.index = {id(u): i for i, u in enumerate(units)} if units is not None else None
        self._component: dict[str, int] = {}  # module -> its import cycle (strongly connected component)
        self._before: dict[str, list[str]] = {}  # module of a cycle -> the members that started before it

    def defer(self, components: list[list[str]], started: list[str]) -> None:
        """A selective run: a module outside the importer's cycle may run when first read (`deferrable`). A module
        of a cycle starts after the members that started before it in the recorded run (`started`): each then
        sees the others as partly run as it did."""
        place = {name: k for k, name in enumerate(started)}
        for k, component in enumerate(components):
            for name in component:
                self._component[name] = k
            if len(component) > 1:
                members = sorted(component, key=lambda n: place.get(n, len(place)))
                for j, name in enumerate(members):
                    self._before[name] = members[:j]

    def deferrable(self, importer: str, name: str) -> bool:
        run = self.runs.get(name)
        return (
            run is not None
            and run.state == "pending"
            and not run.ctx.library
            and name in self._component
            and self._component[name] != self._component.get(importer)
        )

    def kind(self, name: str) -> str | None:
        run = self.runs.get(name)
        if run is None:
            return None
        return "library" if run.ctx.library else "checked"

    def load(self, name: str) -> Scope | None:
        run = self.runs.get(name)
        if run is None:
            return None
        if run.state == "pending":
            for earlier in self._before.get(name, ()):
                self.load(earlier)
            if run.state != "pending":
                return run.scope  # an earlier member of its cycle imported it
        if run.unit.module is None:
            text = run.unit.text() if callable(run.unit.text) else run.unit.text
            module = self.parse(text) if self.parse is not None and run.state == "pending" else None
            if module is None and run.unit.deferred:
                raise ElidedBody  # it did not parse as the whole program's run read it: that run answers
            if module is None:
                run.state = "done"
                return None
            run.unit.module = module
            run.ctx.module = module
            if self.index is not None and self.interp.log is not None:
                map_units(self.interp.log, self.index[id(run.unit)], run.unit)
        if run.state == "pending":
            _run_top_level(self.interp, run)
        return run.scope


def _context(unit: SourceUnit, registry: Registry, program: ProgramState) -> FileContext:
    module = unit.module if unit.module is not None else cst.Module(body=[])
    ctx = FileContext(registry, unit.options, module, path=unit.path, module_file=unit.file, program=program)
    ctx.library = unit.module is None and not unit.deferred
    ctx.known_axes.update(unit.options.mesh)
    ctx.known_axes.update(unit.axes)
    return ctx


def _run_top_level(interp: Interpreter, run: _ModuleRun) -> None:
    assert run.unit.module is not None
    run.state = "running"
    log = interp.log
    current = TOP
    if log is not None:
        log.top_order.append(run.index)
        if not run.ctx.library:  # a checked module deferred while a function is checked: still the top level's
            current, log.current = log.current, TOP
    # the scope exists (and is importable, for cycles) before the body finishes
    run.scope = Scope(run.ctx, {})
    # a module's top level makes shared objects, also when a function's check imports it first (a library)
    generation, Generation.current = Generation.current, -1 - run.index
    # and how it spells spmd_types stays after the check that imported it first ends (interp/modules.py)
    undo, interp.attr_undo = interp.attr_undo, None
    spellings, interp.spelling_undo = interp.spelling_undo, None
    try:
        interp.run_scope(run.scope, run.unit.module)
    finally:
        run.state = "done"
        Generation.current, interp.attr_undo, interp.spelling_undo = generation, undo, spellings
        if log is not None and not run.ctx.library:
            log.current = current


def map_units(log: RootLog, index: int, unit: SourceUnit) -> None:
    """Number the file's function bodies as the pre-pass does (see roots.py); a file whose walk does not
    find them all is unmapped (an edit of it has the whole program analysed again)."""
    assert unit.module is not None
    defs = unit_defs(unit.module)
    if unit.bodies is None or len(defs) != unit.bodies:
        log.unmapped.add(index)
        return
    for k, node in enumerate(defs):
        log.unit_of[id(node)] = (index, k)
    for node in skeleton_defs(unit.module):
        log.unit_of.setdefault(id(node), (index, -1))  # its code is the file's text outside the bodies
    for stmt in unit.module.body:
        if type(stmt) is cst.If and is_main_guard(stmt.test):
            log.unit_of[id(stmt)] = (index, -1)  # a `__main__` block: a root of its own, outside the bodies


def unit_defs(module: cst.Module) -> list[cst.FunctionDef]:
    """The functions whose bodies are units, in source order: module-level functions (also inside
    module-level if/try/with/for/while blocks) and the methods of such classes, each with a body of its
    own lines (an indented block)."""
    return _defs(module)[0]


def skeleton_defs(module: cst.Module) -> list[cst.FunctionDef]:
    """Every function written at statement level outside the units' bodies (one-line functions, methods of
    nested classes): running one runs the file's text outside the bodies (its unit is (file, -1))."""
    return _defs(module)[1]


def _defs(module: cst.Module) -> tuple[list[cst.FunctionDef], list[cst.FunctionDef]]:
    """(unit functions, other functions outside their bodies), both in source order; the walk visits
    statements only, never a function's body."""
    units: list[cst.FunctionDef] = []
    others: list[cst.FunctionDef] = []

    def block(statements: Sequence[cst.CSTNode], where: str) -> None:  # where: "module", "class" or "other"
        for stmt in statements:
            kind = type(stmt)
            if kind is cst.FunctionDef:
                at_unit = where != "other" and type(stmt.body) is cst.IndentedBlock
                (units if at_unit else others).append(stmt)
            elif kind is cst.ClassDef:
                block(stmt.body.body, "class" if where == "module" else "other")
            else:
                for inner in _blocks(stmt):
                    block(inner, "module" if where == "module" else "other")

    block(module.body, "module")
    return units, others


def _blocks(stmt: cst.CSTNode) -> list[Sequence[cst.CSTNode]]:
    """The statement blocks of an if/try/with/for/while statement, in source order (none for others)."""
    kind = type(stmt)
    if kind is cst.If:
        orelse = stmt.orelse
        rest = [] if orelse is None else [[orelse]] if type(orelse) is cst.If else [orelse.body.body]
        return [stmt.body.body, *rest]
    if kind in (cst.Try, cst.TryStar):
        extra = [b.body.body for b in (stmt.orelse, stmt.finalbody) if b is not None]
        return [stmt.body.body, *(h.body.body for h in stmt.handlers), *extra]
    if kind in (cst.For, cst.While):
        return [stmt.body.body] + ([stmt.orelse.body.body] if stmt.orelse is not None else [])
    if kind is cst.With:
        return [stmt.body.body]
    return []

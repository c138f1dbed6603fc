"""The abstract interpreter of one program run: the engine (`frames.Engine`) the analysis helpers see.

It walks the libcst tree once per scope (module body, each function body, and function bodies again
when inlined at a call with typed arguments), and delegates every call to dispatch.py, which reads the
rule registry. Its parts are in this package: modules.py (modules, imports, the queue of functions),
statements.py, expressions.py (the evaluator), branches.py, loops.py; this module holds the state they
share and what the helpers (dispatch, signature, inline, contracts, configs) call.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from spmdcheck.analysis import aliases, lambdas
from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.context import FileContext
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.frames import Frame, Importer, RunState, Scope
from spmdcheck.analysis.inline import call_function
from spmdcheck.analysis.interp.branches import BranchRunner, put_attr
from spmdcheck.analysis.interp.expressions import Evaluator
from spmdcheck.analysis.interp.loopreads import attr_path
from spmdcheck.analysis.interp.loops import LoopRunner
from spmdcheck.analysis.interp.modules import ModuleRunner
from spmdcheck.analysis.interp.statements import StatementRunner
from spmdcheck.analysis.interp.syntax import is_param, target_key
from spmdcheck.analysis.roots import RootLog
from spmdcheck.analysis.values import (
    UNKNOWN,
    FunctionValue,
    InstanceValue,
    RankValue,
    TensorValue,
    Value,
    alternatives_of,
)
from spmdcheck.diagnostics.violations.control_flow import CollectiveInRankBranch
from spmdcheck.lattice import AxisType, GradState, Kind, SpmdType


class Interpreter(ModuleRunner, StatementRunner, BranchRunner, LoopRunner):
    """Implements `frames.Engine`: the state of the run, and how the helpers enter frames, call and report."""

    def __init__(self, ctx: FileContext, importer: Importer | None = None) -> None:
        self.ctx = ctx
        self.importer = importer
        self.grad_enabled = True
        self.loss_parallel = False  # inside `with loss_parallel():` (torch.distributed.tensor.parallel)
        self.mesh: tuple[str, ...] = ctx.options.mesh
        self.checking = True  # False inside spmd.no_typecheck
        self.inline_stack: list[cst.FunctionDef] = []
        self.call_sites: list[tuple[FileContext, cst.CSTNode]] = []  # calls being inlined, outermost first
        self.frame = Frame({}, {})
        self.scope = Scope(ctx, self.frame.env)
        self.run = RunState()  # the queue of functions, call summaries, contracts: kept across roots
        self.collectives: list[tuple[str, str | None, cst.CSTNode]] = []  # calls made, in order
        self.loop_reads: dict[int, tuple[cst.CSTNode, frozenset[str] | None]] = {}  # loop id -> (loop, exposed reads)
        # writes to variables recorded instead of applied, while a call is typed per alternative
        self.effects: list[tuple[cst.CSTNode | None, Value]] | None = None
        # rank-dependent conditions the code being run is under (early exits, loop bounds), with their node
        self.divergent: list[tuple[RankValue, cst.CSTNode]] = []
        self.last_test: Value = UNKNOWN  # the condition of the `if` that just ran
        self.rank_branches = 0  # arms of rank-dependent `if`s being run (their collectives are compared)
        # the conditions of the `if` arms being run, with their truth there (branches.py `condition_key`)
        self.conditions_taken: list[tuple[object, bool]] = []
        # one log per `if` arm being run: the attribute writes made in it, with the value each replaced,
        # so that the arms' objects can be joined like their variables
        self.attr_logs: list[list[tuple[InstanceValue, str, Value | None]]] = []
        # the rank-dependent `if` that just ran and the tensors its arms computed differently (SPMD502)
        self.rank_specific: tuple[cst.CSTNode, list[str]] | None = None
        self.models: dict[str, Scope | None] = {}  # stub path -> its @model definitions
        self.log: RootLog | None = None  # what each root depends on (a cached run records it; see roots.py)
        self.spelling_undo: list[tuple[FileContext, str, dict[str, str]]] | None = None  # see check_functions
        self.attr_undo: list[tuple[InstanceValue, str, object]] | None = None  # see check_functions
        # a selective run: a top-level import of a checked module outside the importer's import cycle binds a
        # PendingImport (the module is parsed and run when the name is first read; program.py `_Loader`)
        self.defer_imports = False
        self.expressions = Evaluator(self)
        # bound once: statements evaluate their expressions with no call in between
        self.eval = self.expressions.eval

    def lookup(self, name: str) -> Value:
        """What a name denotes in the current scope."""
        return self.expressions.lookup(name)

    def call(self, func: FunctionValue, args: list[Arg], node: cst.CSTNode, receiver: Value | None = None) -> Value:
        """Inline a call of a checked function (inline.py)."""
        return call_function(self, func, args, node, receiver)

    def entered(self, frame: Frame, scope: Scope | None = None) -> _Entered:
        """`with`: run in `frame` (and in `scope`'s file and globals, if given); the frame, grad mode, mesh,
        checking mode, file and scope are restored after."""
        return _Entered(self, frame, scope)

    def note_collective(self, api: str, axis: str | None, node: cst.CSTNode) -> None:
        """A collective was issued: remember it (branch comparison) and check it runs on every rank of its group."""
        self.collectives.append((api, axis, node))
        self.ctx.site(node)  # the file of the collective: a rank-dependent `if` in a caller reports it there
        for condition, where in self.divergent:
            if condition.diverges_along(axis):
                what = "loop" if isinstance(where, (cst.For, cst.While)) else "early exit"
                site = self.ctx.site(where)
                self.report(Finding.of(CollectiveInRankBranch(api, axis, what, site), node))
                return

    def rebind(self, node: cst.CSTNode | None, value: Value) -> None:
        """An op changed the type of the tensor named by `node` (in place, assert_type).

        While a call is typed once per alternative of a branch-dependent operand, the write is
        only recorded: `join_effects` then binds the target to what every alternative wrote.
        """
        if self.effects is not None:
            self.effects.append((node, value))
            return
        self._write(node, value)

    def join_effects(self, per_alternative: list[tuple[list[tuple[cst.CSTNode | None, Value]], tuple]]) -> None:
        """Apply the writes of a call typed once per alternative: a target written differently keeps them all."""
        targets: dict[str, cst.CSTNode] = {}
        written: dict[str, dict[int, Value]] = {}
        for i, (effects, _) in enumerate(per_alternative):
            for node, value in effects:
                key = target_key(node)
                if key is not None and node is not None:
                    targets[key] = node
                    written.setdefault(key, {})[i] = value
        for key, by_alternative in written.items():
            current = self.frame.env.get(key, UNKNOWN)  # what the alternatives that did not write keep
            values = [(by_alternative.get(i, current), path) for i, (_, path) in enumerate(per_alternative)]
            self.rebind(targets[key], alternatives_of(values))

    def _write(self, node: cst.CSTNode | None, value: Value) -> None:
        if isinstance(node, cst.Name):
            name = node.value
            self.frame.env[name] = value
            if name in self.frame.param_effects or (
                self.call_sites and name not in self.frame.rebound and is_param(self.frame.function, name)
            ):
                self.frame.param_effects[name] = value  # the caller's object changed too
        elif isinstance(node, cst.Attribute):
            owner = self._object_of(node.value)
            if isinstance(owner, InstanceValue):
                self.set_attr(owner, node.attr.value, value)
                return
            key = attr_path(node)
            if key is not None:
                self.frame.env[key] = value
        elif node is not None:
            alias = aliases.written_through(node)  # `{"x": x}["x"].add_(y)` changes `x`
            if alias is not None:
                self._write(alias, value)

    def _object_of(self, node: cst.BaseExpression) -> Value:
        """What a name or attribute chain denotes, without evaluating anything that could act."""
        if isinstance(node, cst.Name):
            return self.lookup(node.value)
        if isinstance(node, cst.Attribute):
            return self.expressions.object_attribute(self._object_of(node.value), node.attr.value)
        return UNKNOWN

    def set_attr(self, owner: InstanceValue, name: str, value: Value | None) -> None:
        """Write an object's attribute (None: remove it), logged for the `if` arms being run."""
        for log in self.attr_logs:
            log.append((owner, name, owner.attrs.get(name)))
        self.remember_attr(owner, name)
        put_attr(owner, name, value)

    def report(self, finding: Finding) -> None:
        if not self.checking:
            return
        finding.node = lambdas.origin(finding.node)  # a node made for a lambda's `def` has no place: the lambda's
        program = self.ctx.program
        ref = program.site_ids.get(id(finding.node))
        if ref is not None and program.sites[ref][1] is not self.ctx and not program.sites[ref][1].stub:
            # a node of another file (a collective a call into it issued, compared after that call returned
            # by a rank-dependent `if` here, or in a decorator's wrapper): reported in its own file
            program.sites[ref][1].report(finding)
            return
        if self.ctx.stub:
            finding = self._at_library_call(finding)
            if finding is None:
                return
            ctx = finding.origin
            finding.origin = None
            ctx.report(finding)
            return
        if self.call_sites and not finding.call_chain and any(ctx is not self.ctx for ctx, _ in self.call_sites):
            # types came from another file: name the calls that brought them here, innermost first
            finding.call_chain = tuple(ctx.site(call) for ctx, call in reversed(self.call_sites))
        self.ctx.report(finding)

    def _at_library_call(self, finding: Finding) -> Finding | None:
        """A finding inside a library model belongs to the user's call into the library."""
        for i in range(len(self.call_sites) - 1, -1, -1):
            ctx, call = self.call_sites[i]
            if not ctx.stub:
                return finding.at_library_call(call, self.inline_stack[i].name.value, ctx)
        return None

    def result_grad(self, grads: Sequence[GradState]) -> GradState:
        if not self.grad_enabled:
            return GradState.NO
        return GradState.join(grads) if grads else GradState.NO

    def factory_tensor(self, rank: int | None, grad: GradState, typed: bool) -> TensorValue:
        """A deterministic factory's result: R on every axis of the mesh in scope.

        spmd_types types a factory only while its checking mode runs. The configured mesh is an assumption
        about code that uses spmd_types; a file that never imports it (a test building inputs, unannotated
        library code) gives no sign that its tensors are made under checking: they stay untyped there.
        """
        assumed = self.mesh == self.ctx.options.mesh and not self.ctx.imports_spmd_types
        axes = {a: AxisType(Kind.R) for a in self.mesh} if typed and not assumed else {}
        return TensorValue(SpmdType(axes), grad, rank)


class _Entered:
    """`Interpreter.entered` (a plain class: cheaper than a generator context manager, entered for every call)."""

    __slots__ = ("engine", "frame", "scope", "saved")

    def __init__(self, engine: Interpreter, frame: Frame, scope: Scope | None) -> None:
        self.engine, self.frame, self.scope = engine, frame, scope

    def __enter__(self) -> Frame:
        engine = self.engine
        self.saved = (engine.frame, engine.grad_enabled, engine.mesh, engine.checking, engine.ctx, engine.scope)
        engine.frame = self.frame
        if self.scope is not None:
            engine.ctx, engine.scope = self.scope.ctx, self.scope
        return self.frame

    def __exit__(self, *exc: object) -> None:
        engine = self.engine
        engine.frame, engine.grad_enabled, engine.mesh, engine.checking, engine.ctx, engine.scope = self.saved

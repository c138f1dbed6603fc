"""The abstract interpreter: statements and expressions of one file, over abstract values.

It walks the libcst tree once per scope (module body, each function body,
and function bodies again when inlined at a call with typed arguments), and
delegates every call to `calls.dispatch`, which reads the rule registry.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import libcst as cst

from spmdcheck.analysis import budget, calls, contracts, spmd_api
from spmdcheck.analysis.context import FileContext
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.loopreads import attr_path, exposed_reads
from spmdcheck.analysis.roots import RootLog
from spmdcheck.analysis.values import (
    NONE,
    UNKNOWN,
    Alternatives,
    Assumed,
    BoundMethod,
    BuiltinValue,
    ClassValue,
    ContextValue,
    ContractValue,
    DictValue,
    DimSize,
    FunctionValue,
    Generation,
    Homogeneous,
    InstanceValue,
    LayoutValue,
    LazyImport,
    Literal,
    MembersValue,
    MeshValue,
    MethodValue,
    ModuleRef,
    ModuleValue,
    PendingImport,
    PyNumber,
    RankValue,
    Seq,
    ShapeValue,
    SuperValue,
    TensorValue,
    TrustedForward,
    TypeValue,
    Unknown,
    Value,
    alternatives_of,
    join,
    made_mark,
    share_objects,
)
from spmdcheck.frontend.guard import string_value
from spmdcheck.lattice import AxisType, GradState, Kind, SpmdType
from spmdcheck.program.graph import resolve_import
from spmdcheck.rules.model import OpRule, Returns

_BINOP_DUNDER = {
    cst.Add: "__add__",
    cst.Subtract: "__sub__",
    cst.Multiply: "__mul__",
    cst.Divide: "__truediv__",
    cst.MatrixMultiply: "__matmul__",
    cst.Power: "__pow__",
    cst.FloorDivide: "__floordiv__",
    cst.Modulo: "__mod__",
    cst.BitAnd: "__and__",
    cst.BitOr: "__or__",
    cst.BitXor: "__xor__",
    cst.LeftShift: "__lshift__",
    cst.RightShift: "__rshift__",
}
_AUGOP_DUNDER = {
    cst.AddAssign: "__iadd__",
    cst.SubtractAssign: "__isub__",
    cst.MultiplyAssign: "__imul__",
    cst.DivideAssign: "__itruediv__",
    cst.MatrixMultiplyAssign: "__imatmul__",
    cst.PowerAssign: "__ipow__",
    cst.FloorDivideAssign: "__ifloordiv__",
    cst.ModuloAssign: "__imod__",
}
_CMP_DUNDER = {
    cst.LessThan: "__lt__",
    cst.GreaterThan: "__gt__",
    cst.LessThanEqual: "__le__",
    cst.GreaterThanEqual: "__ge__",
    cst.Equal: "__eq__",
    cst.NotEqual: "__ne__",
}
_BUILTINS: dict[str, Value] = {
    "True": Literal(True),
    "False": Literal(False),
    "None": NONE,
    "super": BuiltinValue("super"),
    "isinstance": BuiltinValue("isinstance"),
    "tuple": BuiltinValue("tuple"),
    "list": BuiltinValue("list"),
    **{name: BuiltinValue(name) for name in calls.RANK_PRESERVING_BUILTINS},
}
UNTYPED = TensorValue()  # a tensor spmd_types never typed (no_typecheck results)
_ABSENT = object()  # a lookup's "no such name"
TENSOR = "torch.Tensor"


@dataclass
class Scope:
    """A module's top level: the file it belongs to and its global names."""

    ctx: FileContext
    globals: dict[str, Value]


@dataclass
class Frame:
    """One scope being interpreted."""

    env: dict[str, Value]
    globals: dict[str, Value]
    returns: list[tuple[Value, cst.CSTNode]] = field(default_factory=list)
    function: cst.FunctionDef | None = None
    owner: ClassValue | None = None  # the class whose method this is (for super())
    exited: bool = False  # a return/raise ended this path: the rest of the block is not reached
    jumped: bool = False  # a break/continue ended this path of the loop body
    # in-place writes to parameters still bound to the caller's object: the call's effects on its arguments
    param_effects: dict[str, Value] = field(default_factory=dict)
    rebound: set[str] = field(default_factory=set)  # parameters reassigned: later writes are local
    top: bool = False  # a module's top level (not a class body, a function or a `__main__` block)

    def ended(self) -> str | None:
        """How the current path ended: "exited" (return/raise), "jumped" (break/continue), or None."""
        return "exited" if self.exited else "jumped" if self.jumped else None


@dataclass
class Summary:
    """What a call of a checked function did, for the same abstract arguments: replayed, not re-run."""

    result: Value
    collectives: list[tuple[str, str | None, cst.CSTNode]]
    param_effects: dict[str, Value]
    instance_states: list[tuple[int, dict[str, Value]]]  # (argument position, -1: receiver) -> attributes after
    units: frozenset = frozenset()  # the function bodies the call ran (roots.RootLog)
    root: tuple | None = None  # the root that ran it


class Importer(Protocol):
    """The program's modules, as the interpreter sees them."""

    def kind(self, name: str) -> str | None:
        """ "checked", "library" (imported, parsed only when used) or None (not part of the program)."""

    def load(self, name: str) -> Scope | None:
        """A module's top-level names, running it first if needed (None: not loadable)."""


# What running another module's top level replaces, and restores after.
_RUN_STATE = (
    "ctx",
    "scope",
    "frame",
    "mesh",
    "grad_enabled",
    "checking",
    "inline_stack",
    "call_sites",
    "divergent",
    # what the code that imported the module was in the middle of: a call typed per alternative, the arms of a
    # rank-dependent `if`, a call whose collectives its summary keeps (a module runs as if imported first)
    "collectives",
    "effects",
    "last_test",
    "rank_branches",
    "attr_logs",
    "rank_specific",
)


class Interpreter:
    def __init__(self, ctx: FileContext, importer: Importer | None = None) -> None:
        self.ctx = ctx
        self.importer = importer
        self.grad_enabled = True
        self.mesh: tuple[str, ...] = ctx.options.mesh
        self.checking = True  # False inside spmd.no_typecheck
        self.inline_stack: list[cst.FunctionDef] = []
        self.call_sites: list[tuple[FileContext, cst.CSTNode]] = []  # calls being inlined, outermost first
        self.frame = Frame({}, {})
        self.scope = Scope(ctx, self.frame.env)
        # functions to check on their own after the top level ran: (function, scope, owning class, root key); a
        # module's `if __name__ == "__main__":` block is queued as one too (`_defer_main`)
        self.functions: list[tuple[cst.FunctionDef | cst.If, Scope, ClassValue | None, tuple | None]] = []
        self.collectives: list[tuple[str, str | None, cst.CSTNode]] = []  # calls made, in order
        self._exposed: dict[int, tuple[cst.CSTNode, frozenset[str] | None]] = {}  # loop id -> (loop, exposed reads)
        # writes to variables recorded instead of applied, while a call is typed per alternative
        self.effects: list[tuple[cst.CSTNode | None, Value]] | None = None
        # rank-dependent conditions the code being run is under (early exits, loop bounds), with their node
        self.divergent: list[tuple[RankValue, cst.CSTNode]] = []
        self.last_test: Value = UNKNOWN  # the condition of the `if` that just ran
        self.rank_branches = 0  # arms of rank-dependent `if`s being run (their collectives are compared)
        # one log per `if` arm being run: the attribute writes made in it, with the value each replaced,
        # so that the arms' objects can be joined like their variables
        self.attr_logs: list[list[tuple[InstanceValue, str, Value | None]]] = []
        # the rank-dependent `if` that just ran and the tensors its arms computed differently (SPMD502)
        self.rank_specific: tuple[cst.CSTNode, list[str]] | None = None
        self.summaries: dict[tuple, Summary] = {}
        self._models: dict[str, Scope | None] = {}  # stub path -> its @model definitions
        self._instances: dict[int, InstanceValue] = {}  # class id -> the instance its methods are checked on
        self.contracts: dict[int, Value] = {}  # module class id -> the @module_contract object that reached it
        self.checked_nodes: set[int] = set()  # functions already checked on their own (ids of their nodes)
        self.log: RootLog | None = None  # what each root depends on (a cached run records it; see roots.py)
        self.spelling_undo: list[tuple[FileContext, str, dict[str, str]]] | None = None  # see check_functions
        self.attr_undo: list[tuple[InstanceValue, str, object]] | None = None  # see check_functions
        # a selective run: a top-level import of a checked module outside the importer's import cycle binds a
        # PendingImport (the module is parsed and run when the name is first read; program.py `_Loader`)
        self.defer_imports = False

    # ------------------------------------------------------------------ entry
    def run_module(self, module: cst.Module) -> None:
        """A single file: its top level, then every function on its own."""
        self.run_top_level(module)
        self.check_functions()

    def run_top_level(self, module: cst.Module) -> Scope:
        self.frame = Frame({}, {})
        self.frame.globals = self.frame.env
        self.scope = Scope(self.ctx, self.frame.env)
        self.mesh = self.ctx.options.mesh
        self.exec_block(module.body)
        return self.scope

    def run_scope(self, scope: Scope, module: cst.Module) -> None:
        """Run a module's top level into `scope.globals`, leaving the interpreter as it was (imports nest).

        A module's top level runs once, whoever imports it first: not inside that importer's calls.
        """
        saved = {name: getattr(self, name) for name in _RUN_STATE}
        self.ctx, self.scope = scope.ctx, scope
        self.frame = Frame(scope.globals, scope.globals, top=True)
        self.mesh, self.grad_enabled, self.checking = scope.ctx.options.mesh, True, True
        self.inline_stack, self.call_sites, self.divergent = [], [], []
        self.collectives, self.effects, self.last_test = [], None, UNKNOWN
        self.rank_branches, self.attr_logs, self.rank_specific = 0, [], None
        try:
            self.exec_block(module.body)
        finally:
            for name, value in saved.items():
                setattr(self, name, value)

    def model_of(self, rule: OpRule) -> Value:
        """A @model class or function of a stub: its stub module runs once (as a library), then its value."""
        assert rule.model_path is not None
        scope = self._models.get(rule.model_path)
        if scope is None:
            scope = self._models[rule.model_path] = self._load_model_module(rule)
        if scope is None:
            return UNKNOWN
        return scope.globals.get(rule.qualname.rsplit(".", 1)[-1], UNKNOWN)

    def _load_model_module(self, rule: OpRule) -> Scope | None:
        from spmdcheck.program.graph import ModuleFile

        module = _parsed_stub(rule.model_path)  # type: ignore[arg-type]
        if module is None:
            return None
        name = rule.model_module or ""
        ctx = FileContext(
            self.ctx.registry,
            self.ctx.options,
            module,
            path=rule.model_path or "<stub>",
            module_file=ModuleFile(name, rule.model_path or "", str(rule.model_path).endswith("__init__.pyi")),
            program=self.ctx.program,
        )
        ctx.library = ctx.stub = True
        scope = Scope(ctx, {})
        self.run_scope(scope, module)
        return scope

    def check_functions(self) -> None:
        log = self.log
        while self.functions:
            fn, scope, owner, key = self.functions.pop(0)
            if scope.ctx.library:  # a library's functions are only followed from calls
                continue
            if log is not None:
                key = log.root_key(fn, key)
                if not log.wants(key):
                    if log.skipped(key):
                        self.checked_nodes.add(id(fn))  # as checked as it was: a contract re-queues it alike
                    continue
                log.enter(key)
            # Each function is checked on the state the top level left: what its check writes to objects made
            # before it (by the top level, or shared by every method of a class) is undone when it ends, and how
            # a file spells spmd_types and Megatron (for suggestions) is what its top level imports (an import
            # inside a function spells them only until that function's check ends). So no check depends on
            # which were checked before it (and incremental.py can run some of them alone).
            Generation.current += 1
            self.spelling_undo, self.attr_undo = [], []
            try:
                if type(fn) is cst.If:
                    self.analyze_main(fn, scope)
                else:
                    self.analyze_function(fn, scope, owner)
            finally:
                for ctx, alias, names in reversed(self.spelling_undo):
                    ctx.spmd_alias, ctx.megatron_names = alias, names
                for obj, name, old in reversed(self.attr_undo):
                    if old is _ABSENT:
                        obj.attrs.pop(name, None)
                    else:
                        obj.attrs[name] = old
                self.spelling_undo = self.attr_undo = None
                if log is not None:
                    log.leave()
        Generation.current = 0

    def enter_scope(self, scope: Scope) -> tuple:
        """Switch to another module's file and globals (a call into it); returns what to restore."""
        saved = (self.ctx, self.scope)
        self.ctx, self.scope = scope.ctx, scope
        return saved

    def analyze_function(self, fn: cst.FunctionDef, scope: Scope, owner: ClassValue | None = None) -> None:
        """Check a function body on its own, its parameters typed by their annotations."""
        saved = (self.frame, self.grad_enabled, self.mesh, self.checking)
        restore = self.enter_scope(scope)
        entered = False
        self.mesh = self.ctx.options.mesh
        self.frame = Frame({}, scope.globals, function=fn, owner=owner)
        try:
            decor = calls.function_decorations(self, fn)
            if decor.skip:
                return
            if decor.grad_enabled is not None:
                self.grad_enabled = decor.grad_enabled
            self.checked_nodes.add(id(fn))
            if self.log is not None:
                self.log.checked.add(self.log.current)
                self.log.enter_body(fn)
                entered = True
            receiver = self.instance_for(owner) if owner is not None and calls.takes_self(fn) else None
            contract = contracts.for_forward(self, owner, fn)
            if contract is not None:
                contracts.typed_state(receiver, contract)
            for param, value in calls.parameter_values(self, fn, decor, None, receiver):
                if contract is not None and param in contract.params and not _is_tensor(value):
                    value = TensorValue(SpmdType(contract.params[param]), GradState.UNKNOWN, None)
                self.frame.env[param] = value
                self.ctx.bound(param, value, _param_name(fn, param))
            self.exec_block(_body(fn))
            calls.check_returns(self, fn, decor, self.frame.returns)
            if contract is not None and contract.returns:
                for value, node in self.frame.returns:
                    calls.check_declared(self, value, contract.returns, node, "SPMD402", "returned value (out_src)")
        finally:
            self.frame, self.grad_enabled, self.mesh, self.checking = saved
            self.ctx, self.scope = restore
            if entered:
                self.log.exit_body()

    def analyze_main(self, node: cst.If, scope: Scope) -> None:
        """Check a module's `if __name__ == "__main__":` block (see `_defer_main`): its names are a copy of the
        module's, so what it binds stays its own; what it writes to objects is undone, as for every root."""
        saved = (self.frame, self.grad_enabled, self.mesh, self.checking)
        restore = self.enter_scope(scope)
        self.mesh = self.ctx.options.mesh
        self.frame = Frame(dict(scope.globals), scope.globals)
        entered = False
        try:
            if self.log is not None:
                self.log.enter_body(node)
                entered = True
            self.exec_block(_body(node))
        finally:
            self.frame, self.grad_enabled, self.mesh, self.checking = saved
            self.ctx, self.scope = restore
            if entered:
                self.log.exit_body()

    def instance_for(self, cls: ClassValue) -> InstanceValue:
        """The object a class's methods are checked on: built by its `__init__` with default arguments."""
        built = self._instances.get(id(cls))
        log = self.log
        if built is None:
            built = InstanceValue(cls)
            self._instances[id(cls)] = built
            init = cls.lookup("__init__")
            if log is not None:
                log.push()
            try:
                if isinstance(init, FunctionValue):
                    calls.call_function(self, init, [], init.node, receiver=built)
            finally:
                share_objects(built.attrs)  # every method's copy holds these objects: writes to them are undone
                if log is not None:
                    log.built[id(cls)] = (log.current, log.pop())
        elif log is not None and id(cls) in log.built:
            log.reuse(*log.built[id(cls)])
        return InstanceValue(cls, dict(built.attrs))  # each method sees its own copy

    # ------------------------------------------------------------- statements
    def exec_block(self, body: Sequence[cst.CSTNode]) -> None:
        depth = len(self.divergent)
        try:
            for i, stmt in enumerate(body):
                if self.frame.exited or self.frame.jumped:
                    break  # the rest of the block is not reached on this path
                self.rank_specific = None
                env = self.frame.env
                if self.defer_imports and env is self.frame.globals:
                    self.settle_bound(stmt)
                self.exec_stmt(stmt)
                if env is self.frame.globals and self.frame.env is not env:
                    # a module's top level: its namespace is the dict its functions were given as globals,
                    # so an `if`/`try`/loop there (`if TYPE_CHECKING:`) updates that dict, not a copy of it
                    env.clear()
                    env.update(self.frame.env)
                    self.frame.env = env
                if self.rank_specific is not None and self.rank_specific[0] is stmt and self.rank_specific[1]:
                    # a rank-dependent `if` or loop whose tensors differ across ranks and are used after it
                    self._report_rank_specific(stmt, self.rank_specific[1], body[i + 1 :])
                if type(stmt) is cst.If and isinstance(self.last_test, RankValue):
                    # a `raise` on some ranks is an error path (the run fails there), not ranks skipping ahead
                    exits = (
                        _always_exits(stmt.body, skips_only=True),
                        stmt.orelse is not None and _always_exits(stmt.orelse, skips_only=True),
                    )
                    if exits[0] != exits[1]:
                        # an early return/raise/continue on some ranks: the rest of the block runs on the others
                        self.divergent.append((self.last_test, stmt))
        finally:
            del self.divergent[depth:]

    def note_collective(self, api: str, axis: str | None, node: cst.CSTNode) -> None:
        """A collective was issued: remember it (branch comparison) and check it runs on every rank of its group."""
        self.collectives.append((api, axis, node))
        for condition, where in self.divergent:
            if condition.diverges_along(axis):
                what = "loop" if isinstance(where, (cst.For, cst.While)) else "early exit"
                site = self.ctx.site(where)
                on = f"on axis {axis!r} " if axis else ""
                self.report(
                    Finding(
                        "SPMD501",
                        node,
                        f"`{api}` {on}is reached only on some ranks of its group: the rank-dependent {what} at "
                        f"{{site:{site}}} lets the other ranks skip it (or run it another number of times), "
                        f"and the program hangs",
                    )
                )
                return

    # The statement dispatches compare exact node types: libcst's node classes are abstract-base-class
    # subclasses with no subclasses of their own, and an `isinstance` miss on one costs a Python-level
    # `ABCMeta.__instancecheck__` call (millions per run).
    def exec_stmt(self, stmt: cst.CSTNode) -> None:
        budget.tick()
        kind = type(stmt)
        if kind is cst.SimpleStatementLine or kind is cst.SimpleStatementSuite:
            for small in stmt.body:
                self.exec_small(small, stmt)
        elif kind is cst.FunctionDef:
            owner = self.frame.owner if self.frame.function is None else None  # a method: defined in a class body
            self.frame.env[stmt.name.value] = FunctionValue(stmt, stmt.name.value, self.scope, owner)
            log = self.log
            if log is not None:
                log.defined(stmt)
            if not self.inline_stack:  # nested functions are checked on their own too
                library = self.scope.ctx.library  # never checked on its own: it takes no place in the queue
                key = log.queue_key(stmt) if log is not None and not library else None
                self.functions.append((stmt, self.scope, owner, key))
        elif kind is cst.ClassDef:
            self.exec_class(stmt)
        elif kind is cst.If:
            self.exec_if(stmt)
        elif kind is cst.For or kind is cst.While:
            self.exec_loop(stmt)
        elif kind is cst.With:
            self.exec_with(stmt)
        elif kind is cst.Try:
            self.exec_try(stmt)
        elif kind is cst.IndentedBlock:
            self.exec_block(stmt.body)
        elif isinstance(stmt, cst.BaseSmallStatement):
            self.exec_small(stmt, None)

    def exec_try(self, node: cst.Try) -> None:
        """The body (then `else`), or a handler started from a state the body may have reached, joined
        after the statement; `finally` runs on every path.

        An exception can leave the body after any statement: a handler starts from the join of the
        states before and after the body (what the body changed is unknown there). Object attributes
        are not rolled back: a handler sees the body's writes (an approximation)."""
        entry = dict(self.frame.env)
        self.exec_block(_body(node))
        body_ended = self.frame.ended()
        if node.orelse is not None and not body_ended:
            self.exec_block(_body(node.orelse))
            body_ended = self.frame.ended()
        after_body = self.frame.env
        handler_start = {n: _joined(entry, after_body, n, None) for n in set(entry) | set(after_body)}
        ref = self.ctx.site(node)
        merged: dict[str, Value] | None = None if body_ended else after_body
        handlers_ended = []
        for handler in node.handlers:
            self.frame.env = dict(handler_start)
            self.frame.exited = self.frame.jumped = False
            self.exec_block(_body(handler))
            ended = self.frame.ended()
            handlers_ended.append(ended)
            if ended:
                continue
            if merged is None:
                merged = self.frame.env
            else:
                after = self.frame.env
                merged = {n: _joined(merged, after, n, ref) for n in set(merged) | set(after)}
        self.frame.env = merged if merged is not None else after_body
        self.frame.exited = self.frame.jumped = False
        if node.finalbody is not None:
            self.exec_block(_body(node.finalbody))
        if body_ended == "exited" and all(e == "exited" for e in handlers_ended):
            self.frame.exited = True
        elif body_ended and all(handlers_ended):
            self.frame.jumped = True  # every path left by break/continue (or a mix with return/raise)

    def exec_small(self, small: cst.BaseSmallStatement, line: cst.SimpleStatementLine | None) -> None:
        kind = type(small)
        if kind is cst.Expr:
            self.eval(small.value)
        elif kind is cst.Assign:
            value = self.eval(small.value)
            for target in small.targets:
                self.assign(target.target, value, small.value)
        elif kind is cst.AnnAssign:
            declared = calls.annotation_type(self, small.annotation.annotation)
            if small.value is None:
                return  # a declaration binds nothing (a class-level one types the attribute: exec_class)
            value = self.eval(small.value)
            if declared is not None:
                value = calls.check_declared(self, value, declared, small, "SPMD401", "annotated variable")
            self.assign(small.target, value, small.value)
        elif kind is cst.AugAssign:
            self.exec_augassign(small)
        elif kind is cst.Return:
            value = self.eval(small.value) if small.value is not None else NONE
            self.frame.returns.append((value, small))
            self.frame.exited = True
        elif kind is cst.Break or kind is cst.Continue:
            self.frame.jumped = True
        elif kind is cst.Import or kind is cst.ImportFrom:
            self.exec_import(small)
        elif kind is cst.Del:
            pass
        elif kind is cst.Raise:
            if small.exc is not None:
                self.eval(small.exc)
            self.frame.exited = True
        elif kind is cst.Assert:
            self.eval(small.test)
            if small.msg is not None:
                self.eval(small.msg)
            contracts.narrow_config(self, small.test)  # `assert isinstance(cfg, GQAttention.Config)`

    def exec_class(self, node: cst.ClassDef) -> None:
        """A class body runs once, in its own namespace; methods are checked with `self` an instance."""
        bases = tuple(self.eval(arg.value) for arg in node.bases if arg.keyword is None and not arg.star)
        cls = ClassValue(node.name.value, node, self.scope, bases, {}, {})
        saved = self.frame
        cls.outer = saved.owner if saved.function is None else None
        self.frame = Frame({}, saved.globals if saved.function is None else saved.globals, owner=cls)
        # names of the enclosing scope stay visible while the class body runs (they are globals there)
        if saved.function is not None:
            self.frame.globals = {**saved.globals, **saved.env}
        try:
            for item in _body(node):
                if isinstance(item, cst.SimpleStatementLine):
                    for small in item.body:
                        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                            declared = calls.annotation_type(self, small.annotation.annotation)
                            if declared:
                                cls.declared[small.target.value] = declared
                self.exec_stmt(item)
            cls.namespace.update(self.frame.env)
        finally:
            self.frame = saved
        contracts.attach_from_body(self, cls)
        self.frame.env[node.name.value] = cls

    def exec_import(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                dotted = self.ctx.text_of(alias.name)
                if alias.asname is not None:
                    local = self.ctx.text_of(alias.asname.name)
                    self.frame.env[local] = self._module_named(dotted)
                    self._note_spmd_alias(dotted, local)
                else:
                    head = dotted.split(".")[0]
                    self.frame.env[head] = self._module_named(head)
            return
        if isinstance(node.names, cst.ImportStar):
            return
        level = len(node.relative)
        written = self.ctx.text_of(node.module) if node.module is not None else None
        module = resolve_import(self.ctx.module_file, written, level) if self.ctx.module_file else written
        if level and module is None:
            module = None  # beyond the top-level package, or a relative import in a lone file
        for alias in node.names:
            name = self.ctx.text_of(alias.name)
            local = self.ctx.text_of(alias.asname.name) if alias.asname else name
            if module is None:
                self.frame.env[local] = UNKNOWN
                continue
            self.frame.env[local] = self._imported(module, name, relative=level > 0)
            self._note_spmd_alias(f"{module}.{name}", local)

    def _module_named(self, dotted: str) -> Value:
        kind = self.importer.kind(dotted) if self.importer is not None else None
        if kind == "checked" and not self._deferred(dotted):
            self.importer.load(dotted)  # type: ignore[union-attr]
        return ModuleValue(dotted) if kind is not None else ModuleRef(dotted)

    def _imported(self, module: str, name: str, relative: bool) -> Value:
        """`from module import name`: a checked module's own value, a checked submodule, or a qualified name.

        Names from a library module stay lazy (see LazyImport): most are never called with typed values.
        """
        kind = self.importer.kind(module) if self.importer is not None else None
        if kind == "library":
            return LazyImport(module, name)
        if kind == "checked":
            return PendingImport(module, name) if self._deferred(module) else self.module_attribute(module, name)
        sub = self.importer.kind(f"{module}.{name}") if self.importer is not None else None
        if sub is not None:
            return self._module_named(f"{module}.{name}")
        return UNKNOWN if relative else ModuleRef(f"{module}.{name}")

    def _deferred(self, module: str) -> bool:
        """Whether a module imported here may run later, when a name of it is read (see `defer_imports`): at a
        module's top level (not in a class body: a class's namespace is not the module's)."""
        frame = self.frame
        return (
            self.defer_imports
            and frame.function is None
            and frame.env is frame.globals
            and self.importer.deferrable(self.ctx.module_file.name if self.ctx.module_file else "", module)  # type: ignore[union-attr]
        )

    def settle(self, value: Value) -> Value:
        """The value a PendingImport stands for (its module runs now if it has not); any other value as is."""
        if type(value) is PendingImport:
            return self.module_attribute(value.module, value.name)
        return value

    def settle_bound(self, stmt: cst.CSTNode) -> None:
        """Before a top-level statement runs: the names it may bind hold no PendingImport, so a join of its
        branches, a loop's fixed point or a write keyed on the old value sees what an eager import bound."""
        env = self.frame.env
        for name in bound_names(stmt):
            if type(env.get(name)) is PendingImport:
                env[name] = self.settle(env[name])

    def module_attribute(self, module: str, name: str) -> Value:
        if self.log is not None:
            self.log.read(name)
        scope = self.importer.load(module) if self.importer is not None else None
        if scope is not None and name in scope.globals:
            return self.resolve_lazy(self.settle(scope.globals[name]))
        if self.importer is not None and self.importer.kind(f"{module}.{name}") is not None:
            return self._module_named(f"{module}.{name}")
        return UNKNOWN  # a module without that name (or still running: an import cycle)

    def resolve_lazy(self, value: Value) -> Value:
        """A name imported from a library module: load the library now that the value is needed."""
        if not isinstance(value, LazyImport):
            return value  # nearly every value: no loop to set up
        for _ in range(8):  # re-exports of re-exports
            if not isinstance(value, LazyImport):
                return value
            value = self.module_attribute(value.module, value.name)
        return UNKNOWN

    def _note_spmd_alias(self, qualname: str, local: str) -> None:
        ctx = self.ctx
        if self.spelling_undo is not None:  # an import inside a function: its spelling ends with the root
            self.spelling_undo.append((ctx, ctx.spmd_alias, dict(ctx.megatron_names)))
        if qualname == "spmd_types":
            ctx.spmd_alias = local
        elif qualname.startswith("megatron."):
            ctx.megatron_names[ctx.registry.resolve_alias(qualname)] = local

    def exec_augassign(self, node: cst.AugAssign) -> None:
        target = self.eval(node.target)
        value = self.eval(node.value)
        dunder = _AUGOP_DUNDER.get(type(node.operator))
        if isinstance(target, (TensorValue, Alternatives)) and dunder is not None:
            result = calls.call_method(
                self, target, f"{TENSOR}.{dunder}", [(None, value, node.value)], node, receiver_node=node.target
            )
        elif isinstance(value, (TensorValue, Alternatives)) and dunder is not None:
            plain = dunder.replace("__i", "__r", 1)
            result = calls.call_method(
                self, value, f"{TENSOR}.{plain}", [(None, target, node.target)], node, receiver_node=node.value
            )
        else:
            result = UNKNOWN
        self.assign(node.target, result, node.value)

    def exec_if(self, node: cst.If) -> None:
        if self.frame.top and is_main_guard(node.test):
            self._defer_main(node)
            return
        test = self.eval(node.test)
        self._exec_if(node, test)
        self.last_test = test

    def _defer_main(self, node: cst.If) -> None:
        """`if __name__ == "__main__":` at a module's top level: what runs when the file is the script, after its
        top level, never when another module imports it. Its block is checked as a root of its own after the top
        levels (`analyze_main`), on a copy of the module's names; its `else` is what an import runs."""
        library = self.scope.ctx.library  # a library is never the script: its block never runs
        if not library:
            log = self.log
            self.functions.append((node, self.scope, None, log.queue_key(node) if log is not None else None))
        if isinstance(node.orelse, cst.If):
            self.exec_if(node.orelse)
        elif node.orelse is not None:
            self.exec_block(_body(node.orelse))

    def _exec_if(self, node: cst.If, test: Value) -> None:
        if isinstance(test, Literal) and (self.inline_stack or isinstance(test, Assumed)):
            # In a call with known arguments a constant condition picks its branch (a `reduce_results=True`
            # default selects the reduction). Functions checked on their own keep both branches: there a
            # module constant stands for a setting that may change.
            taken = node.body if test.value else node.orelse
            if isinstance(taken, cst.If):
                self.exec_if(taken)
            elif taken is not None:
                self.exec_block(_body(taken))
            return
        ref = self.ctx.site(node)
        before = dict(self.frame.env)
        start = len(self.collectives)
        ranked = int(isinstance(test, RankValue))
        self.rank_branches += ranked
        try:
            self._exec_arms(node, test, ref, before, start)
        finally:
            self.rank_branches -= ranked

    def set_attr(self, owner: InstanceValue, name: str, value: Value | None) -> None:
        """Write an object's attribute (None: remove it), logged for the `if` arms being run."""
        for log in self.attr_logs:
            log.append((owner, name, owner.attrs.get(name)))
        self.remember_attr(owner, name)
        _put_attr(owner, name, value)

    def remember_attr(self, owner: InstanceValue, name: str) -> None:
        """Before a write to an object another check made (or the top level): its old value, restored when
        the running check ends, so no check sees what another wrote (see `check_functions`)."""
        if self.attr_undo is not None and owner.born != Generation.current:
            self.attr_undo.append((owner, name, owner.attrs.get(name, _ABSENT)))
        elif self.log is not None and Generation.current < 0 and owner.born != Generation.current:
            self.log.top_wrote(owner.born)  # a top level writing to what another module's top level made

    def _attr_writes(self) -> _AttrWriteLog:
        """The attribute writes made within the block (each with the value it replaced)."""
        return _AttrWriteLog(self.attr_logs)

    def _exec_arms(self, node: cst.If, test: Value, ref: int, before: dict[str, Value], start: int) -> None:
        with self._attr_writes() as if_writes:
            self.exec_block(_body(node))
        in_if = self.collectives[start:]
        after_if, if_ended = self.frame.env, self.frame.ended()
        attrs_after_if = {(id(o), n): o.attrs.get(n) for o, n, _ in if_writes}
        for owner, name, previous in reversed(if_writes):  # the else arm starts from the objects before the `if`
            _put_attr(owner, name, previous)
        self.frame.env = dict(before)
        self.frame.exited = self.frame.jumped = False
        middle = len(self.collectives)
        with self._attr_writes() as else_writes:
            if node.orelse is not None:
                if isinstance(node.orelse, cst.If):
                    self.exec_if(node.orelse)
                else:
                    self.exec_block(_body(node.orelse))
        self._join_attrs(if_writes, attrs_after_if, else_writes, ref)
        in_else = self.collectives[middle:]
        if isinstance(test, RankValue):
            self._check_rank_branch(node, test, in_if, in_else)
        after_else, else_ended = self.frame.env, self.frame.ended()
        if if_ended and else_ended:
            # nothing after the `if` runs on either path (return/raise, or break/continue in a loop)
            self.frame.exited = if_ended == "exited" and else_ended == "exited"
            self.frame.jumped = not self.frame.exited
            return
        self.frame.exited = self.frame.jumped = False
        if if_ended or else_ended:
            # only the arm that falls through reaches the code after the `if`
            self.frame.env = after_else if if_ended else after_if
            return
        if isinstance(test, RankValue):
            self.rank_specific = (node, self._rank_specific_tensors(test, after_if, after_else))
        merged: dict[str, Value] = {}
        for name in set(after_if) | set(after_else):
            a, b = after_if.get(name, UNKNOWN), after_else.get(name, UNKNOWN)
            if a is b:
                merged[name] = a  # what `join` gives (most names: neither arm wrote them)
            elif isinstance(test, RankValue) and a != b and _plain(a) and _plain(b):
                # set differently on the two sides of a rank-dependent condition: the number now
                # differs across ranks as the condition does (`if last_rank: n -= 1`, then `range(n)`)
                merged[name] = test
            else:
                merged[name] = join(a, b, ref)
        self.frame.env = merged

    def _join_attrs(
        self,
        if_writes: list[tuple[InstanceValue, str, Value | None]],
        after_if: dict[tuple[int, str], Value | None],
        else_writes: list[tuple[InstanceValue, str, Value | None]],
        ref: int,
        widen: Callable[[Value], Value] | None = None,
        made_after: int | None = None,
    ) -> bool:
        """Each attribute an arm wrote: the join of its values after the two arms (the current values
        are the second arm's). An arm that ended (return/raise) is joined too: its writes may reach a
        caller, and a join only loses precision. Whether any attribute now differs from before."""
        before: dict[tuple[int, str], tuple[InstanceValue, str, Value | None]] = {}
        for owner, name, previous in if_writes + else_writes:
            before.setdefault((id(owner), name), (owner, name, previous))
        changed = False
        for key, (owner, name, previous) in before.items():
            a = after_if.get(key, previous)
            b = owner.attrs.get(name)
            # an attribute set on one path only: unknown after the `if` (reading it may fail on the other)
            merged = b if a is b else join(a, b, ref) if a is not None and b is not None else UNKNOWN
            if widen is not None and merged is not None:
                merged = widen(merged)
            if merged is not b:
                self.set_attr(owner, name, merged)
            if merged != previous and (made_after is None or owner.made < made_after):
                changed = True
        return changed

    def _rank_specific_tensors(self, test: RankValue, after_if: dict, after_else: dict) -> list[str]:
        """(preview, SPMD502) Tensors computed differently on the two sides of a rank-dependent `if`.

        A membership guard (`rank in ranks_of(g)`) is left alone: whether a rank belongs to a group is
        not a computation that differs between the ranks running it."""
        if test.invariant:
            return []
        names = []
        for name in sorted(set(after_if) | set(after_else)):
            a, b = after_if.get(name, UNKNOWN), after_else.get(name, UNKNOWN)
            if a is not b and (_is_tensor(a) or _is_tensor(b)) and "." not in name:
                names.append(name)
        return names

    def _report_rank_specific(
        self, node: cst.If | cst.For | cst.While, names: list[str], rest: Sequence[cst.CSTNode]
    ) -> None:
        """Only a tensor used after the `if` continues into the computation: logging and saving inside the
        branch (the rank-0 patterns compiled programs keep) end there."""
        used = _names_used(rest)
        live = [n for n in names if n in used]
        if not live:
            return
        site = self.ctx.site(node)
        what = "loop count" if isinstance(node, (cst.For, cst.While)) else "condition"
        self.report(
            Finding(
                "SPMD502",
                node.iter if isinstance(node, cst.For) else node.test,
                f"`{live[0]}` is computed differently depending on the rank-dependent {what} at "
                f"{{site:{site}}} and used after it: a program compiled once and run on every rank would "
                + (
                    "run the loop the same number of times on every rank"
                    if what == "loop count"
                    else "give some ranks the other branch's computation"
                ),
            )
        )

    def _check_rank_branch(self, node: cst.If, test: RankValue, in_if: list, in_else: list) -> None:
        """Collectives must be called by every rank of their group: a rank-dependent branch may not differ.

        Only collectives whose group the condition splits count: a condition on the tp rank is the same
        on every rank of a dp group, and `rank in ranks_of(g)` is the same on every member of g.
        """
        in_if = [c for c in in_if if test.diverges_along(c[1])]
        in_else = [c for c in in_else if test.diverges_along(c[1])]
        if_keys = [(api, axis) for api, axis, _ in in_if]
        else_keys = [(api, axis) for api, axis, _ in in_else]
        if if_keys == else_keys:
            return
        only_if = [c for c in in_if if (c[0], c[1]) not in else_keys]
        only_else = [c for c in in_else if (c[0], c[1]) not in if_keys]
        if only_if or only_else:
            (api, axis, call), arm = (only_if[0], "true") if only_if else (only_else[0], "false")
        else:  # the same collectives in another order
            (api, axis, call), arm = in_if[0], "true"
        where = f"on axis {axis!r} " if axis else ""
        site = self.ctx.site(node)
        self.report(
            Finding(
                "SPMD501",
                call,
                f"`{api}` {where}runs only on the ranks where the rank-dependent condition at {{site:{site}}} is "
                f"{arm}: the other ranks never join it (or join another collective), and the program hangs",
            )
        )

    def exec_loop(self, node: cst.For | cst.While) -> None:
        if isinstance(node, cst.For):
            iterable = self.eval(node.iter)
            item = iterable if isinstance(iterable, RankValue) else _element_of(iterable)
            bound = iterable
        else:
            bound = self.eval(node.test)
            item = UNKNOWN
        depth = len(self.divergent)
        if isinstance(bound, RankValue):
            self.divergent.append((bound, node))  # a rank-dependent trip count
        entry = dict(self.frame.env)
        try:
            self._exec_loop(node, item)
        finally:
            del self.divergent[depth:]
        if isinstance(bound, RankValue) and not bound.invariant:
            # (preview, SPMD502) tensors the loop body writes went through it a rank-dependent number of times
            written = _names_written(_body(node))
            names = [n for n in sorted(written) if _is_tensor(self.frame.env.get(n, entry.get(n, UNKNOWN)))]
            self.rank_specific = (node, names)

    def _exec_loop(self, node: cst.For | cst.While, item: Value) -> None:
        ref = self.ctx.site(node)
        # Iterate to a fixed point (bounded): a loop body may run zero or more times.
        for pass_number in range(4):
            before = dict(self.frame.env)
            first_collective = len(self.collectives)
            mark = made_mark()
            if isinstance(node, cst.For):
                self.assign(node.target, item, None)
            with self._attr_writes() as writes:
                self.exec_block(_body(node))
            if self.frame.exited:  # the body returned: after the loop is the path where it did not
                self.frame.env = before
            self.frame.exited = self.frame.jumped = False
            after = self.frame.env
            merged = {n: _loop_widen(_joined(before, after, n, ref)) for n in set(before) | set(after)}
            self.frame.env = merged
            # the objects the body wrote: their attributes joined with the values before this pass (an object
            # the pass made is new in every pass: the next pass reaches it only through what is compared)
            attrs_changed = self._join_attrs([], {}, writes, ref, _loop_widen, made_after=mark)
            if attrs_changed:
                continue
            if merged == before:
                break
            if pass_number == 0 and self._repeats(node, before, merged):
                # the second pass the loop would run reads what this one read: it would repeat it (its
                # collectives are counted twice, as that pass would call them again: `_check_rank_branch`)
                self.collectives.extend(self.collectives[first_collective:])
                break
        if node.orelse is not None:
            self.exec_block(_body(node.orelse))

    def _repeats(self, node: cst.For | cst.While, before: dict[str, Value], merged: dict[str, Value]) -> bool:
        """Whether another pass of a loop body that ran once from `before` would run as that pass did: every
        name whose value the pass changed is written before it is read (loopreads.py). Only in a function:
        at a module's top level, the functions the body calls read its variables as globals."""
        if self.frame.function is None:
            return False
        key = id(node)
        cached = self._exposed.get(key)
        if cached is None or cached[0] is not node:
            cached = self._exposed[key] = (node, exposed_reads(node))
        exposed = cached[1]
        if exposed is None:
            return False
        return not any(name in exposed for name, value in merged.items() if before.get(name, _ABSENT) != value)

    def exec_with(self, node: cst.With) -> None:
        saved = (self.grad_enabled, self.mesh, self.checking)
        for item in node.items:
            value = self.eval(item.item)
            if isinstance(value, ContextValue):
                self._enter_context(value)
            if item.asname is not None:
                self.assign(item.asname.name, value.payload if isinstance(value, ContextValue) else UNKNOWN, None)
        try:
            if not self.checking:
                self._bind_untyped(node)
            else:
                self.exec_block(_body(node))
        finally:
            self.grad_enabled, self.mesh, self.checking = saved

    def _enter_context(self, value: ContextValue) -> None:
        if value.kind == "no_grad":
            self.grad_enabled = False
        elif value.kind == "enable_grad":
            self.grad_enabled = True
        elif value.kind == "mesh" and isinstance(value.payload, MeshValue):
            self.mesh = value.payload.axes
            if self.log is not None and not self.ctx.known_axes.issuperset(value.payload.axes):
                # axis names valid in the file from now on, for every later root
                self.log.wrote_shared(("axes", self.ctx.path, " ".join(sorted(value.payload.axes))))
            self.ctx.known_axes.update(value.payload.axes)
        elif value.kind == "no_typecheck":
            self.checking = False

    def _bind_untyped(self, node: cst.CSTNode) -> None:
        """Inside no_typecheck: what is assigned there is untyped (spmd_types stamps no type on it)."""
        for child in _walk_statements(node):
            if isinstance(child, cst.Assign):
                for target in child.targets:
                    self.assign(target.target, UNTYPED, None)
            elif isinstance(child, (cst.AnnAssign, cst.AugAssign)):
                self.assign(child.target, UNTYPED, None)

    # ------------------------------------------------------------ assignment
    def assign(self, target: cst.BaseExpression, value: Value, value_node: cst.CSTNode | None) -> None:
        kind = type(target)
        if kind is cst.Name:
            self.frame.env[target.value] = value
            self.frame.rebound.add(target.value)
            self.ctx.bound(target.value, value, target)
        elif kind is cst.Tuple or kind is cst.List:
            star = next((i for i, e in enumerate(target.elements) if type(e) is cst.StarredElement), None)
            items = _unpack(value, len(target.elements), star)
            for element, item in zip(target.elements, items):
                inner = element.value
                if type(element) is cst.StarredElement:
                    self.assign(inner, UNKNOWN, None)
                else:
                    self.assign(inner, item, None)
        elif kind is cst.Subscript:
            calls.setitem(self, target, value, value_node)
        elif kind is cst.Attribute:
            owner = self.eval(target.value)
            contracts.attach(self, owner, target.attr.value, value)
            if isinstance(owner, InstanceValue):
                declared = owner.cls.declared_type(target.attr.value)
                if declared and value_node is not None:
                    value = calls.check_declared(self, value, declared, value_node, "SPMD401", "annotated attribute")
                self.set_attr(owner, target.attr.value, value)
                if self.ctx.observed:  # the binding's name is the target's source text: made only when watched
                    self.ctx.bound(self.ctx.code_of(target), value, target)
                return
            key = attr_path(target)
            if key is not None:
                self.frame.env[key] = value
                self.ctx.bound(key, value, target)

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
                key = _target_key(node)
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
                self.call_sites and name not in self.frame.rebound and _is_param(self.frame.function, name)
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

    def _object_of(self, node: cst.BaseExpression) -> Value:
        """What a name or attribute chain denotes, without evaluating anything that could act."""
        if isinstance(node, cst.Name):
            return self.lookup(node.value)
        if isinstance(node, cst.Attribute):
            return self.object_attribute(self._object_of(node.value), node.attr.value)
        return UNKNOWN

    # ------------------------------------------------------------ expressions
    def eval(self, node: cst.BaseExpression) -> Value:
        kind = type(node)
        try:
            method = _EVALUATORS[kind]
        except KeyError:
            method = _EVALUATORS[kind] = getattr(Interpreter, "eval_" + kind.__name__, None)
        if method is None:
            for child in node.children:
                if isinstance(child, cst.BaseExpression):
                    self.eval(child)
            return UNKNOWN
        return method(self, node)

    def lookup(self, name: str) -> Value:
        frame = self.frame
        value = frame.env.get(name, _ABSENT)
        if value is _ABSENT:
            value = frame.globals.get(name, _ABSENT)
            if self.log is not None:
                self.log.read(name)
        elif frame.function is None and self.log is not None:
            self.log.read(name)  # a module's top level (or a class body in it): its variables are module names
        if type(value) is PendingImport:
            return self.settle(value)
        return _BUILTINS.get(name, UNKNOWN) if value is _ABSENT else value  # type: ignore[return-value]

    def eval_Name(self, node: cst.Name) -> Value:
        value = self.lookup(node.value)
        if isinstance(value, (ModuleRef, LazyImport)):  # the only values `resolve_ref`/`resolve_lazy` change
            return self.resolve_lazy(self.resolve_ref(value))
        return value

    def eval_callee(self, node: cst.BaseExpression) -> Value:
        """The function of a call: a library name stays lazy (the call decides whether to follow it)."""
        kind = type(node)
        if kind is cst.Name:
            return self.resolve_ref(self.lookup(node.value))
        if kind is cst.Attribute:
            base = self.eval(node.value)
            if isinstance(base, ModuleValue):
                return self.object_attribute(base, node.attr.value)
        return self.eval(node)

    def resolve_ref(self, value: Value) -> Value:
        """A module attribute that names a type constant is that type; one naming a @model, the model."""
        if isinstance(value, ModuleRef):
            rule = self.ctx.registry.lookup(value.qualname)
            if rule is not None and rule.model_path is not None:
                return self.model_of(rule)
            if rule is not None and rule.const_type is not None:
                from spmdcheck.rules.typespec import parse_axis_type

                return TypeValue(parse_axis_type(rule.const_type))
            if rule is not None and rule.const_str is not None:
                return Literal(rule.const_str)  # a stub's string constant: an enum member naming an axis
        return value

    def eval_Attribute(self, node: cst.Attribute) -> Value:
        key = attr_path(node)
        if key is not None and key in self.frame.env:
            return self.frame.env[key]
        base = self.eval(node.value)
        attr = node.attr.value
        if isinstance(base, (ModuleValue, InstanceValue, ClassValue)):
            return self.resolve_lazy(self.object_attribute(base, attr))
        if isinstance(base, SuperValue):
            found = base.cls.lookup(attr, after=base.cls) if isinstance(base.cls, ClassValue) else None
            if isinstance(found, FunctionValue):
                return MethodValue(found, base.receiver)
            return UNKNOWN
        if isinstance(base, ModuleRef):
            return self.resolve_ref(ModuleRef(f"{base.qualname}.{attr}"))
        if isinstance(base, (TensorValue, Alternatives)):
            qual = f"{TENSOR}.{attr}"
            rule = self.ctx.registry.lookup(qual)
            if rule is not None and rule.is_property:
                return calls.call_method(self, base, qual, [], node, receiver_node=node.value)
            if rule is not None and rule.returns is Returns.VALUE and rule.passthrough and not rule.params:
                return UNKNOWN
            return BoundMethod(base, qual)
        if isinstance(base, MeshValue):
            return BoundMethod(base, f"torch.distributed.device_mesh.DeviceMesh.{attr}")
        if isinstance(base, (ContractValue, LayoutValue)):
            return contracts.field(base, attr)
        if isinstance(base, DictValue) and attr in ("values", "items", "keys"):
            return BoundMethod(base, f"builtins.dict.{attr}")
        return UNKNOWN

    def object_attribute(self, base: Value, attr: str) -> Value:
        """An attribute of a checked module, class or object (no side effects: safe to call anywhere)."""
        if isinstance(base, ModuleValue):
            if self.importer is not None and self.importer.kind(base.name) == "library":
                return LazyImport(base.name, attr)
            return self.module_attribute(base.name, attr)
        if isinstance(base, InstanceValue):
            if attr in base.attrs:
                return base.attrs[attr]
            typed_field = contracts.config_field(self, base, attr)  # `cfg.w1` typed `w1: Linear.Config`
            if typed_field is not None:
                return typed_field
            found = base.cls.lookup(attr)
            if isinstance(found, FunctionValue):
                return MethodValue(found, base) if calls.takes_self(found.node) else found
            if found is not None:
                return found
            declared = base.cls.declared_type(attr)
            if declared:
                return TensorValue(SpmdType(declared), GradState.UNKNOWN, None)
            return UNKNOWN
        if isinstance(base, ClassValue):
            found = base.lookup(attr)
            if found is None and attr == "apply":
                # spmd_types' typecheck_forward, when the class has one, is the typed signature of `apply`
                # (not re-entered from its own body); otherwise `Fn.apply(x)` runs forward, `ctx` unknown.
                # Inside typecheck_forward, its `Cls.apply(...)` runs forward on the asserted inputs, and what
                # typecheck_forward then asserts on the result checks forward's output.
                hook = spmd_api.autograd_apply(base, [self.frame.function, *self.inline_stack])
                if hook is not UNKNOWN:
                    return hook
                forward = base.lookup("forward")
                if isinstance(forward, FunctionValue) and base.lookup("typecheck_forward") is not None:
                    return TrustedForward(MethodValue(forward, UNKNOWN))
                if isinstance(forward, FunctionValue):
                    return MethodValue(forward, UNKNOWN)
            return found if found is not None else UNKNOWN
        return UNKNOWN

    def eval_Call(self, node: cst.Call) -> Value:
        func = self.eval_callee(node.func)
        args: list[tuple[str | None, Value, cst.BaseExpression]] = []
        for arg in node.args:
            value = self.eval(arg.value)
            if arg.star == "*":
                if isinstance(value, Seq):
                    args.extend((None, item, arg.value) for item in value.items)
                else:
                    args.append(("*", value, arg.value))
                continue
            if arg.star == "**":
                # `f(**{"x": x})`: a dict with constant string keys is keyword arguments
                if isinstance(value, DictValue):
                    args.extend(
                        (key.value, item, key_node)
                        for key, item, key_node in value.items
                        if isinstance(key, Literal) and isinstance(key.value, str)
                    )
                continue
            args.append((arg.keyword.value if arg.keyword is not None else None, value, arg.value))
        return calls.dispatch(self, func, args, node)

    def eval_BinaryOperation(self, node: cst.BinaryOperation) -> Value:
        left = self.eval(node.left)
        right = self.eval(node.right)
        dunder = _BINOP_DUNDER.get(type(node.operator))
        if dunder is None:
            return UNKNOWN
        if isinstance(left, (TensorValue, Alternatives)):
            return calls.call_method(
                self, left, f"{TENSOR}.{dunder}", [(None, right, node.right)], node, receiver_node=node.left
            )
        if isinstance(right, (TensorValue, Alternatives)):
            rdunder = "__r" + dunder[2:]
            return calls.call_method(
                self, right, f"{TENSOR}.{rdunder}", [(None, left, node.left)], node, receiver_node=node.right
            )
        return calls.python_arith(left, right, dunder)

    def eval_UnaryOperation(self, node: cst.UnaryOperation) -> Value:
        operand = self.eval(node.expression)
        if isinstance(node.operator, cst.Not) and isinstance(operand, Literal):
            return type(operand)(not operand.value)
        if isinstance(node.operator, cst.Minus) and isinstance(operand, (TensorValue, Alternatives)):
            return calls.call_method(self, operand, f"{TENSOR}.__neg__", [], node, receiver_node=node.expression)
        if (
            isinstance(node.operator, cst.Minus)
            and isinstance(operand, Literal)
            and isinstance(operand.value, (int, float))
        ):
            return Literal(-operand.value)
        if isinstance(operand, RankValue):
            return operand
        if isinstance(operand, (TensorValue, Alternatives)) and isinstance(node.operator, cst.BitInvert):
            return calls.call_method(self, operand, f"{TENSOR}.__invert__", [], node, receiver_node=node.expression)
        return UNKNOWN

    def eval_Comparison(self, node: cst.Comparison) -> Value:
        left = self.eval(node.left)
        result: Value = left if isinstance(left, RankValue) else UNKNOWN
        for target in node.comparisons:
            right = self.eval(target.comparator)
            operator = type(target.operator)
            dunder = _CMP_DUNDER.get(operator)
            membership = operator is cst.In or operator is cst.NotIn
            if (
                membership
                and not isinstance(right, MembersValue)
                and (isinstance(left, RankValue) or isinstance(right, RankValue))
            ):
                # `rank in some_ranks`: a membership test whose relation to any group is unknown: silent
                result = RankValue(frozenset())
            elif isinstance(right, MembersValue) and membership:
                # `rank in ranks_of(g)`: the same answer on every member of g (Megatron's membership guard);
                # a group we cannot name leaves the relation unknown, and unknown is silent
                result = RankValue(None, frozenset({right.axis})) if right.axis is not None else RankValue(frozenset())
            elif isinstance(right, RankValue):
                result = right.combine(result) if isinstance(result, RankValue) else right
            elif isinstance(left, Literal) and isinstance(right, Literal) and len(node.comparisons) == 1:
                result = _fold_comparison(target.operator, left.value, right.value)
                if isinstance(result, Literal) and (isinstance(left, Assumed) or isinstance(right, Assumed)):
                    result = Assumed(result.value)
            if dunder and isinstance(left, (TensorValue, Alternatives)):
                result = calls.call_method(
                    self, left, f"{TENSOR}.{dunder}", [(None, right, target.comparator)], node, receiver_node=node.left
                )
            left = right
        return result

    def eval_BooleanOperation(self, node: cst.BooleanOperation) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(left, Literal) and isinstance(right, Literal):
            if isinstance(node.operator, cst.And):
                return left if not left.value else right
            return left if left.value else right
        if isinstance(left, Assumed) and bool(left.value) is not isinstance(node.operator, cst.And):
            return left  # `False and x`, `True or x`: decided by the assumed constant
        if isinstance(left, RankValue):
            return left.combine(right)
        return right if isinstance(right, RankValue) else UNKNOWN

    def eval_IfExp(self, node: cst.IfExp) -> Value:
        test = self.eval(node.test)
        if isinstance(test, Literal) and self.inline_stack:
            return self.eval(node.body if test.value else node.orelse)
        return join(self.eval(node.body), self.eval(node.orelse), self.ctx.site(node))

    def eval_Subscript(self, node: cst.Subscript) -> Value:
        base = self.eval(node.value)
        return calls.getitem(self, base, node)

    def eval_Integer(self, node: cst.Integer) -> Value:
        try:
            return Literal(int(node.value.replace("_", ""), 0))
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            return UNKNOWN

    def eval_Float(self, node: cst.Float) -> Value:
        try:
            return Literal(float(node.value.replace("_", "")))
        except ValueError:
            return UNKNOWN

    def eval_Imaginary(self, node: cst.Imaginary) -> Value:
        return Literal(complex(node.value.replace("_", "")))

    def eval_SimpleString(self, node: cst.SimpleString) -> Value:
        value = string_value(node)
        return Literal(value) if value is not None else UNKNOWN

    def eval_ConcatenatedString(self, node: cst.ConcatenatedString) -> Value:
        value = string_value(node)
        return Literal(value) if value is not None else UNKNOWN

    def eval_FormattedString(self, node: cst.FormattedString) -> Value:
        for part in node.parts:
            if isinstance(part, cst.FormattedStringExpression):
                self.eval(part.expression)
        return UNKNOWN

    def eval_Ellipsis(self, node: cst.Ellipsis) -> Value:
        return Literal(...)

    def eval_Tuple(self, node: cst.Tuple) -> Value:
        return Seq(tuple(self._element(e) for e in node.elements))

    def eval_List(self, node: cst.List) -> Value:
        return Seq(tuple(self._element(e) for e in node.elements), is_list=True)

    def _element(self, element: cst.BaseElement) -> Value:
        value = self.eval(element.value)
        return UNKNOWN if type(element) is cst.StarredElement else value

    def eval_Dict(self, node: cst.Dict) -> Value:
        items = []
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                items.append((self.eval(element.key), self.eval(element.value), element.key))
            else:
                self.eval(element.value)
                return UNKNOWN
        return DictValue(tuple(items))

    def eval_Lambda(self, node: cst.Lambda) -> Value:
        return UNKNOWN

    def eval_ListComp(self, node: cst.ListComp) -> Value:
        return self._comprehension(node)

    def eval_GeneratorExp(self, node: cst.GeneratorExp) -> Value:
        return self._comprehension(node)

    def eval_SetComp(self, node: cst.SetComp) -> Value:
        self._comprehension(node)
        return UNKNOWN

    def _comprehension(self, node: cst.ListComp | cst.GeneratorExp | cst.SetComp) -> Value:
        """The element once, its loop variables bound to an element of each iterable: a list of such items.

        The loop variables do not leak (Python 3 scoping); what the element does to objects stays.
        """
        saved = self.frame.env
        self.frame.env = dict(saved)
        try:
            clause: cst.CompFor | None = node.for_in
            while clause is not None:
                iterable = self.eval(clause.iter)
                self.assign(clause.target, _element_of(iterable), None)
                for cond in clause.ifs:
                    self.eval(cond.test)
                clause = clause.inner_for_in
            item = self.eval(node.elt)
        finally:
            self.frame.env = saved
        return Homogeneous(item)

    def eval_Await(self, node: cst.Await) -> Value:
        return self.eval(node.expression)

    def eval_NamedExpr(self, node: cst.NamedExpr) -> Value:
        value = self.eval(node.value)
        self.assign(node.target, value, node.value)
        return value

    # ---------------------------------------------------------------- helpers
    def report(self, finding: Finding) -> None:
        if not self.checking:
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
                name = self.inline_stack[i].name.value
                moved = Finding(finding.code, call, f"in library code `{name}`: {finding.message}")
                moved.origin = ctx
                moved.severity = finding.severity
                return moved
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


# A stub's @model module parsed in this process, by path, with the file's size and time: every program of
# a run that meets the model runs it anew (its values belong to that program), but parses it once.
_STUB_MODULES: dict[str, tuple[tuple[int, int], cst.Module]] = {}


def _parsed_stub(path: str) -> cst.Module | None:
    try:
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size)
        cached = _STUB_MODULES.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        with open(path, encoding="utf-8") as fh:
            module = cst.parse_module(fh.read())
    except (OSError, UnicodeDecodeError, cst.ParserSyntaxError):
        return None
    _STUB_MODULES[path] = (stamp, module)
    return module


# node type -> the Interpreter method evaluating it (None: its sub-expressions only), filled on first use
_EVALUATORS: dict[type, Callable[[Interpreter, cst.CSTNode], Value] | None] = {}


class _AttrWriteLog:
    """`with`: a log of the attribute writes made in the block, on the interpreter's stack of logs while it
    runs (a plain class: cheaper than a generator context manager, and entered for every `if` arm)."""

    __slots__ = ("logs", "writes")

    def __init__(self, logs: list[list[tuple[InstanceValue, str, Value | None]]]) -> None:
        self.logs = logs
        self.writes: list[tuple[InstanceValue, str, Value | None]] = []

    def __enter__(self) -> list[tuple[InstanceValue, str, Value | None]]:
        self.logs.append(self.writes)
        return self.writes

    def __exit__(self, *exc: object) -> None:
        self.logs.pop()


_ABSENT = object()  # an attribute an object did not have (attr_undo)


def _put_attr(owner: InstanceValue, name: str, value: Value | None) -> None:
    if value is None:
        owner.attrs.pop(name, None)
    else:
        owner.attrs[name] = value


def is_main_guard(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if type(target.operator) is not cst.Equal:
        return False
    sides = (test.left, target.comparator)
    names = [side for side in sides if type(side) is cst.Name and side.value == "__name__"]
    texts = [side for side in sides if type(side) is cst.SimpleString and string_value(side) == "__main__"]
    return len(names) == 1 and len(texts) == 1


def _body(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    body = getattr(node, "body", None)
    if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        return body.body
    if isinstance(body, (list, tuple)):
        return body
    return ()


def _param_name(fn: cst.FunctionDef, name: str) -> cst.CSTNode:
    params = fn.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    every += [p for p in (params.star_arg, params.star_kwarg) if type(p) is cst.Param]
    return next((p.name for p in every if p.name.value == name), fn.name)


def _walk_statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for stmt in _body(node):
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body
        else:
            yield from _walk_statements(stmt)


_FOLDABLE = {
    cst.Equal: lambda a, b: a == b,
    cst.NotEqual: lambda a, b: a != b,
    cst.Is: lambda a, b: a is b,
    cst.IsNot: lambda a, b: a is not b,
    cst.LessThan: lambda a, b: a < b,
    cst.LessThanEqual: lambda a, b: a <= b,
    cst.GreaterThan: lambda a, b: a > b,
    cst.GreaterThanEqual: lambda a, b: a >= b,
}


def _fold_comparison(op: cst.BaseCompOp, a: object, b: object) -> Value:
    """Two constants compared (`weight is None` with the default None): the answer, to pick a branch."""
    fold = _FOLDABLE.get(type(op))
    if fold is None or not all(isinstance(v, (int, float, str, bool, type(None))) for v in (a, b)):
        return UNKNOWN
    try:
        return Literal(bool(fold(a, b)))
    except TypeError:
        return UNKNOWN


def _names_written(statements: Sequence[cst.CSTNode]) -> set[str]:
    """Names a block assigns, augments or changes in place (`x.mul_(...)`)."""
    names: set[str] = set()

    class _Collect(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, cst.Name):
                names.add(node.target.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name):
                names.add(node.target.value)

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                if func.attr.value.endswith("_") and not func.attr.value.startswith("_"):
                    names.add(func.value.value)

    for stmt in statements:
        stmt.visit(_Collect())
    return names


def _names_used(statements: Sequence[cst.CSTNode]) -> set[str]:
    names: set[str] = set()

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

    for stmt in statements:
        stmt.visit(_Collect())
    return names


def _is_tensor(value: Value) -> bool:
    return isinstance(value, (TensorValue, Alternatives))


def _plain(value: Value) -> bool:
    """A Python value (a number, a flag), not a tensor, object or container the analysis tracks."""
    return isinstance(value, (Literal, Unknown, PyNumber, RankValue))


def _always_exits(block: cst.CSTNode, skips_only: bool = False) -> bool:
    """The block ends in return/raise/continue/break on every path (`skips_only`: not counting raise)."""
    body = _body(block)
    if not body:
        return False
    last = body[-1]
    kinds = (cst.Return, cst.Continue, cst.Break) if skips_only else (cst.Return, cst.Raise, cst.Continue, cst.Break)
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(s, kinds) for s in last.body)
    if isinstance(last, cst.If):
        return (
            last.orelse is not None and _always_exits(last.body, skips_only) and _always_exits(last.orelse, skips_only)
        )
    return False


def _is_param(fn: cst.FunctionDef | None, name: str) -> bool:
    if fn is None:
        return False
    params = fn.params
    return any(p.name.value == name for p in (*params.posonly_params, *params.params, *params.kwonly_params))


def _target_key(node: cst.CSTNode | None) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return attr_path(node)
    return None


def _unpack(value: Value, n: int, star: int | None = None) -> list[Value]:
    """`n` targets from one value; `star`: the position of a starred target (which gets what is left)."""
    if isinstance(value, ShapeValue):
        # `b, s, _ = x.shape`: dims counted from the front before a starred name, from the end after it
        cut = n if star is None else star
        rank = n if star is None else None
        return [DimSize(value.tensor, i if i < cut else i - n, rank) for i in range(n)]
    if isinstance(value, Seq) and len(value.items) == n:
        return list(value.items)
    if isinstance(value, Homogeneous):
        return [value.item] * n
    return [UNKNOWN] * n


def _element_of(value: Value) -> Value:
    if isinstance(value, Homogeneous):
        return value.item
    if isinstance(value, Seq) and value.items:
        first = value.items[0]
        return first if all(item == first for item in value.items) else UNKNOWN
    return UNKNOWN


def _joined(a: dict[str, Value], b: dict[str, Value], name: str, ref: int | None) -> Value:
    """`join` of a name's values in two environments; the value itself when both hold the same object."""
    x, y = a.get(name, UNKNOWN), b.get(name, UNKNOWN)
    return x if x is y else join(x, y, ref)


def _loop_widen(value: Value) -> Value:
    # Alternatives created by a loop's back edge describe iterations, not user branches:
    # keep them bounded by widening to what all iterations agree on.
    if isinstance(value, Alternatives) and len(value.options) > 2:
        from spmdcheck.analysis.values import _widen

        return _widen([t for t, _ in value.options])
    return value


def bound_names(stmt: cst.CSTNode) -> set[str]:
    """The names a statement may bind in the scope it runs in (not those of the functions and classes it
    defines, only their own names)."""
    out: set[str] = set()
    todo: list[cst.CSTNode] = [stmt]
    while todo:
        node = todo.pop()
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            out.add(node.name.value)  # type: ignore[attr-defined]
            continue
        if kind is cst.Lambda:
            continue
        if kind is cst.Name:
            out.add(node.value)  # type: ignore[attr-defined]
            continue  # every name written or read: a superset of the targets (reads are harmless here)
        if kind is cst.ImportAlias:
            alias = node.asname.name if node.asname is not None else node.name  # type: ignore[attr-defined]
            dotted = alias.value if isinstance(alias, cst.Name) else cst.Module([]).code_for_node(alias)
            out.add(dotted.split(".")[0])
            continue
        todo.extend(node.children)
    return out

"""Running modules: a module's top level (once, whoever imports it first), imports (checked modules run,
library names stay lazy), stub @model modules, and the queue of functions checked on their own after the
top levels, each on the state the top level left. A part of the engine."""

from __future__ import annotations

import os

import libcst as cst

from spmdcheck.analysis import autograd_functions, contracts, group_inference, layouts, signature, tp_plans
from spmdcheck.analysis.context import FileContext
from spmdcheck.analysis.frames import Frame, Importer, RunState, Scope
from spmdcheck.analysis.gradients.trigger import steps_optimizer
from spmdcheck.analysis.interp.syntax import block_body, bound_names, param_name
from spmdcheck.analysis.roots import RootLog
from spmdcheck.analysis.values import (
    UNKNOWN,
    ClassValue,
    FunctionValue,
    Generation,
    InstanceValue,
    LazyImport,
    ModuleRef,
    ModuleValue,
    PendingImport,
    RankValue,
    TensorValue,
    Value,
    is_tensor,
    share_objects,
)
from spmdcheck.diagnostics.violations.contracts import ReturnTypeMismatch
from spmdcheck.lattice import GradState, SpmdType
from spmdcheck.program.graph import ModuleFile, resolve_import
from spmdcheck.rules.model import OpRule

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

_ABSENT = object()  # an attribute an object did not have (attr_undo)


class ModuleRunner:
    """Runs modules and the queue of functions (a part of `Interpreter`, interp/engine.py)."""

    # the engine's state this part reads and writes (interp/engine.py `Interpreter.__init__`)
    ctx: FileContext
    frame: Frame
    scope: Scope
    importer: Importer | None
    log: RootLog | None
    run: RunState
    mesh: tuple[str, ...]
    grad_enabled: bool
    checking: bool
    inline_stack: list[cst.FunctionDef]
    call_sites: list[tuple[FileContext, cst.CSTNode]]
    collectives: list[tuple[str, str | None, cst.CSTNode]]
    effects: list[tuple[cst.CSTNode | None, Value]] | None
    divergent: list[tuple[RankValue, cst.CSTNode]]
    last_test: Value
    rank_branches: int
    attr_logs: list[list[tuple[InstanceValue, str, Value | None]]]
    rank_specific: tuple[cst.CSTNode, list[str]] | None
    models: dict[str, Scope | None]
    spelling_undo: list[tuple[FileContext, str, dict[str, str]]] | None
    attr_undo: list[tuple[InstanceValue, str, object]] | None
    defer_imports: bool

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
        group_inference.bind_group_globals(self.scope, self.mesh)
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
            group_inference.bind_group_globals(scope, self.mesh)
        finally:
            for name, value in saved.items():
                setattr(self, name, value)

    def model_of(self, rule: OpRule) -> Value:
        """A @model class or function of a stub: its stub module runs once (as a library), then its value."""
        assert rule.model_path is not None
        scope = self.models.get(rule.model_path)
        if scope is None:
            scope = self.models[rule.model_path] = self._load_model_module(rule)
        if scope is None:
            return UNKNOWN
        return scope.globals.get(rule.qualname.rsplit(".", 1)[-1], UNKNOWN)

    def _load_model_module(self, rule: OpRule) -> Scope | None:
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
        queue = self.run.queue
        while queue:
            fn, scope, owner, key = queue.pop(0)
            if scope.ctx.library:  # a library's functions are only followed from calls
                continue
            if log is not None:
                key = log.root_key(fn, key)
                if not log.wants(key):
                    if log.skipped(key):
                        self.run.checked.add(id(fn))  # as checked as it was: a contract re-queues it alike
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
                elif owner is not None and autograd_functions.runs_without_grad(owner, fn.name.value):
                    self._analyze_without_history(fn, scope, owner)
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

    def _analyze_without_history(self, fn: cst.FunctionDef, scope: Scope, owner: ClassValue) -> None:
        """An autograd Function's forward or backward checked on its own: PyTorch runs it without recording
        history, so a raw collective in it cuts none (no SPMD306, as when it is reached through `.apply`)."""
        mark = self.ctx.program.checkpoint()
        self.analyze_function(fn, scope, owner)
        for finding in self.ctx.program.withdraw(mark):
            if not autograd_functions.cuts_history(finding):
                self.ctx.report(finding)

    def analyze_function(self, fn: cst.FunctionDef, scope: Scope, owner: ClassValue | None = None) -> None:
        """Check a function body on its own, its parameters typed by their annotations."""
        entered_body = False
        try:
            with self.entered(Frame({}, scope.globals, function=fn, owner=owner), scope) as frame:
                self.mesh = self.ctx.options.mesh
                decor = signature.function_decorations(self, fn)
                if decor.skip:
                    return
                if decor.grad_enabled is not None:
                    self.grad_enabled = decor.grad_enabled
                self.run.checked.add(id(fn))
                if self.log is not None:
                    self.log.checked.add(self.log.current)
                    self.log.enter_body(fn)
                    entered_body = True
                receiver = self.instance_for(owner) if owner is not None and signature.takes_self(fn) else None
                contract = contracts.for_forward(self, owner, fn) or tp_plans.root_forward_contract(self, owner, fn)
                if contract is not None:
                    layouts.typed_state(receiver, contract)
                for param, value in signature.parameter_values(self, fn, decor, None, receiver):
                    if contract is not None and param in contract.params and not is_tensor(value):
                        value = TensorValue(SpmdType(contract.params[param]), GradState.UNKNOWN, None)
                    frame.env[param] = value
                    self.ctx.bound(param, value, param_name(fn, param))
                self.exec_block(block_body(fn))
                if steps_optimizer(fn):
                    # imported here: the walk's modules cost start-up to every run, and most run no step
                    from spmdcheck.analysis.gradients.step import check_training_step

                    check_training_step(self, fn, scope)
                signature.check_returns(self, fn, decor, frame.returns)
                if contract is not None and contract.returns:
                    for value, node in frame.returns:
                        signature.check_declared(
                            self, value, contract.returns, node, ReturnTypeMismatch, "returned value (out_src)"
                        )
        finally:
            if entered_body:
                self.log.exit_body()  # type: ignore[union-attr]

    def analyze_main(self, node: cst.If, scope: Scope) -> None:
        """Check a module's `if __name__ == "__main__":` block (see branches.py `_defer_main`): its names are a copy
        of the module's, so what it binds stays its own; what it writes to objects is undone, as for every root."""
        entered_body = False
        try:
            with self.entered(Frame(dict(scope.globals), scope.globals), scope):
                self.mesh = self.ctx.options.mesh
                if self.log is not None:
                    self.log.enter_body(node)
                    entered_body = True
                self.exec_block(block_body(node))
        finally:
            if entered_body:
                self.log.exit_body()  # type: ignore[union-attr]

    def instance_for(self, cls: ClassValue) -> InstanceValue:
        """The object a class's methods are checked on: built by its `__init__` with default arguments."""
        built = self.run.instances.get(id(cls))
        log = self.log
        if built is None:
            built = InstanceValue(cls)
            self.run.instances[id(cls)] = built
            init = cls.lookup("__init__")
            if log is not None:
                log.push()
            try:
                if isinstance(init, FunctionValue):
                    self.call(init, [], init.node, receiver=built)
            finally:
                share_objects(built.attrs)  # every method's copy holds these objects: writes to them are undone
                if log is not None:
                    log.built[id(cls)] = (log.current, log.pop())
        elif log is not None and id(cls) in log.built:
            log.reuse(*log.built[id(cls)])
        return InstanceValue(cls, dict(built.attrs))  # each method sees its own copy

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

    def remember_attr(self, owner: InstanceValue, name: str) -> None:
        """Before a write to an object another check made (or the top level): its old value, restored when
        the running check ends, so no check sees what another wrote (see `check_functions`)."""
        if self.attr_undo is not None and owner.born != Generation.current:
            self.attr_undo.append((owner, name, owner.attrs.get(name, _ABSENT)))
        elif self.log is not None and Generation.current < 0 and owner.born != Generation.current:
            self.log.top_wrote(owner.born)  # a top level writing to what another module's top level made


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

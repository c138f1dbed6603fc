"""Statements: blocks, simple statements, classes, `try`, `with`, and assignment (a part of the engine;
`if` and loops are branches.py and loops.py)."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from spmdcheck.analysis import (
    budget,
    configs,
    contracts,
    decorators,
    dispatch,
    rankflow,
    registries,
    signature,
    subscripts,
)
from spmdcheck.analysis.context import FileContext
from spmdcheck.analysis.dispatch import TENSOR
from spmdcheck.analysis.frames import Frame, RunState, Scope
from spmdcheck.analysis.interp.branches import joined
from spmdcheck.analysis.interp.loopreads import attr_path
from spmdcheck.analysis.interp.syntax import always_exits, block_body, walk_statements
from spmdcheck.analysis.roots import RootLog
from spmdcheck.analysis.values import (
    NONE,
    UNKNOWN,
    Alternatives,
    ClassValue,
    ContextValue,
    FunctionValue,
    InstanceValue,
    MeshValue,
    RankValue,
    TensorValue,
    Value,
    unpack,
)
from spmdcheck.diagnostics.violations.contracts import AssertTypeMismatch

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


UNTYPED = TensorValue()  # a tensor spmd_types never typed (no_typecheck results)


class StatementRunner:
    """Runs statements in the engine's frame (a part of `Interpreter`, interp/engine.py)."""

    # the engine's state this part reads and writes (interp/engine.py `Interpreter.__init__`)
    ctx: FileContext
    frame: Frame
    scope: Scope
    log: RootLog | None
    run: RunState
    mesh: tuple[str, ...]
    grad_enabled: bool
    checking: bool
    inline_stack: list[cst.FunctionDef]
    divergent: list[tuple[RankValue, cst.CSTNode]]
    last_test: Value
    rank_specific: tuple[cst.CSTNode, list[str]] | None
    defer_imports: bool

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
                    self.report_rank_specific(stmt, self.rank_specific[1], body[i + 1 :])
                if type(stmt) is cst.If and isinstance(self.last_test, RankValue):
                    # a `raise` on some ranks is an error path (the run fails there), not ranks skipping ahead
                    exits = (
                        always_exits(stmt.body, skips_only=True),
                        stmt.orelse is not None and always_exits(stmt.orelse, skips_only=True),
                    )
                    if exits[0] != exits[1]:
                        # an early return/raise/continue on some ranks: the rest of the block runs on the others
                        self.divergent.append((self.last_test, stmt))
        finally:
            del self.divergent[depth:]

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
            closure = decorators.Closure(dict(self.frame.env)) if self.frame.function is not None else None
            self.frame.env[stmt.name.value] = FunctionValue(stmt, stmt.name.value, self.scope, owner, closure)
            if stmt.decorators:
                registries.register_decorated(self, stmt, self.frame.env[stmt.name.value])
            log = self.log
            if log is not None:
                log.defined(stmt)
            if not self.inline_stack:  # nested functions are checked on their own too
                library = self.scope.ctx.library  # never checked on its own: it takes no place in the queue
                key = log.queue_key(stmt) if log is not None and not library else None
                self.run.queue.append((stmt, self.scope, owner, key))
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
        self.exec_block(block_body(node))
        body_ended = self.frame.ended()
        if node.orelse is not None and not body_ended:
            self.exec_block(block_body(node.orelse))
            body_ended = self.frame.ended()
        after_body = self.frame.env
        handler_start = {n: joined(entry, after_body, n, None) for n in set(entry) | set(after_body)}
        ref = self.ctx.site(node)
        merged: dict[str, Value] | None = None if body_ended else after_body
        handlers_ended = []
        for handler in node.handlers:
            self.frame.env = dict(handler_start)
            self.frame.exited = self.frame.jumped = False
            self.exec_block(block_body(handler))
            ended = self.frame.ended()
            handlers_ended.append(ended)
            if ended:
                continue
            if merged is None:
                merged = self.frame.env
            else:
                after = self.frame.env
                merged = {n: joined(merged, after, n, ref) for n in set(merged) | set(after)}
        self.frame.env = merged if merged is not None else after_body
        self.frame.exited = self.frame.jumped = False
        if node.finalbody is not None:
            self.exec_block(block_body(node.finalbody))
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
            declared = signature.annotation_type(self, small.annotation.annotation)
            if small.value is None:
                return  # a declaration binds nothing (a class-level one types the attribute: exec_class)
            value = self.eval(small.value)
            if declared is not None:
                value = signature.check_declared(self, value, declared, small, AssertTypeMismatch, "annotated variable")
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
            configs.narrow_config(self, small.test)  # `assert isinstance(cfg, GQAttention.Config)`

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
            for item in block_body(node):
                if isinstance(item, cst.SimpleStatementLine):
                    for small in item.body:
                        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                            declared = signature.annotation_type(self, small.annotation.annotation)
                            if declared:
                                cls.declared[small.target.value] = declared
                self.exec_stmt(item)
            cls.namespace.update(self.frame.env)
        finally:
            self.frame = saved
        contracts.attach_from_body(self, cls)
        self.frame.env[node.name.value] = cls
        if node.decorators:
            registries.register_decorated(self, node, cls)

    def exec_augassign(self, node: cst.AugAssign) -> None:
        target = self.eval(node.target)
        value = self.eval(node.value)
        dunder = _AUGOP_DUNDER.get(type(node.operator))
        if isinstance(target, (TensorValue, Alternatives)) and dunder is not None:
            result = dispatch.call_method(
                self, target, f"{TENSOR}.{dunder}", [(None, value, node.value)], node, receiver_node=node.target
            )
        elif isinstance(value, (TensorValue, Alternatives)) and dunder is not None:
            plain = dunder.replace("__i", "__r", 1)
            result = dispatch.call_method(
                self, value, f"{TENSOR}.{plain}", [(None, target, node.target)], node, receiver_node=node.value
            )
        else:
            result = rankflow.joined_lengths(target, value) or UNKNOWN  # `indices += indices[:pad]`
        self.assign(node.target, result, node.value)

    def exec_with(self, node: cst.With) -> None:
        saved = (self.grad_enabled, self.mesh, self.checking, self.loss_parallel)
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
                self.exec_block(block_body(node))
        finally:
            self.grad_enabled, self.mesh, self.checking, self.loss_parallel = saved

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
        elif value.kind == "loss_parallel":
            self.loss_parallel = True

    def _bind_untyped(self, node: cst.CSTNode) -> None:
        """Inside no_typecheck: what is assigned there is untyped (spmd_types stamps no type on it)."""
        for child in walk_statements(node):
            if isinstance(child, cst.Assign):
                for target in child.targets:
                    self.assign(target.target, UNTYPED, None)
            elif isinstance(child, (cst.AnnAssign, cst.AugAssign)):
                self.assign(child.target, UNTYPED, None)

    def assign(self, target: cst.BaseExpression, value: Value, value_node: cst.CSTNode | None) -> None:
        kind = type(target)
        if kind is cst.Name:
            self.frame.env[target.value] = value
            self.frame.rebound.add(target.value)
            self.ctx.bound(target.value, value, target)
        elif kind is cst.Tuple or kind is cst.List:
            star = next((i for i, e in enumerate(target.elements) if type(e) is cst.StarredElement), None)
            if isinstance(value, InstanceValue):  # `a, b = Pairs(...)`: what its `__iter__` gives
                value = rankflow.iterated(self, value, target)
            items = unpack(value, len(target.elements), star)
            for element, item in zip(target.elements, items):
                inner = element.value
                if type(element) is cst.StarredElement:
                    self.assign(inner, UNKNOWN, None)
                else:
                    self.assign(inner, item, None)
        elif kind is cst.Subscript:
            subscripts.setitem(self, target, value, value_node)
        elif kind is cst.Attribute:
            owner = self.eval(target.value)
            contracts.attach(self, owner, target.attr.value, value)
            if isinstance(owner, InstanceValue):
                declared = owner.cls.declared_type(target.attr.value)
                if declared and value_node is not None:
                    value = signature.check_declared(
                        self, value, declared, value_node, AssertTypeMismatch, "annotated attribute"
                    )
                self.set_attr(owner, target.attr.value, value)
                if self.ctx.observed:  # the binding's name is the target's source text: made only when watched
                    self.ctx.bound(self.ctx.code_of(target), value, target)
                return
            key = attr_path(target)
            if key is not None:
                self.frame.env[key] = value
                self.ctx.bound(key, value, target)

"""The abstract interpreter: statements and expressions of one file, over abstract values.

It walks the libcst tree once per scope (module body, each function body,
and function bodies again when inlined at a call with typed arguments), and
delegates every call to `calls.dispatch`, which reads the rule registry.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from spmdcheck.analysis import calls
from spmdcheck.analysis.context import FileContext
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.values import (
    NONE,
    RANK,
    UNKNOWN,
    Alternatives,
    BoundMethod,
    ContextValue,
    DictValue,
    FunctionValue,
    Homogeneous,
    Literal,
    MeshValue,
    ModuleRef,
    RankValue,
    Seq,
    TensorValue,
    TypeValue,
    Value,
    join,
)
from spmdcheck.lattice import AxisType, GradState, Kind, SpmdType
from spmdcheck.rules.model import Returns

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
_BUILTINS = {"True": Literal(True), "False": Literal(False), "None": NONE}
UNTYPED = TensorValue()  # a tensor spmd_types never typed (no_typecheck results)
TENSOR = "torch.Tensor"


@dataclass
class Frame:
    """One scope being interpreted."""

    env: dict[str, Value]
    globals: dict[str, Value]
    returns: list[tuple[Value, cst.CSTNode]] = field(default_factory=list)
    function: cst.FunctionDef | None = None


class Interpreter:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.grad_enabled = True
        self.mesh: tuple[str, ...] = ctx.options.mesh
        self.checking = True  # False inside spmd.no_typecheck
        self.inline_stack: list[cst.FunctionDef] = []
        self.frame = Frame({}, {})
        self.functions: list[cst.FunctionDef] = []
        self.collectives: list[tuple[str, str | None, cst.CSTNode]] = []  # calls made, in order

    # ------------------------------------------------------------------ entry
    def run_module(self, module: cst.Module) -> None:
        self.frame = Frame({}, {})
        self.frame.globals = self.frame.env
        self.exec_block(module.body)
        module_env = self.frame.env
        for fn in list(self.functions):
            self.analyze_function(fn, module_env)

    def analyze_function(self, fn: cst.FunctionDef, globals_: dict[str, Value]) -> None:
        """Check a function body on its own, its parameters typed by their annotations."""
        saved = (self.frame, self.grad_enabled, self.mesh, self.checking)
        self.frame = Frame({}, globals_, function=fn)
        try:
            decor = calls.function_decorations(self, fn)
            if decor.skip:
                return
            if decor.grad_enabled is not None:
                self.grad_enabled = decor.grad_enabled
            for param, value in calls.parameter_values(self, fn, decor, None):
                self.frame.env[param] = value
                self.ctx.bound(param, value, _param_name(fn, param))
            self.exec_block(_body(fn))
            calls.check_returns(self, fn, decor, self.frame.returns)
        finally:
            self.frame, self.grad_enabled, self.mesh, self.checking = saved

    # ------------------------------------------------------------- statements
    def exec_block(self, body: Sequence[cst.CSTNode]) -> None:
        for stmt in body:
            self.exec_stmt(stmt)

    def exec_stmt(self, stmt: cst.CSTNode) -> None:
        if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in stmt.body:
                self.exec_small(small, stmt)
        elif isinstance(stmt, cst.FunctionDef):
            self.frame.env[stmt.name.value] = FunctionValue(stmt, stmt.name.value)
            if not self.inline_stack:  # nested functions are checked on their own too
                self.functions.append(stmt)
        elif isinstance(stmt, cst.ClassDef):
            self.frame.env[stmt.name.value] = UNKNOWN
            if not self.inline_stack:
                for item in _body(stmt):
                    if isinstance(item, cst.FunctionDef):
                        self.functions.append(item)
        elif isinstance(stmt, cst.If):
            self.exec_if(stmt)
        elif isinstance(stmt, (cst.For, cst.While)):
            self.exec_loop(stmt)
        elif isinstance(stmt, cst.With):
            self.exec_with(stmt)
        elif isinstance(stmt, cst.Try):
            self.exec_block(_body(stmt))
            for handler in stmt.handlers:
                self.exec_block(_body(handler))
            if stmt.orelse is not None:
                self.exec_block(_body(stmt.orelse))
            if stmt.finalbody is not None:
                self.exec_block(_body(stmt.finalbody))
        elif isinstance(stmt, cst.IndentedBlock):
            self.exec_block(stmt.body)
        elif isinstance(stmt, cst.BaseSmallStatement):
            self.exec_small(stmt, None)

    def exec_small(self, small: cst.BaseSmallStatement, line: cst.SimpleStatementLine | None) -> None:
        if isinstance(small, cst.Expr):
            self.eval(small.value)
        elif isinstance(small, cst.Assign):
            value = self.eval(small.value)
            for target in small.targets:
                self.assign(target.target, value, small.value)
        elif isinstance(small, cst.AnnAssign):
            value = self.eval(small.value) if small.value is not None else UNKNOWN
            declared = calls.annotation_type(self, small.annotation.annotation)
            if declared is not None and small.value is not None:
                value = calls.check_declared(self, value, declared, small, "SPMD401", "annotated variable")
            self.assign(small.target, value, small.value)
        elif isinstance(small, cst.AugAssign):
            self.exec_augassign(small)
        elif isinstance(small, cst.Return):
            value = self.eval(small.value) if small.value is not None else NONE
            self.frame.returns.append((value, small))
        elif isinstance(small, (cst.Import, cst.ImportFrom)):
            self.exec_import(small)
        elif isinstance(small, cst.Del):
            pass
        elif isinstance(small, (cst.Raise, cst.Assert)):
            for child in small.children:
                if isinstance(child, cst.BaseExpression):
                    self.eval(child)

    def exec_import(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                dotted = self.ctx.code_of(alias.name)
                if alias.asname is not None:
                    local = self.ctx.code_of(alias.asname.name)
                    self.frame.env[local] = ModuleRef(dotted)
                    self._note_spmd_alias(dotted, local)
                else:
                    head = dotted.split(".")[0]
                    self.frame.env[head] = ModuleRef(head)
            return
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            if not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    local = self.ctx.code_of(alias.asname.name) if alias.asname else self.ctx.code_of(alias.name)
                    self.frame.env[local] = UNKNOWN
            return
        module = self.ctx.code_of(node.module)
        for alias in node.names:
            name = self.ctx.code_of(alias.name)
            local = self.ctx.code_of(alias.asname.name) if alias.asname else name
            self.frame.env[local] = ModuleRef(f"{module}.{name}")
            self._note_spmd_alias(f"{module}.{name}", local)

    def _note_spmd_alias(self, qualname: str, local: str) -> None:
        if qualname == "spmd_types":
            self.ctx.spmd_alias = local
        elif qualname.startswith("megatron."):
            self.ctx.megatron_names[self.ctx.registry.resolve_alias(qualname)] = local

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
        test = self.eval(node.test)
        ref = self.ctx.site(node)
        before = dict(self.frame.env)
        start = len(self.collectives)
        self.exec_block(_body(node))
        in_if = self.collectives[start:]
        after_if = self.frame.env
        self.frame.env = dict(before)
        middle = len(self.collectives)
        if node.orelse is not None:
            if isinstance(node.orelse, cst.If):
                self.exec_if(node.orelse)
            else:
                self.exec_block(_body(node.orelse))
        in_else = self.collectives[middle:]
        if isinstance(test, RankValue):
            self._check_rank_branch(node, in_if, in_else)
        after_else = self.frame.env
        merged: dict[str, Value] = {}
        for name in set(after_if) | set(after_else):
            a, b = after_if.get(name, UNKNOWN), after_else.get(name, UNKNOWN)
            merged[name] = join(a, b, ref)
        self.frame.env = merged

    def _check_rank_branch(self, node: cst.If, in_if: list, in_else: list) -> None:
        """Collectives must be called by every rank of their group: a rank-dependent branch may not differ."""
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
            item = _element_of(iterable)
        else:
            self.eval(node.test)
        ref = self.ctx.site(node)
        # Iterate to a fixed point (bounded): a loop body may run zero or more times.
        for _ in range(4):
            before = dict(self.frame.env)
            if isinstance(node, cst.For):
                self.assign(node.target, item, None)
            self.exec_block(_body(node))
            merged = {
                n: join(before.get(n, UNKNOWN), self.frame.env.get(n, UNKNOWN), ref)
                for n in set(before) | set(self.frame.env)
            }
            merged = {n: _loop_widen(v) for n, v in merged.items()}
            self.frame.env = merged
            if merged == before:
                break
        if node.orelse is not None:
            self.exec_block(_body(node.orelse))

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
        if isinstance(target, cst.Name):
            self.frame.env[target.value] = value
            self.ctx.bound(target.value, value, target)
        elif isinstance(target, (cst.Tuple, cst.List)):
            items = _unpack(value, len(target.elements))
            for element, item in zip(target.elements, items):
                inner = element.value
                if isinstance(element, cst.StarredElement):
                    self.assign(inner, UNKNOWN, None)
                else:
                    self.assign(inner, item, None)
        elif isinstance(target, cst.Subscript):
            calls.setitem(self, target, value, value_node)
        elif isinstance(target, cst.Attribute):
            key = _attr_path(target)
            if key is not None:
                self.frame.env[key] = value
                self.ctx.bound(key, value, target)
            self.eval(target.value)

    def rebind(self, node: cst.CSTNode | None, value: Value) -> None:
        """An op changed the type of the tensor named by `node` (in place, assert_type)."""
        if isinstance(node, cst.Name):
            self.frame.env[node.value] = value
        elif isinstance(node, cst.Attribute):
            key = _attr_path(node)
            if key is not None:
                self.frame.env[key] = value

    # ------------------------------------------------------------ expressions
    def eval(self, node: cst.BaseExpression) -> Value:
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            for child in node.children:
                if isinstance(child, cst.BaseExpression):
                    self.eval(child)
            return UNKNOWN
        return method(node)

    def lookup(self, name: str) -> Value:
        if name in self.frame.env:
            return self.frame.env[name]
        if name in self.frame.globals:
            return self.frame.globals[name]
        return _BUILTINS.get(name, UNKNOWN)

    def eval_Name(self, node: cst.Name) -> Value:
        return self.resolve_ref(self.lookup(node.value))

    def resolve_ref(self, value: Value) -> Value:
        """A module attribute that names a type constant is that type."""
        if isinstance(value, ModuleRef):
            rule = self.ctx.registry.lookup(value.qualname)
            if rule is not None and rule.const_type is not None:
                from spmdcheck.rules.typespec import parse_axis_type

                return TypeValue(parse_axis_type(rule.const_type))
        return value

    def eval_Attribute(self, node: cst.Attribute) -> Value:
        key = _attr_path(node)
        if key is not None and key in self.frame.env:
            return self.frame.env[key]
        base = self.eval(node.value)
        attr = node.attr.value
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
        return UNKNOWN

    def eval_Call(self, node: cst.Call) -> Value:
        func = self.eval(node.func)
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
        if isinstance(node.operator, cst.Minus) and isinstance(operand, (TensorValue, Alternatives)):
            return calls.call_method(self, operand, f"{TENSOR}.__neg__", [], node, receiver_node=node.expression)
        if (
            isinstance(node.operator, cst.Minus)
            and isinstance(operand, Literal)
            and isinstance(operand.value, (int, float))
        ):
            return Literal(-operand.value)
        if isinstance(operand, RankValue):
            return RANK
        if isinstance(operand, (TensorValue, Alternatives)) and isinstance(node.operator, cst.BitInvert):
            return calls.call_method(self, operand, f"{TENSOR}.__invert__", [], node, receiver_node=node.expression)
        return UNKNOWN

    def eval_Comparison(self, node: cst.Comparison) -> Value:
        left = self.eval(node.left)
        result: Value = RANK if isinstance(left, RankValue) else UNKNOWN
        for target in node.comparisons:
            right = self.eval(target.comparator)
            dunder = _CMP_DUNDER.get(type(target.operator))
            if isinstance(right, RankValue):
                result = RANK
            if dunder and isinstance(left, (TensorValue, Alternatives)):
                result = calls.call_method(
                    self, left, f"{TENSOR}.{dunder}", [(None, right, target.comparator)], node, receiver_node=node.left
                )
            left = right
        return result

    def eval_BooleanOperation(self, node: cst.BooleanOperation) -> Value:
        left, right = self.eval(node.left), self.eval(node.right)
        return RANK if isinstance(left, RankValue) or isinstance(right, RankValue) else UNKNOWN

    def eval_IfExp(self, node: cst.IfExp) -> Value:
        self.eval(node.test)
        return join(self.eval(node.body), self.eval(node.orelse), self.ctx.site(node))

    def eval_Subscript(self, node: cst.Subscript) -> Value:
        base = self.eval(node.value)
        return calls.getitem(self, base, node)

    def eval_Integer(self, node: cst.Integer) -> Value:
        return Literal(
            int(node.value.replace("_", ""), 0)
            if not node.value.startswith("0") or node.value == "0"
            else int(node.value.replace("_", ""), 0)
        )

    def eval_Float(self, node: cst.Float) -> Value:
        try:
            return Literal(float(node.value.replace("_", "")))
        except ValueError:
            return UNKNOWN

    def eval_Imaginary(self, node: cst.Imaginary) -> Value:
        return Literal(complex(node.value.replace("_", "")))

    def eval_SimpleString(self, node: cst.SimpleString) -> Value:
        try:
            return Literal(node.evaluated_value)
        except Exception:  # noqa: BLE001 - a string libcst cannot evaluate is just unknown
            return UNKNOWN

    def eval_ConcatenatedString(self, node: cst.ConcatenatedString) -> Value:
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001
            return UNKNOWN
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
        return UNKNOWN if isinstance(element, cst.StarredElement) else value

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
        return UNKNOWN

    def eval_GeneratorExp(self, node: cst.GeneratorExp) -> Value:
        return UNKNOWN

    def eval_Await(self, node: cst.Await) -> Value:
        return self.eval(node.expression)

    def eval_NamedExpr(self, node: cst.NamedExpr) -> Value:
        value = self.eval(node.value)
        self.assign(node.target, value, node.value)
        return value

    # ---------------------------------------------------------------- helpers
    def report(self, finding: Finding) -> None:
        if self.checking:
            self.ctx.report(finding)

    def result_grad(self, grads: Sequence[GradState]) -> GradState:
        if not self.grad_enabled:
            return GradState.NO
        return GradState.join(grads) if grads else GradState.NO

    def factory_tensor(self, rank: int | None, grad: GradState, typed: bool) -> TensorValue:
        """A deterministic factory's result: R on every axis of the mesh in scope."""
        axes = {a: AxisType(Kind.R) for a in self.mesh} if typed else {}
        return TensorValue(SpmdType(axes), grad, rank)


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
    every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
    return next((p.name for p in every if p.name.value == name), fn.name)


def _walk_statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for stmt in _body(node):
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body
        else:
            yield from _walk_statements(stmt)


def _attr_path(node: cst.BaseExpression) -> str | None:
    """`self.weight` -> "self.weight": attribute chains on names are tracked as variables."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def _unpack(value: Value, n: int) -> list[Value]:
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


def _loop_widen(value: Value) -> Value:
    # Alternatives created by a loop's back edge describe iterations, not user branches:
    # keep them bounded by widening to what all iterations agree on.
    if isinstance(value, Alternatives) and len(value.options) > 2:
        from spmdcheck.analysis.values import _widen

        return _widen([t for t, _ in value.options])
    return value

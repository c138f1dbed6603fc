"""Expressions: the evaluator, which holds the engine as mypy's checkexpr holds its checker.

One method per node type (`eval_Name`, `eval_Call`, ...), found through a table filled on first use;
a node type without one evaluates its sub-expressions and is unknown. Calls go to dispatch.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import libcst as cst

from spmdcheck.analysis import (
    attributes,
    autograd_functions,
    configs,
    containers,
    dispatch,
    lambdas,
    layouts,
    rankflow,
    signature,
    spmd_api,
    subscripts,
)
from spmdcheck.analysis.dispatch import TENSOR
from spmdcheck.analysis.dtensor import DTensorValue
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.interp.loopreads import attr_path
from spmdcheck.analysis.values import (
    NONE,
    UNKNOWN,
    Alternatives,
    Assumed,
    BoundMethod,
    BuiltinValue,
    ClassValue,
    ContractValue,
    DictValue,
    FunctionValue,
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
    RankValue,
    Seq,
    SuperValue,
    TensorValue,
    TrustedForward,
    TypeValue,
    Unknown,
    Value,
    join,
)
from spmdcheck.frontend.guard import string_value
from spmdcheck.lattice import GradState, SpmdType
from spmdcheck.rules.model import OpRule, Returns
from spmdcheck.rules.typespec import parse_axis_type


class Host(Engine, Protocol):
    """What the evaluator sees of the engine (interp/engine.py): `Engine`, and the engine's own assignment
    (comprehension variables, `:=`) and module attributes (imports, stub models)."""

    def assign(self, target: cst.BaseExpression, value: Value, value_node: cst.CSTNode | None) -> None: ...

    def module_attribute(self, module: str, name: str) -> Value: ...

    def model_of(self, rule: OpRule) -> Value: ...


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
    "sum": BuiltinValue("sum"),
    "dict": BuiltinValue("dict"),
    **{name: BuiltinValue(name) for name in attributes.BUILTINS},
    **{name: BuiltinValue(name) for name in dispatch.RANK_PRESERVING_BUILTINS},
    **{name: BuiltinValue(name) for name in rankflow.BUILTINS},
}
_ABSENT = object()  # a lookup's "no such name"
_DTENSOR = "torch.distributed.tensor.DTensor"
_TENSOR_LIKE = (TensorValue, Alternatives, DTensorValue)  # what an operator applies to as a tensor op
# methods that cut a tensor into pieces and that no builtin type has (str and list have `split`)
_TENSOR_ONLY_CUTS = frozenset({"chunk", "tensor_split", "unbind"})
_DEVICE_MESH = "torch.distributed.device_mesh.DeviceMesh"
_MESH_ONLY_METHODS = frozenset({"get_local_rank"})  # methods of DeviceMesh that no tensor or group has


class Evaluator:
    """The value of an expression node, in the engine's current frame."""

    __slots__ = ("engine",)

    def __init__(self, engine: Host) -> None:
        self.engine = engine

    def eval(self, node: cst.BaseExpression) -> Value:
        kind = type(node)
        try:
            method = _EVALUATORS[kind]
        except KeyError:
            method = _EVALUATORS[kind] = getattr(Evaluator, "eval_" + kind.__name__, None)
        if method is None:
            for child in node.children:
                if isinstance(child, cst.BaseExpression):
                    self.eval(child)
            return UNKNOWN
        return method(self, node)

    def lookup(self, name: str) -> Value:
        engine = self.engine
        frame = engine.frame
        value = frame.env.get(name, _ABSENT)
        if value is _ABSENT:
            value = frame.globals.get(name, _ABSENT)
            if engine.log is not None:
                engine.log.read(name)
        elif frame.function is None and engine.log is not None:
            engine.log.read(name)  # a module's top level (or a class body in it): its variables are module names
        if type(value) is PendingImport:
            return engine.settle(value)
        return _BUILTINS.get(name, UNKNOWN) if value is _ABSENT else value  # type: ignore[return-value]

    def eval_Name(self, node: cst.Name) -> Value:
        value = self.lookup(node.value)
        kind = type(value)
        if kind is ModuleRef or kind is LazyImport:  # the only values `resolve_ref`/`resolve_lazy` change
            return self.engine.resolve_lazy(self.resolve_ref(value))
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
            rule = self.engine.ctx.registry.lookup(value.qualname)
            if rule is not None and rule.model_path is not None:
                return self.engine.model_of(rule)
            if rule is not None and rule.const_type is not None:
                return TypeValue(parse_axis_type(rule.const_type))
            if rule is not None and rule.const_str is not None:
                return Literal(rule.const_str)  # a stub's string constant: an enum member naming an axis
        return value

    def eval_Attribute(self, node: cst.Attribute) -> Value:
        key = attr_path(node)
        if key is not None:
            env = self.engine.frame.env
            if key in env:
                return env[key]
        base = self.eval(node.value)
        attr = node.attr.value
        if type(base) is Unknown:
            if attr in _TENSOR_ONLY_CUTS:
                # `batch["x"].chunk(n, dim)`: only a tensor has this method, so its result is a tensor's pieces,
                # their types unknown (one piece taken at a rank index still varies along that rank's axis)
                return BoundMethod(TensorValue(opaque=True), f"{TENSOR}.{attr}")
            if attr in _MESH_ONLY_METHODS and self.engine.mesh:
                # `model.mesh.get_local_rank()`: only a DeviceMesh has this method, and a mesh the checker cannot
                # see is the configured one (as `mesh["tp"]` of one, subscripts.py)
                return BoundMethod(MeshValue(self.engine.mesh), f"{_DEVICE_MESH}.{attr}")
            return UNKNOWN  # no other attribute of an unknown value is known (most attributes of library code)
        if isinstance(base, (ModuleValue, InstanceValue, ClassValue)):
            return self.engine.resolve_lazy(self.object_attribute(base, attr))
        if isinstance(base, SuperValue):
            found = base.cls.lookup(attr, after=base.cls) if isinstance(base.cls, ClassValue) else None
            if isinstance(found, FunctionValue):
                return MethodValue(found, base.receiver)
            return UNKNOWN
        if isinstance(base, ModuleRef):
            return self.resolve_ref(ModuleRef(f"{base.qualname}.{attr}"))
        if isinstance(base, (TensorValue, Alternatives)):
            qual = f"{TENSOR}.{attr}"
            rule = self.engine.ctx.registry.lookup(qual)
            if rule is not None and rule.is_property:
                return dispatch.call_method(self.engine, base, qual, [], node, receiver_node=node.value)
            if rule is not None and rule.returns is Returns.VALUE and rule.passthrough and not rule.params:
                return UNKNOWN
            return BoundMethod(base, qual)
        if isinstance(base, DTensorValue):
            return self._dtensor_attribute(base, node)
        if isinstance(base, MeshValue):
            return BoundMethod(base, f"{_DEVICE_MESH}.{attr}")
        if isinstance(base, (ContractValue, LayoutValue)):
            return layouts.field(base, attr)
        if isinstance(base, DictValue) and attr in containers.DICT_METHODS:
            return BoundMethod(base, f"builtins.dict.{attr}")
        if isinstance(base, (Seq, Homogeneous)) and attr in containers.LIST_METHODS:
            return BoundMethod(base, f"builtins.list.{attr}")
        if isinstance(base, containers.Candidates):  # `model.forward` of a model picked from a registry
            return containers.attribute(base, attr, self.object_attribute)
        return UNKNOWN

    def _dtensor_attribute(self, base: DTensorValue, node: cst.Attribute) -> Value:
        """`x.to_local`, `x.placements` (the DTensor stub's), `x.sum`, `x.T` (a tensor's, on placements)."""
        registry, attr = self.engine.ctx.registry, node.attr.value
        qual = f"{_DTENSOR}.{attr}"
        rule = registry.lookup(qual)
        if rule is None:
            qual = f"{TENSOR}.{attr}"
            rule = registry.lookup(qual)
        if rule is not None and rule.is_property:
            return dispatch.call_method(self.engine, base, qual, [], node, receiver_node=node.value)
        return BoundMethod(base, qual) if rule is not None else UNKNOWN

    def object_attribute(self, base: Value, attr: str) -> Value:
        """An attribute of a checked module, class or object (no side effects: safe to call anywhere)."""
        if isinstance(base, ModuleValue):
            if self.engine.importer is not None and self.engine.importer.kind(base.name) == "library":
                return LazyImport(base.name, attr)
            return self.engine.module_attribute(base.name, attr)
        if isinstance(base, InstanceValue):
            if attr in base.attrs:
                return base.attrs[attr]
            typed_field = configs.config_field(self.engine, base, attr)  # `cfg.w1` typed `w1: Linear.Config`
            if typed_field is not None:
                return typed_field
            found = base.cls.lookup(attr)
            if isinstance(found, FunctionValue):
                return MethodValue(found, base) if signature.takes_self(found.node) else found
            if found is not None:
                return found
            declared = base.cls.declared_type(attr)
            if declared:
                return TensorValue(SpmdType(declared), GradState.UNKNOWN, None)
            member = attributes.module_member(base, attr)  # `self.children`, `self._modules`: nn.Module's
            return member if member is not None else UNKNOWN
        if isinstance(base, ClassValue):
            found = base.lookup(attr)
            if found is None and attr == "apply":
                # spmd_types' typecheck_forward, when the class has one, is the typed signature of `apply`
                # (not re-entered from its own body); otherwise `Fn.apply(x)` runs forward, `ctx` unknown.
                # Inside typecheck_forward, its `Cls.apply(...)` runs forward on the asserted inputs, and what
                # typecheck_forward then asserts on the result checks forward's output.
                running = [self.engine.frame.function, *self.engine.inline_stack]
                hook = spmd_api.autograd_apply(base, lambdas.written_in(running))
                if hook is not UNKNOWN:
                    return hook
                forward = base.lookup("forward")
                if isinstance(forward, FunctionValue) and base.lookup("typecheck_forward") is not None:
                    return TrustedForward(MethodValue(forward, UNKNOWN))
                function_apply = autograd_functions.apply_of(base)  # forward and backward read together
                if function_apply is not None:
                    return function_apply
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
        return dispatch.dispatch(self.engine, func, args, node)

    def eval_BinaryOperation(self, node: cst.BinaryOperation) -> Value:
        left = self.eval(node.left)
        right = self.eval(node.right)
        dunder = _BINOP_DUNDER.get(type(node.operator))
        if dunder is None:
            return UNKNOWN
        if isinstance(left, _TENSOR_LIKE):
            return dispatch.call_method(
                self.engine, left, f"{TENSOR}.{dunder}", [(None, right, node.right)], node, receiver_node=node.left
            )
        if isinstance(right, _TENSOR_LIKE):
            rdunder = "__r" + dunder[2:]
            return dispatch.call_method(
                self.engine, right, f"{TENSOR}.{rdunder}", [(None, left, node.left)], node, receiver_node=node.right
            )
        return dispatch.python_arith(left, right, dunder)

    def eval_UnaryOperation(self, node: cst.UnaryOperation) -> Value:
        operand = self.eval(node.expression)
        if isinstance(node.operator, cst.Not) and isinstance(operand, Literal):
            return type(operand)(not operand.value)
        if isinstance(node.operator, cst.Minus) and isinstance(operand, _TENSOR_LIKE):
            return dispatch.call_method(
                self.engine, operand, f"{TENSOR}.__neg__", [], node, receiver_node=node.expression
            )
        if (
            isinstance(node.operator, cst.Minus)
            and isinstance(operand, Literal)
            and isinstance(operand.value, (int, float))
        ):
            return Literal(-operand.value)
        if isinstance(operand, RankValue):
            return operand
        if isinstance(operand, (TensorValue, Alternatives)) and isinstance(node.operator, cst.BitInvert):
            return dispatch.call_method(
                self.engine, operand, f"{TENSOR}.__invert__", [], node, receiver_node=node.expression
            )
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
            elif membership and isinstance(left, Literal) and len(node.comparisons) == 1:
                # `name in self.SP_PARAMS`: a constant in a constant tuple (or a dict's constant keys)
                result = containers.membership(left, right)
                if isinstance(result, Literal) and operator is cst.NotIn:
                    result = Literal(not result.value)
            elif isinstance(left, Literal) and isinstance(right, Literal) and len(node.comparisons) == 1:
                result = _fold_comparison(target.operator, left.value, right.value)
                if isinstance(result, Literal) and (isinstance(left, Assumed) or isinstance(right, Assumed)):
                    result = Assumed(result.value)
            if dunder and isinstance(left, (TensorValue, Alternatives)):
                result = dispatch.call_method(
                    self.engine,
                    left,
                    f"{TENSOR}.{dunder}",
                    [(None, right, target.comparator)],
                    node,
                    receiver_node=node.left,
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
        if isinstance(test, Literal) and self.engine.inline_stack:
            return self.eval(node.body if test.value else node.orelse)
        return join(self.eval(node.body), self.eval(node.orelse), self.engine.ctx.site(node))

    def eval_Yield(self, node: cst.Yield) -> Value:
        """`yield x` / `yield from xs` in a generator being called: what it yields (rankflow.py)."""
        whole = type(node.value) is cst.From
        part = node.value.item if whole else node.value  # type: ignore[union-attr]
        value = self.eval(part) if part is not None else NONE
        rankflow.yielded(self.engine, value, whole, node)
        return UNKNOWN

    def eval_Subscript(self, node: cst.Subscript) -> Value:
        base = self.eval(node.value)
        return subscripts.getitem(self.engine, base, node)

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
        values = [self.eval(p.expression) for p in node.parts if isinstance(p, cst.FormattedStringExpression)]
        return attributes.format_string(node, values)  # `f"layer_{i}"`: a name getattr/setattr can use

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
        return lambdas.function_value(self.engine, node)  # a function, as a `def` is (lambdas.py)

    def eval_ListComp(self, node: cst.ListComp) -> Value:
        return self._comprehension(node)

    def eval_GeneratorExp(self, node: cst.GeneratorExp) -> Value:
        return self._comprehension(node)

    def eval_SetComp(self, node: cst.SetComp) -> Value:
        return self._comprehension(node)

    def eval_DictComp(self, node: cst.DictComp) -> Value:
        return self._comprehension(node)

    def _comprehension(self, node: cst.ListComp | cst.GeneratorExp | cst.SetComp | cst.DictComp) -> Value:
        """Its elements, its loop variables bound to the items of each iterable (containers.py).

        The loop variables do not leak (Python 3 scoping); what the element does to objects stays.
        """
        saved = self.engine.frame.env
        self.engine.frame.env = dict(saved)
        try:
            return containers.comprehension(self, node)
        finally:
            self.engine.frame.env = saved

    def eval_Await(self, node: cst.Await) -> Value:
        return self.eval(node.expression)

    def eval_NamedExpr(self, node: cst.NamedExpr) -> Value:
        value = self.eval(node.value)
        self.engine.assign(node.target, value, node.value)
        return value


# node type -> the Evaluator method evaluating it (None: its sub-expressions only), filled on first use
_EVALUATORS: dict[type, Callable[[Evaluator, cst.CSTNode], Value] | None] = {}

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

"""Expressions of the gradient walk (walker.py): names, attributes, operators, conditions, loops' iterables,
and calls (the program's functions and classes inlined, library names in library.py)."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import libcst as cst

from spmdcheck.analysis.gradients import (
    accumulation,
    arguments,
    engine_values,
    library,
    loops,
    norms,
    strings,
    sync,
)
from spmdcheck.analysis.gradients.engine_values import from_engine
from spmdcheck.analysis.gradients.state import (
    DTYPE,
    OPAQUE,
    Bound,
    Bucket,
    Builtin,
    Chunks,
    Data,
    GradRef,
    Group,
    Instance,
    ItemList,
    Mesh,
    MethodRef,
    ModuleObj,
    Optimizer,
    Param,
    Partial,
    Qual,
    Rank,
    RepeatedDict,
    SuperRef,
    Synced,
    WorldSize,
    spoil,
    spoiled,
)
from spmdcheck.analysis.gradients.walker import MAX_ITEMS, Yields, as_items
from spmdcheck.analysis.values import (
    ClassValue,
    FunctionValue,
    InstanceValue,
    ModuleValue,
)

if TYPE_CHECKING:
    from spmdcheck.analysis.gradients.walker import Walker


_BUILTINS = {
    "getattr", "hasattr", "setattr", "zip", "enumerate", "list", "tuple", "len", "isinstance", "range",
    "sorted", "reversed", "print", "super", "dict", "iter", "next", "any", "all", "sum", "min", "max", "int",
    "float", "str", "bool", "filter", "map",
}  # fmt: skip
_WALKED = (ModuleObj, Param, GradRef, ItemList, Bucket, Optimizer, Synced)
_ARITH = {
    "Add": operator.add, "Subtract": operator.sub, "Multiply": operator.mul, "Divide": operator.truediv,
    "FloorDivide": operator.floordiv, "Modulo": operator.mod, "Power": operator.pow,
}  # fmt: skip
_CONSTANTS = (str, int, float, bool, type(None))
_KEYS = (*_CONSTANTS, Group)  # a dict key the walk reads: a constant, or a process group (`{tp: I}`)
_OWN_ATTRS = ("requires_grad", "grad", "main_grad")  # a tensor's own attributes, not marks


def lookup(walker: Walker, name: str) -> Any:
    frame = walker.frame
    assert frame is not None
    if name in frame.env:
        return frame.env[name]
    if name in frame.scope.globals:
        log = getattr(walker.engine, "log", None)
        if log is not None:
            log.read(name)
        return from_engine(walker, frame.scope.globals[name])
    if name in _BUILTINS:
        return Builtin(name)
    if name in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[name]
    return OPAQUE


def evaluate(walker: Walker, expr: cst.BaseExpression) -> Any:
    walker.tick()
    if isinstance(expr, cst.Name):
        return lookup(walker, expr.value)
    if isinstance(expr, cst.Attribute):
        return attribute(walker, evaluate(walker, expr.value), expr.attr.value)
    if isinstance(expr, cst.Call):
        return evaluate_call(walker, expr)
    if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
        return expr.evaluated_value
    if isinstance(expr, (cst.FormattedString, cst.ConcatenatedString)):
        return strings.formatted(expr, lambda e: evaluate(walker, e))
    if isinstance(expr, (cst.List, cst.Tuple)):
        items = [evaluate(walker, e.value) for e in expr.elements if not isinstance(e, cst.StarredElement)]
        if any(isinstance(e, cst.StarredElement) for e in expr.elements):
            return OPAQUE
        return ItemList(items) if isinstance(expr, cst.List) else tuple(items)
    if isinstance(expr, cst.Dict):
        return _dict(walker, expr)
    if isinstance(expr, cst.Subscript):
        return subscript(walker, expr)
    if isinstance(expr, cst.BinaryOperation):
        return binary(walker, expr)
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return comprehension(walker, expr)
    if isinstance(expr, cst.DictComp):
        return _dict_comprehension(walker, expr)
    if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not):
        operand = evaluate(walker, expr.expression)
        if isinstance(operand, (int, float)) and isinstance(expr.operator, cst.Minus):
            return -operand
        return operand if isinstance(operand, Data) else OPAQUE
    if isinstance(expr, (cst.BooleanOperation, cst.Comparison, cst.UnaryOperation)):
        truth = test(walker, expr)
        if truth is None:  # `tp_rank == 0` kept as a condition on one rank of an axis (norms.py)
            condition = norms.rank_condition(walker, expr, evaluate, test)
            return condition if isinstance(condition, norms.RankTest) else OPAQUE
        return truth
    if isinstance(expr, cst.Yield):
        return _yield(walker, expr)
    if isinstance(expr, cst.IfExp):
        truth = test(walker, expr.test)
        if truth is None:
            return OPAQUE
        return evaluate(walker, expr.body if truth else expr.orelse)
    if isinstance(expr, cst.Lambda):
        return engine_values.lambda_value(walker, expr, evaluate)  # a function, called as a `def` is
    return OPAQUE


def _dict(walker: Walker, expr: cst.Dict) -> Any:
    out: dict[Any, Any] = {}
    for element in expr.elements:
        if not isinstance(element, cst.DictElement):
            return OPAQUE
        key = evaluate(walker, element.key)
        if not isinstance(key, _KEYS):
            return OPAQUE
        out[key] = evaluate(walker, element.value)
    return out


def attribute(walker: Walker, value: Any, name: str) -> Any:
    if isinstance(value, (Param, GradRef)) and name == "dtype":
        return DTYPE
    if isinstance(value, Param):
        if name in ("grad", "main_grad"):
            return GradRef(value)
        if name in accumulation.PARAM_HOOKS:
            return Bound(value, name)
        if name == "requires_grad":
            return value.attrs.get(name, True)
        if name in value.attrs:
            return value.attrs[name]
        return Bound(value, name)
    if isinstance(value, GradRef):
        if name == "data":
            return value
        return Bound(value, name)
    if isinstance(value, ModuleObj):
        return _module_attribute(walker, value, name)
    if isinstance(value, Optimizer):
        if name == "param_groups" and value.params is not None:
            return ItemList([{"params": ItemList(list(value.params))}])
        return Bound(value, name)
    if isinstance(value, ModuleValue):
        return from_engine(walker, walker.engine.module_attribute(value.name, name))
    if isinstance(value, Qual):
        return engine_values.module_or_name(walker, f"{value.name}.{name}")
    if isinstance(value, SuperRef):
        return _super_attribute(value, name)
    if isinstance(value, Instance):
        if name in value.attrs:
            return value.attrs[name]
        method = value.cls.lookup(name)
        return MethodRef(method, value) if isinstance(method, FunctionValue) and not _decorated(method) else OPAQUE
    if isinstance(value, InstanceValue):  # a config object of the engine (from_engine)
        return from_engine(walker, value.attrs[name]) if name in value.attrs else OPAQUE
    if isinstance(value, (Data, ItemList, Bucket, Synced, dict, str, norms.SquaredNorm)) or value is OPAQUE:
        return Bound(value, name)
    return OPAQUE


def _decorated(func: FunctionValue) -> bool:
    """A method under a decorator (a property, a staticmethod): not a plain method bound to its object."""
    return bool(func.node.decorators)


def _module_attribute(walker: Walker, obj: ModuleObj, name: str) -> Any:
    if name in obj.children:
        return obj.children[name]
    if name in ("_modules", "_parameters"):  # `self._modules["fc"]`: the children, as torch keeps them
        return obj.children
    if name in obj.attrs:
        return obj.attrs[name]
    if name == "module" and obj.inner is not None:
        return obj.inner
    cls = obj.attrs.get("__class__")
    if isinstance(cls, ClassValue):
        method = cls.lookup(name)
        if isinstance(method, FunctionValue):
            return MethodRef(method, obj)
    return Bound(obj, name)


def _super_attribute(ref: SuperRef, name: str) -> Any:
    mro = ref.receiver.attrs.get("__class__").mro() if isinstance(ref.receiver, ModuleObj) else ref.cls.mro()
    later = mro[mro.index(ref.cls) + 1 :] if ref.cls in mro else []
    for cls in later:
        if name in cls.namespace and isinstance(cls.namespace[name], FunctionValue):
            return MethodRef(cls.namespace[name], ref.receiver)
    base = library.library_base(ref.cls)
    if name == "__init__" and base is not None:
        return Bound(ref.receiver, f"__library_init__:{base}")
    return OPAQUE


def subscript(walker: Walker, expr: cst.Subscript) -> Any:
    value = evaluate(walker, expr.value)
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return Data(value.shard_axes, value.divisions, value.models) if isinstance(value, Data) else OPAQUE
    index = evaluate(walker, expr.slice[0].slice.value)
    if isinstance(value, Chunks):
        if isinstance(index, Rank) and isinstance(value.size, WorldSize) and value.size.axis == index.axis:
            base = value.base
            return Data(base.shard_axes | {index.axis}, base.divisions, base.models)
        return Data(value.base.shard_axes, value.base.divisions, value.base.models)
    if isinstance(value, RepeatedDict):
        return value["*"]
    if isinstance(value, Mesh):  # `mesh["dp"]`, `mesh["dp", "tp"]`: the sub-mesh over those axes
        names = index if isinstance(index, tuple) else (index,)
        return Mesh(names) if all(isinstance(n, str) and n in value.axes for n in names) else OPAQUE
    counted = library.counted_of(value)
    if counted is not None and isinstance(index, (int, loops.LoopIndex)) and not isinstance(index, bool):
        return counted.element(index)  # `batches[i]` in a loop over `range(len(batches))`
    if isinstance(value, dict) and isinstance(index, _CONSTANTS):
        return value.get(index, OPAQUE)
    if isinstance(value, (ItemList, tuple)) and isinstance(index, int) and not isinstance(index, bool):
        items = value.items if isinstance(value, ItemList) else value
        return items[index] if -len(items) <= index < len(items) else OPAQUE
    if isinstance(value, Data):
        return value
    return OPAQUE


def binary(walker: Walker, expr: cst.BinaryOperation) -> Any:
    left, right = evaluate(walker, expr.left), evaluate(walker, expr.right)
    kind = type(expr.operator).__name__
    if isinstance(left, (loops.LoopIndex, loops.Count)) or isinstance(right, loops.LoopIndex):
        moved = loops.binary(kind, left, right)  # `i + 1`, `n - 1`
        return OPAQUE if moved is None else moved
    if norms.is_norm_value(left) or norms.is_norm_value(right):
        combined = norms.binary(kind, left, right)
        if combined is not None:
            return combined
        norms.used(walker, left)
        norms.used(walker, right)
        return OPAQUE
    if kind == "Divide" and isinstance(right, WorldSize):
        node = walker.remember(expr)
        if isinstance(left, Data):
            return Data(left.shard_axes, (*left.divisions, (right.axis, node)), left.models)
        if isinstance(left, Synced):
            return Synced(left.bucket, left.index, (*left.ops, ("div", right.axis, node)))
        if isinstance(left, GradRef):
            return GradRef(left.param, (*left.ops, ("div", right.axis, node)))
    if isinstance(left, Data) or isinstance(right, Data):
        return library.merge_data([left, right])
    if isinstance(left, (Synced, GradRef)) or isinstance(right, (Synced, GradRef)):
        return OPAQUE
    if isinstance(left, _CONSTANTS) and isinstance(right, _CONSTANTS) and kind in _ARITH:
        try:
            return _ARITH[kind](left, right)
        except Exception:  # noqa: BLE001 - a constant expression Python itself would reject
            return OPAQUE
    return OPAQUE


def truthy(value: Any) -> bool | None:
    if isinstance(value, _CONSTANTS):
        return bool(value)
    if isinstance(value, (Param, ModuleObj, GradRef, Optimizer, Bucket)):
        return True
    if isinstance(value, ItemList) and not value.spoiled:
        return bool(value.items)
    return None


def test(walker: Walker, expr: cst.BaseExpression) -> bool | None:
    """A condition's truth, or None when the walk cannot tell."""
    if isinstance(expr, cst.BooleanOperation):
        left = test(walker, expr.left)
        is_and = isinstance(expr.operator, cst.And)
        if left is (not is_and):
            return left
        right = test(walker, expr.right)
        if left is None:
            return None if right is None or right is is_and else right
        return right
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = test(walker, expr.expression)
        return None if inner is None else not inner
    if isinstance(expr, cst.Comparison):
        return _compare(walker, expr)
    if isinstance(expr, cst.Attribute):
        value = evaluate(walker, expr.value)
        if isinstance(value, Param) and expr.attr.value not in _OWN_ATTRS:
            walker.tested_attrs.add(expr.attr.value)
            if expr.attr.value not in value.attrs and expr.attr.value not in ("requires_grad", "grad", "main_grad"):
                return None
    return truthy(evaluate(walker, expr))


def _compare(walker: Walker, expr: cst.Comparison) -> bool | None:
    if len(expr.comparisons) != 1:
        return None
    target = expr.comparisons[0]
    left, right = evaluate(walker, expr.left), evaluate(walker, target.comparator)
    op = type(target.operator).__name__
    if isinstance(left, loops.LoopIndex) or isinstance(right, loops.LoopIndex):
        return _compare_index(walker, op, (left, expr.left), (right, target.comparator))
    if op in ("Is", "IsNot") and right is None:
        known = left is None or isinstance(left, (Param, GradRef, ModuleObj, ItemList))
        if not known:
            return None
        return (left is None) == (op == "Is")
    if isinstance(left, _CONSTANTS) and (isinstance(right, _CONSTANTS) or isinstance(right, tuple)):
        try:
            result = {
                "Equal": operator.eq, "NotEqual": operator.ne, "LessThan": operator.lt,
                "GreaterThan": operator.gt, "LessThanEqual": operator.le, "GreaterThanEqual": operator.ge,
                "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b,
            }[op](left, right)  # fmt: skip
        except (KeyError, TypeError):
            return None
        return bool(result)
    return None


def _compare_index(walker: Walker, op: str, left: tuple[Any, Any], right: tuple[Any, Any]) -> bool | None:
    """A micro-batch loop's index compared (loops.py): the other side read as its count by its code when the
    walk does not know its value (`i == num_microbatches - 1`)."""
    index = left[0] if isinstance(left[0], loops.LoopIndex) else right[0]
    sides = []
    for value, node in (left, right):
        if value is OPAQUE:
            value = loops.symbolic(node, index.count, walker.text) or OPAQUE
        sides.append(value)
    return loops.compare(op, sides[0], sides[1])


def comprehension(walker: Walker, expr: cst.ListComp | cst.GeneratorExp) -> Any:
    clause = expr.for_in
    if clause.inner_for_in is not None:
        return OPAQUE
    items = iterate(walker, evaluate(walker, clause.iter))
    if items is None:
        return _repeated(walker, expr)
    out = []
    saved = dict(walker.env)
    try:
        for item in items:
            assign(walker, clause.target, item)
            keep = True
            for cond in clause.ifs:
                truth = test(walker, cond.test)
                if truth is None:
                    return OPAQUE
                keep = keep and truth
            if keep:
                out.append(evaluate(walker, expr.elt))
    finally:
        walker.frame.env = saved  # type: ignore[union-attr]
    return ItemList(out)


def _repeated(walker: Walker, expr: cst.ListComp | cst.GeneratorExp) -> Any:
    """`[Block(...) for i in range(n)]`: modules made alike for an unknown count stand for one, `*` by name."""
    if expr.for_in.ifs:
        return OPAQUE
    saved = dict(walker.env)
    try:
        assign(walker, expr.for_in.target, OPAQUE)
        element = evaluate(walker, expr.elt)
    finally:
        walker.frame.env = saved  # type: ignore[union-attr]
    return ItemList([element], repeated=True) if isinstance(element, (ModuleObj, Param)) else OPAQUE


def _dict_comprehension(walker: Walker, expr: cst.DictComp) -> Any:
    """`{name: m for name, m in pairs}` over items the walk knows, key by key; `{str(e): Expert(...) for e in
    range(...)}` over an unknown range, one module standing for all. What it cannot build forgets what it read."""
    clause = expr.for_in
    source = evaluate(walker, clause.iter)
    items = iterate(walker, source)
    if clause.inner_for_in is not None or (items is None and clause.ifs) or (items and len(items) > MAX_ITEMS):
        sync.forget_value(walker, source)
        return OPAQUE
    saved = dict(walker.env)
    try:
        if items is None:
            assign(walker, clause.target, OPAQUE)
            element = evaluate(walker, expr.value)
            return RepeatedDict({"*": element}) if isinstance(element, (ModuleObj, Param)) else OPAQUE
        out: dict[Any, Any] = {}
        for item in items:
            assign(walker, clause.target, item)
            kept = [test(walker, cond.test) for cond in clause.ifs]
            if None in kept:
                sync.forget_value(walker, source)
                return OPAQUE
            if not all(kept):
                continue
            key, value = evaluate(walker, expr.key), evaluate(walker, expr.value)
            if not isinstance(key, _KEYS):
                sync.forget_value(walker, value)
                return OPAQUE
            out[key] = value
        return out
    finally:
        walker.frame.env = saved  # type: ignore[union-attr]


def iterate(walker: Walker, value: Any) -> list[Any] | None:
    """The elements a loop over `value` takes, one by one; None when the walk does not know them."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return None if spoiled(value) else list(value)
    chunks = library.chunk_items(value)
    if chunks is not None:
        return chunks
    if isinstance(value, Instance):  # an object of the program with an `__iter__`
        method = attribute(walker, value, "__iter__")
        if isinstance(method, MethodRef):
            return iterate(walker, call_function(walker, method.func, value, [], {}))
        return None
    return as_items(value)


def assign(walker: Walker, target: cst.BaseExpression, value: Any) -> None:
    if isinstance(target, cst.Name):
        walker.env[target.value] = value
    elif isinstance(target, (cst.Tuple, cst.List)):
        elements = [e.value for e in target.elements]
        parts = _unpack(value, len(elements))
        for element, part in zip(elements, parts):
            assign(walker, element, part)
    elif isinstance(target, cst.Attribute):
        owner = evaluate(walker, target.value)
        set_attribute(walker, owner, target.attr.value, value)
    elif isinstance(target, cst.Subscript):
        _store_item(walker, target, value)


def _store_item(walker: Walker, target: cst.Subscript, value: Any) -> None:
    """`d[k] = v`, `xs[i] = v` (`self._parameters["b"] = p`) into a container the walk holds; with a key it
    cannot read the container is spoiled (never read stale); into a gradient, that gradient is no longer known."""
    container = evaluate(walker, target.value)
    one = len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index)
    index = evaluate(walker, target.slice[0].slice.value) if one else OPAQUE  # type: ignore[union-attr]
    if type(container) is dict and not spoiled(container) and isinstance(index, _KEYS):
        container[index] = value
    elif isinstance(container, ItemList) and not container.spoiled and type(index) is int and (
        -len(container.items) <= index < len(container.items)
    ):
        container.items[index] = value
    elif isinstance(container, (dict, ItemList)):
        spoil(container)
    elif isinstance(container, GradRef):
        walker.state.forget(container.param)


def _unpack(value: Any, n: int) -> list[Any]:
    if isinstance(value, tuple) and len(value) == n:
        return list(value)
    if isinstance(value, ItemList) and len(value.items) == n and not value.spoiled:
        return list(value.items)
    if isinstance(value, Data):
        return [value] * n
    return [OPAQUE] * n


def set_attribute(walker: Walker, owner: Any, name: str, value: Any) -> None:
    if isinstance(owner, Param):
        if name in ("grad", "main_grad"):
            sync.copy_into(walker, GradRef(owner), value)
            return
        owner.attrs[name] = value
    elif isinstance(owner, ModuleObj):
        if isinstance(value, (Param, ModuleObj)):
            owner.children[name] = value
            owner.attrs.pop(name, None)
        else:
            owner.attrs[name] = value
            owner.children.pop(name, None)
    elif isinstance(owner, Instance):
        owner.attrs[name] = value
    elif isinstance(owner, GradRef) and name in ("data", "grad"):
        walker.state.forget(owner.param)


def augmented(walker: Walker, node: cst.AugAssign) -> None:
    value = evaluate(walker, node.value)
    target = evaluate(walker, node.target)
    if isinstance(node.target, cst.Name) and (norms.is_norm_value(value) or norms.is_norm_value(target)):
        kind = type(node.operator).__name__.replace("Assign", "")
        combined = norms.binary(kind, target, value)
        if combined is None:
            norms.used(walker, target)
        walker.env[node.target.value] = OPAQUE if combined is None else combined
        return
    if isinstance(target, GradRef):
        walker.state.forget(target.param)
        return
    if isinstance(node.target, cst.Name) and isinstance(target, (int, loops.LoopIndex, loops.Count)):
        kind = type(node.operator).__name__.replace("Assign", "")
        # `i += 1`: a loop index moves (loops.binary); a counter of constants counts
        if _constant_int(target) and _constant_int(value) and kind in ("Add", "Subtract"):
            walker.env[node.target.value] = target + value if kind == "Add" else target - value
        else:
            walker.env[node.target.value] = loops.binary(kind, target, value) or OPAQUE
        return
    if isinstance(node.target, cst.Name):
        if isinstance(target, Data) or isinstance(value, Data):
            walker.env[node.target.value] = library.merge_data([target, value])
        else:
            walker.env[node.target.value] = OPAQUE
    for v in (value,):
        sync.forget_value(walker, v) if isinstance(v, _WALKED) and not isinstance(v, ItemList) else None


def _constant_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def evaluate_call(walker: Walker, node: cst.Call) -> Any:
    func = evaluate(walker, node.func)
    args: list[tuple[Any, cst.BaseExpression]] = []
    kwargs: dict[str, tuple[Any, cst.BaseExpression]] = {}
    for arg in node.args:
        value = evaluate(walker, arg.value)
        if arg.star:
            if not arguments.spread(value, arg.star, arg.value, args, kwargs):
                for passed, _ in [*args, *kwargs.values(), (value, arg.value)]:
                    sync.forget_value(walker, passed)
                return OPAQUE
            continue
        if arg.keyword is not None:
            kwargs[arg.keyword.value] = (value, arg.value)
        else:
            args.append((value, arg.value))
    return call(walker, func, args, kwargs, node)


def call(walker: Walker, func: Any, args: list, kwargs: dict, node: cst.Call) -> Any:
    if isinstance(func, FunctionValue):
        through = engine_values.forwarded(walker, func, args)
        if through is not None and through[0] is not func:  # `call(fn, *args, **kwargs)`: `fn` called right here
            return call(walker, through[0], through[1], kwargs, node)
        return call_function(walker, func, None, args, kwargs)
    if isinstance(func, MethodRef):
        return call_function(walker, func.func, func.receiver, args, kwargs)
    if isinstance(func, ClassValue):
        return library.instantiate(walker, func, args, kwargs, node)
    if isinstance(func, Builtin):
        values = [v for v, _ in args]
        if func.name in ("getattr", "setattr") and len(values) >= 2 and isinstance(values[0], ModuleObj):
            if isinstance(values[1], str) and func.name == "setattr" and len(values) == 3 and not kwargs:
                set_attribute(walker, values[0], values[1], values[2])  # as `self.x = v`
                return None
        if func.name == "getattr" and len(values) == 2 and isinstance(values[1], str) and not kwargs:
            if not isinstance(values[0], Param):  # (a parameter's: its marks, read by call_builtin)
                return attribute(walker, values[0], values[1])  # as `x.name`: `getattr(optimizer, "step")()`
        if func.name in ("filter", "map") and len(values) == 2 and not kwargs:
            applied = _apply_each(walker, func.name, values[0], values[1], node)
            if applied is not None:
                return applied
        return library.call_builtin(walker, func.name, args, kwargs, node)
    if isinstance(func, Bound):
        return library.call_method(walker, func.receiver, func.name, args, kwargs, node)
    if isinstance(func, Qual):
        return library.call_library(walker, func.name, args, kwargs, node)
    if isinstance(func, ModuleObj):
        return library.merge_data([v for v, _ in args] + [Data(models=(func,))])
    if isinstance(func, Instance) and isinstance(attribute(walker, func, "__call__"), MethodRef):
        return call_function(walker, func.cls.lookup("__call__"), func, args, kwargs)
    if isinstance(func, Partial):  # the bound arguments first, this call's keywords over the bound ones
        return call(walker, func.func, [*func.args, *args], {**func.kwargs, **kwargs}, node)
    for value, _ in [*args, *kwargs.values()]:
        sync.forget_value(walker, value)
    return OPAQUE


def _apply_each(walker: Walker, name: str, func: Any, iterable: Any, node: cst.Call) -> ItemList | None:
    """`filter(fn, xs)` / `map(fn, xs)` (`filter(lambda p: p.requires_grad, model.parameters())`) over items the
    walk knows, `fn` called on each as `fn(x)` is; None: not known (then the builtin's generic handling)."""
    items = iterate(walker, iterable)
    if items is None or len(items) > MAX_ITEMS or not isinstance(func, (FunctionValue, MethodRef, Partial)):
        return None
    out: list[Any] = []
    for item in items:
        result = call(walker, func, [(item, node)], {}, node)
        if name == "map":
            out.append(result)
        elif type(result) is not bool:
            return None  # a test the walk cannot decide
        elif result:
            out.append(item)
    return ItemList(out)


def call_function(walker: Walker, func: FunctionValue, receiver: Any, args: list, kwargs: dict) -> Any:
    """A function of the program: walked with its arguments (a generator run to its end: `run_generator`)."""
    fn = func.node
    if func.scope is None:
        return OPAQUE
    if accumulation.is_context_manager(fn) and arguments.is_generator(fn):
        env = arguments.bind(walker, func, receiver, args, kwargs)
        if env is not None:
            return accumulation.GeneratorContext(fn, func.scope, env, receiver, func.owner, fn)
    env = arguments.bind(walker, func, receiver, args, kwargs)
    if env is None:
        for value, _ in [*args, *kwargs.values()]:
            sync.forget_value(walker, value)
        return OPAQUE
    if func.closure is not None:  # a function defined in another (a lambda): the names it was made with
        env = {**engine_values.closure_names(walker, func), **env}
    if arguments.is_generator(fn):
        return run_generator(walker, func, receiver, env, args)
    return walker.run_function(fn, func.scope, env, receiver, func.owner)


def run_generator(walker: Walker, func: FunctionValue, receiver: Any, env: dict[str, Any], args: list) -> Any:
    """A generator function of the program, run to its end when called: the list of what it yields (a loop
    over it walks each element). When the walk cannot tell what or how many (buckets cut by a size it does
    not know, a loop over a loader), its first list or counted argument yielded whole: each element goes
    through the loop's body as it would in any split (a counted sequence stays one: a loop over it is a
    micro-batch loop as a loop over the argument is). What its body does to a gradient after its first yield
    would interleave with the loop's body: those gradients are forgotten."""
    yields = Yields()
    before = walker.state.copy()
    returned = walker.run_function(func.node, func.scope, env, receiver, func.owner, yields)
    if yields.first is not None:
        after = walker.state
        for key in set(after.grads) | set(yields.first.grads):
            if after.grads.get(key) != yields.first.grads.get(key):
                after.forget(after.params[key[0]]) if key[0] in after.params else None
    if yields.unknown or returned is OPAQUE or len(yields.items) > MAX_ITEMS:
        lists = [v for v, _ in args if (isinstance(v, ItemList) and not v.spoiled) or isinstance(v, loops.Counted)]
        if lists:
            walker.state = before  # what the run forgot on its way is the list's, given whole
            return lists[0] if isinstance(lists[0], loops.Counted) else ItemList([lists[0]])
        for value, _ in args:
            sync.forget_value(walker, value)
        return OPAQUE
    return ItemList(yields.items)


def _yield(walker: Walker, expr: cst.Yield) -> Any:
    """`yield x` / `yield from xs` in a generator `run_generator` runs: what the loop over it gets (a list
    as it is at the yield); the value of the expression (what a `for` sends) is None."""
    out = walker.frame.yields  # type: ignore[union-attr]
    if isinstance(expr.value, cst.From):
        values = iterate(walker, evaluate(walker, expr.value.item))
    else:
        values = [None if expr.value is None else evaluate(walker, expr.value)]
    if out is None:
        return OPAQUE
    if values is None:
        out.unknown = True
        return OPAQUE
    if out.first is None:
        out.first = walker.state.copy()
    out.items.extend(ItemList(list(v.items), v.repeated) if isinstance(v, ItemList) else v for v in values)
    return None



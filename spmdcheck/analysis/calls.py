"""Call dispatch: from a callee value to the rule that types it, and calls into the file's own functions."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from spmdcheck.analysis import contracts, ops, spmd_api, transfer
from spmdcheck.analysis.binding import Arg, bind
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.typeexpr import TypeExprError, group_parameter, is_opaque_axis, type_dict
from spmdcheck.analysis.values import (
    NUMBER,
    UNKNOWN,
    Alternatives,
    Assumed,
    BoundMethod,
    BuiltinValue,
    Chain,
    ClassValue,
    ContextValue,
    DictValue,
    DimSize,
    FunctionValue,
    Homogeneous,
    InstanceValue,
    LazyImport,
    Literal,
    LocalMapValue,
    MeshValue,
    MethodValue,
    ModuleRef,
    PyNumber,
    RankValue,
    Seq,
    ShapeValue,
    SuperValue,
    TensorValue,
    TrustedForward,
    TypeValue,
    Value,
    carries_types,
    join,
    share_objects,
)
from spmdcheck.lattice import AxisType, GradState, Kind, Linearity, Operand, SpmdType, infer_axis
from spmdcheck.rules.model import OpRule, Param, ParamRole, Returns
from spmdcheck.rules.typespec import TypeSpecError, parse_type_spec

if TYPE_CHECKING:
    from spmdcheck.analysis.interpreter import Interpreter

MAX_COMBINATIONS = 8


def _default_tensor_rule(qualname: str, method: bool) -> OpRule:
    """spmd_types types every torch op it sees; an op missing from the stubs is NONLINEAR."""
    params = (Param("self", ParamRole.TENSOR, True, False),) if method else ()
    params = params + (Param("args", ParamRole.TENSOR_OR_NUMBER, True, False, variadic=True),)
    return OpRule(qualname=qualname, params=params, linearity=Linearity.NONLINEAR)


def dispatch(interp: Interpreter, func: Value, args: list[Arg], node: cst.Call) -> Value:
    if isinstance(func, LocalMapValue):
        return spmd_api.call_local_map(interp, func, args, node)
    declared = contracts.rule_of(interp, func)
    if declared is not None:
        return contracts.build(interp, declared, args, node)  # a layout or a module contract, read as data
    if isinstance(func, LazyImport):
        registry = interp.ctx.registry
        stubbed = _declaration(registry.lookup(registry.resolve_alias(f"{func.module}.{func.name}")))
        if stubbed is not None:
            return apply_rule(interp, stubbed, args, node)  # a stub (or a config key) describes this helper
        if not any(carries_types(v) for _, v, _ in args):
            return UNKNOWN  # a library function given nothing typed can produce no finding and no type
        func = interp.resolve_lazy(func)
    if isinstance(func, ModuleRef):
        qual = interp.ctx.registry.resolve_alias(func.qualname)
        rule = interp.ctx.registry.lookup(qual)
        if rule is None:
            if qual.startswith("torch.") and not qual.startswith("torch.distributed") and _has_tensor(args):
                rule = _default_tensor_rule(qual, False)
                rule.params = (Param("args", ParamRole.TENSOR, True, False, variadic=True),)
            else:
                return UNKNOWN  # gradual typing: an unknown callee checks nothing
        return apply_rule(interp, rule, args, node)
    if (
        isinstance(func, BoundMethod)
        and isinstance(func.receiver, DictValue)
        and func.qualname.startswith("builtins.dict.")
    ):
        return _dict_view(func.receiver, func.qualname.rsplit(".", 1)[1])
    if isinstance(func, BoundMethod):
        if isinstance(func.receiver, (TensorValue, Alternatives)):
            return call_method(
                interp,
                func.receiver,
                func.qualname,
                args,
                node,
                receiver_node=node.func.value if isinstance(node.func, cst.Attribute) else node,
            )
        rule = interp.ctx.registry.lookup(func.qualname)
        if rule is None:
            return UNKNOWN
        receiver_node = node.func.value if isinstance(node.func, cst.Attribute) else node
        return apply_rule(interp, rule, [(None, func.receiver, receiver_node), *args], node)
    if isinstance(func, FunctionValue):
        declared = _declared_rule(interp, func)
        if declared is not None:
            return apply_rule(interp, declared, args, node)  # a stub (or a config key) describes this helper
        return call_function(interp, func, args, node)
    if isinstance(func, contracts.ConfigBuilder):
        return contracts.build_module(interp, func) or UNKNOWN  # `config.w1.build()`: a typed field's module
    if isinstance(func, MethodValue):
        return call_function(interp, func.func, args, node, receiver=func.receiver)
    if isinstance(func, TrustedForward):
        return _trusted_forward(interp, func, args, node)
    if isinstance(func, ClassValue):
        return instantiate(interp, func, args, node)
    if isinstance(func, Chain) and len(args) == 1:
        value = args[0]
        for module in func.items:
            value = (None, dispatch(interp, module, [value], node), value[2])
        return value[1]
    if isinstance(func, InstanceValue):
        call = func.cls.lookup("forward") if func.cls.lookup("__call__") is None else func.cls.lookup("__call__")
        if isinstance(call, FunctionValue):
            routed = contracts.call_module(interp, func, call, args, node)
            if routed is not None:
                return routed  # a module contract: its wrapper redistributes the arguments and the output
            return call_function(interp, call, args, node, receiver=func)
        return contracts.call_opaque_module(interp, func, args) or UNKNOWN
    if isinstance(func, BuiltinValue) and func.name == "super":
        owner, receiver = interp.frame.owner, _receiver_of(interp)
        if owner is not None and receiver is not None:
            return SuperValue(owner, receiver)
    if isinstance(func, BuiltinValue) and func.name == "isinstance" and len(args) == 2:
        return _isinstance(interp, args[0][1], args[1][1])
    if isinstance(func, BuiltinValue) and func.name in ("tuple", "list") and len(args) == 1 and args[0][0] is None:
        items = args[0][1]
        if isinstance(items, Seq):
            return Seq(items.items, is_list=func.name == "list")
        return items if isinstance(items, Homogeneous) else UNKNOWN
    if isinstance(func, BuiltinValue) and func.name in RANK_PRESERVING_BUILTINS:
        ranks = [v for _, v, _ in args if isinstance(v, RankValue)]
        if ranks:
            value = ranks[0]
            for other in ranks[1:]:
                value = value.combine(other)
            return value
    return UNKNOWN


# Builtins whose result differs across ranks when an argument does (`range(rank)` as a loop bound).
RANK_PRESERVING_BUILTINS = frozenset({"range", "int", "float", "min", "max", "abs", "bool", "divmod", "round"})


def _declared_rule(interp: Interpreter, func: FunctionValue) -> OpRule | None:
    """A module-level function of the checked program that a stub describes: the stub's rule wins, as a
    declaration does (torchtitan's `get_spmd_backend`, a project's `_tp_group_from_context`)."""
    if func.owner is not None:
        return None
    module = getattr(getattr(func.scope, "ctx", None), "module_file", None)
    if module is None or not module.name:
        return None
    registry = interp.ctx.registry
    return _declaration(registry.lookup(registry.resolve_alias(f"{module.name}.{func.qualname}")))


def _declaration(rule: OpRule | None) -> OpRule | None:
    """A stub rule that stands for checked code: not a @model (whose body is the checked code's stand-in
    anyway) nor a plain class entry (the class's own body builds its objects)."""
    if rule is None or rule.model_path is not None or (rule.opaque and rule.returns is Returns.VALUE):
        return None
    return rule


def _isinstance(interp: Interpreter, value: Value, classes: Value) -> Value:
    """`isinstance(t, DTensor)` for a tensor the checker types: what the stubs declare (@instance_test)."""
    if not (isinstance(value, TensorValue) and value.typed and not value.opaque):
        return UNKNOWN
    answers = set()
    for cls in classes.items if isinstance(classes, Seq) else (classes,):
        rule = None
        if isinstance(cls, ModuleRef):
            registry = interp.ctx.registry
            rule = registry.lookup(registry.resolve_alias(cls.qualname))
        if rule is None or rule.instance_test is None:
            return UNKNOWN
        answers.add(rule.instance_test)
    return Assumed(True in answers) if answers else UNKNOWN


def _trusted_forward(interp: Interpreter, func: TrustedForward, args: list[Arg], node: cst.Call) -> Value:
    """An autograd Function's forward under its typecheck_forward: run unchecked on the asserted inputs.

    Its result keeps only what its forward values say: a pending sum, a varying or sharded value. R and I
    differ only in their gradients, which the Function's own backward decides, so those axes are left for
    typecheck_forward's assert on the result to declare.
    """
    saved = interp.checking
    interp.checking = False
    try:
        result = call_function(interp, func.method.func, args, node, receiver=func.method.receiver)
    finally:
        interp.checking = saved
    return _forward_values(result)


def _forward_values(value: Value) -> Value:
    if isinstance(value, TensorValue):
        axes = {a: t for a, t in value.type.items() if t.kind not in (Kind.R, Kind.I)}
        return TensorValue(SpmdType(axes), value.grad, value.rank, opaque=value.opaque or not axes)
    if isinstance(value, Seq):
        return Seq(tuple(_forward_values(v) for v in value.items), value.is_list)
    return UNKNOWN


def _dict_view(d: DictValue, view: str) -> Value:
    """`d.values()`, `d.items()`, `d.keys()` of a dict with known entries: a sequence of them."""
    if view == "values":
        return Seq(tuple(v for _, v, _ in d.items))
    if view == "keys":
        return Seq(tuple(k for k, _, _ in d.items))
    return Seq(tuple(Seq((k, v)) for k, v, _ in d.items))


def instantiate(interp: Interpreter, cls: ClassValue, args: list[Arg], node: cst.Call) -> Value:
    """`Cls(...)`: a new object, its `__init__` run with the call's arguments."""
    obj = InstanceValue(cls)
    contracts.attach_from_call(interp, cls, args)
    init = cls.lookup("__init__")
    if isinstance(init, FunctionValue):
        call_function(interp, init, args, node, receiver=obj)
    return obj


def takes_self(fn: cst.FunctionDef) -> bool:
    """A method called on an object binds its first parameter (not static, not a class method)."""
    for dec in fn.decorators:
        expr = dec.decorator
        if isinstance(expr, cst.Name) and expr.value in ("staticmethod", "classmethod"):
            return False
    return bool(fn.params.posonly_params or fn.params.params)


def _receiver_of(interp: Interpreter) -> Value | None:
    fn = interp.frame.function
    if fn is None or not takes_self(fn):
        return None
    first = (list(fn.params.posonly_params) + list(fn.params.params))[0].name.value
    return interp.frame.env.get(first)


def _has_tensor(args: list[Arg]) -> bool:
    return any(isinstance(v, (TensorValue, Alternatives)) for _, v, _ in args)


def call_method(
    interp: Interpreter, receiver: Value, qualname: str, args: list[Arg], node: cst.CSTNode, receiver_node: cst.CSTNode
) -> Value:
    rule = interp.ctx.registry.lookup(qualname) or _default_tensor_rule(qualname, True)
    return apply_rule(interp, rule, [(None, receiver, receiver_node), *args], node)  # type: ignore[list-item]


def apply_rule(interp: Interpreter, rule: OpRule, args: list[Arg], node: cst.CSTNode) -> Value:
    """Expand variables that differ by branch, then type the call once per combination."""
    alt_positions = [i for i, (_, v, _) in enumerate(args) if isinstance(v, Alternatives)]
    if not alt_positions:
        return _apply_rule(interp, rule, args, node)
    choices = [args[i][1].options for i in alt_positions]  # type: ignore[union-attr]
    combos = list(itertools.islice(itertools.product(*choices), MAX_COMBINATIONS))
    results: list[tuple[Value, tuple]] = []
    captured: list[list[Finding]] = []
    writes: list[tuple[list, tuple]] = []
    outer_effects = interp.effects
    for combo in combos:
        trial = list(args)
        path: tuple = ()
        for i, (tensor, branch_path) in zip(alt_positions, combo):
            trial[i] = (args[i][0], tensor, args[i][2])
            path = path + tuple(b for b in branch_path if b not in path)
        before = len(interp.ctx.findings)
        saved_seen = set(interp.ctx._seen)
        interp.effects = []
        try:
            result = _apply_rule(interp, rule, trial, node)
        finally:
            writes.append((interp.effects, path))
            interp.effects = outer_effects
        captured.append(interp.ctx.findings[before:])
        del interp.ctx.findings[before:]
        interp.ctx._seen = saved_seen
        results.append((result, path))
    _merge_branch_findings(interp, captured, [p for _, p in results])
    interp.join_effects(writes)
    if all(isinstance(r, TensorValue) for r, _ in results):
        distinct: list[tuple[Value, tuple]] = []
        for r, p in results:
            if not any(r == d for d, _ in distinct):
                distinct.append((r, p))
        if len(distinct) > 1:
            return Alternatives(tuple(distinct))  # type: ignore[arg-type]
        return distinct[0][0]
    value = results[0][0]
    for result, _ in results[1:]:
        value = value if value == result else join(value, result)
    return value


def _merge_branch_findings(interp: Interpreter, captured: list[list[Finding]], paths: list[tuple]) -> None:
    """A finding in every combination is unconditional; one in some names the branches."""
    keys: dict[tuple, list[int]] = {}
    first: dict[tuple, Finding] = {}
    for i, findings in enumerate(captured):
        for f in findings:
            k = (f.code, id(f.node), f.message)
            keys.setdefault(k, []).append(i)
            first.setdefault(k, f)
    for k, where in keys.items():
        f = first[k]
        if len(set(where)) < len(captured):
            f.branches = paths[where[0]]
        interp.ctx.report(f)


def _apply_rule(interp: Interpreter, rule: OpRule, args: list[Arg], node: cst.CSTNode) -> Value:
    """One call typed by its rule: the transfer function of the rule's kind (analysis/transfer.py)."""
    if rule.overloads:
        chosen = _overload_for(rule.overloads, args)
        if chosen is None:
            return UNKNOWN  # no overload is known to apply (a keyword the checker cannot read): silent
        rule = chosen
    return transfer.TRANSFER[rule.kind](interp, rule, bind(rule, args), args, node)


def _overload_for(overloads: tuple[OpRule, ...], args: list[Arg]) -> OpRule | None:
    """The first @overload whose `Literal[...]` parameters the call's constants (or defaults) satisfy."""
    for candidate in overloads:
        bound = bind(candidate, args)
        if all(_literal_in(bound.literal(candidate, name), allowed) for name, allowed in candidate.literal_params):
            return candidate
    return None


# Constant folding stays on small numbers: `10**10**10` in an annotation must not be computed.
MAX_FOLD_BITS = 4096


def _foldable(left: float, right: float, dunder: str) -> bool:
    ints = [v for v in (left, right) if isinstance(v, int)]
    if any(abs(v).bit_length() > MAX_FOLD_BITS for v in ints):
        return False
    if dunder == "__pow__" and isinstance(right, int) and right > 0 and abs(left) > 1:
        return abs(int(left)).bit_length() * right <= MAX_FOLD_BITS if isinstance(left, int) else right <= 1100
    if dunder == "__lshift__" and isinstance(right, int):
        return right <= MAX_FOLD_BITS
    return True


def _literal_in(value: object, allowed: tuple[object, ...]) -> bool:
    return any(value is a or (type(value) is type(a) and value == a) for a in allowed)


def python_arith(left: Value, right: Value, dunder: str) -> Value:
    from spmdcheck.analysis.values import PyNumber

    if isinstance(left, RankValue):
        return left.combine(right)
    if isinstance(right, RankValue):
        return right.combine(left)
    numeric = (PyNumber, Literal)
    if (
        isinstance(left, numeric)
        and isinstance(right, numeric)
        and (isinstance(left, PyNumber) or isinstance(right, PyNumber))
    ):
        return NUMBER
    if isinstance(left, Literal) and isinstance(right, Literal):
        try:
            import operator

            fn = getattr(operator, dunder.strip("_"), None)
            if fn is not None and isinstance(left.value, (int, float)) and isinstance(right.value, (int, float)):
                if not _foldable(left.value, right.value, dunder):
                    return UNKNOWN
                return Literal(fn(left.value, right.value))
        except Exception:  # noqa: BLE001 - e.g. division by zero: just unknown
            return UNKNOWN
    if isinstance(left, Literal) and isinstance(left.value, (int, float)) and isinstance(right, Literal):
        return UNKNOWN
    return UNKNOWN


# ---------------------------------------------------------------- subscripts
def getitem(interp: Interpreter, base: Value, node: cst.Subscript) -> Value:
    index_values = [
        interp.eval(el.slice.value) if isinstance(el.slice, cst.Index) else _eval_slice(interp, el.slice)
        for el in node.slice
    ]
    if isinstance(base, (TensorValue, Alternatives)):
        return _tensor_getitem(interp, base, node, index_values)
    if (
        isinstance(base, Seq)
        and len(index_values) == 1
        and isinstance(index_values[0], Literal)
        and isinstance(index_values[0].value, int)
    ):
        i = index_values[0].value
        if -len(base.items) <= i < len(base.items):
            return base.items[i]
        return UNKNOWN
    if isinstance(base, Homogeneous):
        return base.item
    if isinstance(base, ShapeValue) and len(node.slice) == 1:
        return _shape_item(interp, base, node.slice[0].slice, index_values[0])
    if isinstance(base, DictValue) and len(index_values) == 1 and isinstance(index_values[0], Literal):
        # a dict with constant keys (an nn.ModuleDict of layers, a config dict)
        return next((v for k, v, _ in base.items if k == index_values[0]), UNKNOWN)
    if isinstance(base, MeshValue) and len(index_values) == 1 and isinstance(index_values[0], Literal):
        name = index_values[0].value
        if isinstance(name, str):
            return MeshValue((name,))
    return UNKNOWN


def _shape_item(interp: Interpreter, shape: ShapeValue, index: cst.BaseSlice, value: Value) -> Value:
    """`x.shape[i]` (one dim's size) and `x.shape[a:b]` with constant bounds (those dims' sizes)."""
    if isinstance(index, cst.Index):
        if isinstance(value, Literal) and isinstance(value.value, int) and not isinstance(value.value, bool):
            return DimSize(shape.tensor, value.value)
        return NUMBER
    if isinstance(index, cst.Slice) and index.step is None:
        bounds = [interp.eval(part) if part is not None else Literal(None) for part in (index.lower, index.upper)]
        if all(isinstance(b, Literal) and (b.value is None or type(b.value) is int) for b in bounds):
            return shape.slice(bounds[0].value, bounds[1].value)  # type: ignore[union-attr]
    return UNKNOWN


def _eval_slice(interp: Interpreter, s: cst.BaseSlice) -> Value:
    if isinstance(s, cst.Slice):
        for part in (s.lower, s.upper, s.step):
            if part is not None:
                interp.eval(part)
        return Literal(slice(None))
    return UNKNOWN


def _tensor_getitem(interp: Interpreter, base: Value, node: cst.Subscript, index: list[Value]) -> Value:
    """Basic indexing is linear (a deliberate difference); boolean/advanced indexing is not."""
    advanced = any(isinstance(v, (TensorValue, Alternatives, Seq)) for v in index)
    qual = "torch.Tensor.__getitem__"
    rule = interp.ctx.registry.lookup(qual)
    if rule is None:
        rule = _default_tensor_rule(qual, True)
    if advanced:
        rule = OpRule(qualname=qual, params=rule.params, linearity=Linearity.NONLINEAR)
    index_args = [(None, v, node) for v in index if isinstance(v, (TensorValue, Alternatives))]
    result = apply_rule(interp, rule, [(None, base, node.value), *index_args], node)
    if isinstance(result, TensorValue):
        result = _index_layout(base, result, index)
    return result


def _index_layout(base: Value, result: TensorValue, index: list[Value]) -> TensorValue:
    """Move the shard dim through basic indexing: ints drop a dim, None adds one, slices keep (but cut a block)."""
    rank = base.rank if isinstance(base, TensorValue) else None
    axes = {}
    for axis, t in result.type.items():
        if t.kind is not Kind.V or t.shard is None:
            axes[axis] = t
            continue
        shard = t.shard if t.shard >= 0 or rank is None else t.shard + rank
        if shard < 0 or any(isinstance(v, Literal) and v.value is Ellipsis for v in index):
            axes[axis] = AxisType(Kind.V, pending=t.pending)
            continue
        pos, new_pos, kept = 0, 0, None
        for v in index:
            if isinstance(v, Literal) and v.value is None:
                new_pos += 1
                continue
            if pos == shard:
                if isinstance(v, Literal) and isinstance(v.value, slice) and v.value == slice(None):
                    kept = new_pos
                break
            if isinstance(v, Literal) and isinstance(v.value, int) and not isinstance(v.value, bool):
                pos += 1
                continue
            pos += 1
            new_pos += 1
        else:
            kept = new_pos + (shard - pos)
        axes[axis] = (
            AxisType(Kind.V, shard=kept, pending=t.pending)
            if t.pending is None or kept is None
            else AxisType(Kind.V, pending=t.pending)
        )
    return TensorValue(SpmdType(axes), result.grad, None)


def setitem(interp: Interpreter, target: cst.Subscript, value: Value, value_node: cst.CSTNode | None) -> None:
    """`x[i] = y` mutates x: checked like an in-place op (a deliberate difference from spmd_types)."""
    base = interp.eval(target.value)
    for el in target.slice:
        if isinstance(el.slice, cst.Index):
            interp.eval(el.slice.value)
    if isinstance(base, TensorValue) and not isinstance(value, (TensorValue, Alternatives, Literal, PyNumber)):
        # A value the checker cannot model (it may be a tensor of any type) written into the tensor: what
        # the tensor holds afterwards is not known, and unknown is silent.
        interp.rebind(target.value, TensorValue(SpmdType(), base.grad, base.rank, opaque=True))
        return
    if not isinstance(base, TensorValue) or not isinstance(value, TensorValue):
        return
    axes: dict[str, AxisType] = {}
    for axis in sorted(set(base.type) & set(value.type)):
        old, new = base.type[axis], value.type[axis]
        # the tensor holds both its old values and the written ones: combined as operands, it keeps its type
        # when that is what they infer to (replicated data written into a varying buffer leaves it varying)
        kept = old.kind is new.kind or infer_axis(
            [Operand(old.kind, base.grad), Operand(new.kind, value.grad)], Linearity.LINEAR
        ) is old.kind
        axes[axis] = old if kept else new
    for axis in set(base.type) - set(value.type):
        axes[axis] = base.type[axis]
    merged = TensorValue(SpmdType(axes), GradState.join([base.grad, value.grad]), base.rank)
    ops.check_mutation(interp, base, merged, target.value, target, "SPMD111", "x[...] = y")


# ---------------------------------------------------------------- annotations


@dataclass
class Decorations:
    skip: bool = False
    grad_enabled: bool | None = None  # @torch.no_grad() / @torch.enable_grad()
    in_types: list | None = None
    out_types: Value | None = None


def function_decorations(interp: Interpreter, fn: cst.FunctionDef) -> Decorations:
    decor = Decorations()
    for dec in fn.decorators:
        expr = dec.decorator
        call_args: list[cst.Arg] = []
        if isinstance(expr, cst.Call):
            call_args = list(expr.args)
            expr = expr.func
        value = interp.eval(expr)
        if not isinstance(value, ModuleRef):
            continue
        rule = interp.ctx.registry.lookup(interp.ctx.registry.resolve_alias(value.qualname))
        if rule is None:
            continue
        if rule.context in ("no_grad", "enable_grad"):
            decor.grad_enabled = rule.context == "enable_grad"
        elif rule.context == "no_typecheck":
            out = next((a for a in call_args if a.keyword and a.keyword.value == "out_types"), None)
            if out is None:
                decor.skip = True
            else:
                decor.out_types = interp.eval(out.value)
        elif rule.spmd_api == "local_map":
            for a in call_args:
                if a.keyword and a.keyword.value == "out_types":
                    decor.out_types = interp.eval(a.value)
                elif a.keyword and a.keyword.value == "in_types":
                    v = interp.eval(a.value)
                    decor.in_types = list(v.items) if isinstance(v, Seq) else None
    return decor


def annotation_type(interp: Interpreter, ann: cst.BaseExpression) -> dict[str, AxisType] | None:
    """`Annotated[Tensor, {"tp": V}]`, `Annotated[Tensor, "tp: V"]` or `Local["tp: V"]` -> axes; else None."""
    if isinstance(ann, cst.SimpleString) or isinstance(ann, cst.ConcatenatedString):
        try:
            inner = cst.parse_expression(ann.evaluated_value)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - a string annotation we cannot parse is not ours
            return None
        return annotation_type(interp, inner)
    if not isinstance(ann, cst.Subscript):
        return None
    head = interp.eval(ann.value)
    if not isinstance(head, ModuleRef):
        return None
    qual = head.qualname
    elements = [el.slice.value for el in ann.slice if isinstance(el.slice, cst.Index)]
    if qual in ("typing.Annotated", "typing_extensions.Annotated") and len(elements) >= 2:
        for meta in elements[1:]:
            axes = _metadata_type(interp, meta)
            if axes is not None:
                return axes
        return None
    if qual.endswith("annotations.Local") and qual.startswith("spmdcheck") and elements:
        value = interp.eval(elements[0])
        if isinstance(value, Literal) and isinstance(value.value, str):
            return _spec_string(interp, value.value, ann)
        interp.report(Finding("SPMD002", ann, 'Local[...] takes a string like "tp: V, dp: S(0)"'))
    return None


def _spec_string(interp: Interpreter, text: str, node: cst.CSTNode) -> dict[str, AxisType] | None:
    """The short spelling `"tp: V, dp: S(0)"`, in `Local[...]` or `Annotated[T, ...]`."""
    try:
        return _check_axes(interp, parse_type_spec(text), node)
    except TypeSpecError as exc:
        interp.report(Finding("SPMD002", node, f"cannot read this SPMD type: {exc}"))
        return None


def _metadata_type(interp: Interpreter, meta: cst.BaseExpression) -> dict[str, AxisType] | None:
    value = interp.eval(meta)
    from spmdcheck.analysis.values import DictValue

    if isinstance(value, Literal) and isinstance(value.value, str):
        return _spec_string(interp, value.value, meta)
    if isinstance(value, (DictValue, TypeValue)):
        try:
            td = type_dict(value)
        except TypeExprError as exc:
            interp.report(Finding("SPMD002", meta, f"cannot read this SPMD type: {exc}"))
            return None
        return spmd_api.asserted_axes(interp, td, meta)
    return None


def _check_axes(interp: Interpreter, axes: dict[str, AxisType], node: cst.CSTNode) -> dict[str, AxisType]:
    known = interp.ctx.known_axes
    out = {}
    for axis, t in axes.items():
        if known and axis not in known and not is_opaque_axis(axis):
            interp.report(
                Finding(
                    "SPMD003", node, f"unknown mesh axis {axis!r}; the mesh in scope has {', '.join(sorted(known))}"
                )
            )
            continue
        out[axis] = t
    return out


def _annotation_words(interp: Interpreter, node: cst.BaseExpression) -> str:
    """The names and strings an annotation is made of (`Optional[dist.ProcessGroup]`: "Optional dist
    ProcessGroup"), read without libcst's code generator for the usual shapes; the source text otherwise."""
    words: list[str] = []
    todo = [node]
    while todo:
        kind = type(todo[-1])
        item = todo.pop()
        if kind is cst.Name:
            words.append(item.value)
        elif kind is cst.Attribute:
            words.append(item.attr.value)
            todo.append(item.value)
        elif kind is cst.Subscript:
            todo.append(item.value)
            for element in item.slice:
                todo.append(element.slice.value if type(element.slice) is cst.Index else element.slice)
        elif kind is cst.BinaryOperation:
            todo.extend((item.left, item.right))
        elif kind is cst.SimpleString:
            words.append(item.value)
        else:
            words.append(interp.ctx.text_of(item))
    return " ".join(words)


def parameter_values(
    interp: Interpreter,
    fn: cst.FunctionDef,
    decor: Decorations,
    args: list[Arg] | None,
    receiver: Value | None = None,
) -> list[tuple[str, Value]]:
    """Parameters' values: the call's arguments when inlining, checked against annotations.

    `receiver` binds the first parameter of a method (`self`); `args` None means the function is
    checked on its own (parameters typed by their annotations, defaults unknown).
    """
    params = list(fn.params.posonly_params) + list(fn.params.params)
    kwonly = list(fn.params.kwonly_params)
    bound: dict[str, tuple[Value, cst.CSTNode] | None] = {p.name.value: None for p in params + kwonly}
    extra_positional: list[Arg] = []
    extra_keywords: list[Arg] = []
    if receiver is not None and params:
        bound[params[0].name.value] = (receiver, fn)
        params_to_fill = params[1:]
    else:
        params_to_fill = params
    if args is not None:
        positional = [a for a in args if a[0] is None]
        for p, a in zip(params_to_fill, positional):
            bound[p.name.value] = (a[1], a[2])
        extra_positional = positional[len(params_to_fill) :]
        for k, v, n in args:
            if k is not None and k != "*":
                if k in bound:
                    bound[k] = (v, n)
                else:
                    extra_keywords.append((k, v, n))
        if any(k == "*" for k, _, _ in args):
            # an unpacked sequence of unknown length: parameters past it are unknown, not their defaults
            for p in params_to_fill[len(positional) :]:
                if bound[p.name.value] is None:
                    bound[p.name.value] = (UNKNOWN, fn)
    out: list[tuple[str, Value]] = []
    for i, p in enumerate(params + kwonly):
        name = p.name.value
        declared = annotation_type(interp, p.annotation.annotation) if p.annotation is not None else None
        if declared is None and decor.in_types is not None and i < len(decor.in_types):
            try:
                declared = type_dict(decor.in_types[i]).axes
            except TypeExprError:
                declared = None
        given = bound[name]
        if given is None:
            if args is not None and p.default is not None:
                value = interp.eval(p.default)
            else:
                value = TensorValue(SpmdType(declared), GradState.UNKNOWN, None) if declared else UNKNOWN
                if args is None and p.annotation is not None:
                    value = group_parameter(name, _annotation_words(interp, p.annotation.annotation)) or value
                if value is UNKNOWN:
                    value = contracts.config_parameter(interp, p.annotation, receiver, interp.frame.owner) or value
        else:
            value = given[0]
            if value is UNKNOWN:  # a module's config object, known by its annotation only
                value = contracts.config_parameter(interp, p.annotation, receiver, interp.frame.owner) or value
            if declared:
                checked = check_declared(interp, value, declared, given[1], "SPMD403", f"argument `{name}`")
                # like mypy: past a reported mismatch, the body sees the declared type
                if isinstance(checked, TensorValue):
                    checked = TensorValue(
                        SpmdType(
                            {
                                **checked.type,
                                **{a: t for a, t in declared.items() if checked.type.get(a, t).kind is not t.kind},
                            }
                        ),
                        checked.grad,
                        checked.rank,
                    )
                value = checked
        out.append((name, value))
    if isinstance(fn.params.star_arg, cst.Param):
        rest = Seq(tuple(v for _, v, _ in extra_positional)) if args is not None else UNKNOWN
        out.append((fn.params.star_arg.name.value, rest))
    if isinstance(fn.params.star_kwarg, cst.Param):
        out.append((fn.params.star_kwarg.name.value, UNKNOWN))
    return out


def check_declared(
    interp: Interpreter, value: Value, declared: dict[str, AxisType], node: cst.CSTNode, code: str, what: str
) -> Value:
    if isinstance(value, Alternatives):
        options = []
        for t, path in value.options:
            before = len(interp.ctx.findings)
            options.append((check_declared(interp, t, declared, node, code, what), path))
            for f in interp.ctx.findings[before:]:
                f.branches = f.branches or path
        return Alternatives(tuple(options))  # type: ignore[arg-type]
    if isinstance(value, TensorValue):
        return spmd_api.refine(interp, value, declared, node, code, what)
    if value is UNKNOWN:
        return TensorValue(SpmdType(declared), GradState.UNKNOWN, None)
    return value


def check_returns(
    interp: Interpreter, fn: cst.FunctionDef, decor: Decorations, returns: list[tuple[Value, cst.CSTNode]]
) -> Value:
    declared = annotation_type(interp, fn.returns.annotation) if fn.returns is not None else None
    elements = _tuple_annotation(interp, fn.returns.annotation) if fn.returns is not None else None
    if declared is None and elements is not None:
        return _check_tuple_returns(interp, elements, returns)
    if declared is None and decor.out_types is not None:
        try:
            declared = type_dict(decor.out_types).axes
        except TypeExprError:
            declared = None
    if declared is None:
        if not returns:
            return Literal(None)
        value = returns[0][0]
        for v, _ in returns[1:]:
            value = join(value, v)
        return value
    for value, node in returns:
        check_declared(interp, value, declared, node, "SPMD402", "return value")
    reduced = next((v.reduced_at for v, _ in returns if isinstance(v, TensorValue) and v.reduced_at), ())
    return TensorValue(SpmdType(declared), GradState.UNKNOWN, None, reduced_at=reduced)


def _tuple_annotation(interp: Interpreter, ann: cst.BaseExpression) -> list[dict[str, AxisType] | None] | None:
    """`tuple[Annotated[T, {...}], ...]`: the declared type of each element (None where not an SPMD type)."""
    if not isinstance(ann, cst.Subscript):
        return None
    head = interp.eval(ann.value)
    if not (isinstance(head, ModuleRef) and head.qualname in ("builtins.tuple", "typing.Tuple", "tuple")) and not (
        isinstance(ann.value, cst.Name) and ann.value.value == "tuple"
    ):
        return None
    items = [el.slice.value for el in ann.slice if isinstance(el.slice, cst.Index)]
    if any(isinstance(i, cst.Ellipsis) for i in items):
        return None
    declared = [annotation_type(interp, i) for i in items]
    return declared if any(d is not None for d in declared) else None


def _check_tuple_returns(interp: Interpreter, elements: list, returns: list[tuple[Value, cst.CSTNode]]) -> Value:
    for value, node in returns:
        if isinstance(value, Seq) and len(value.items) == len(elements):
            for item, want in zip(value.items, elements):
                if want is not None:
                    check_declared(interp, item, want, node, "SPMD402", "returned tuple element")
    return Seq(tuple(TensorValue(SpmdType(d), GradState.UNKNOWN, None) if d is not None else UNKNOWN for d in elements))


def call_function(
    interp: Interpreter,
    func: FunctionValue,
    args: list[Arg],
    node: cst.CSTNode,
    receiver: Value | None = None,
) -> Value:
    """Inline a call to a checked function (any file): its body is checked with the argument types.

    Calls are memoised by (function, abstract arguments, grad mode, mesh): a repeated call replays
    its summary (result, collectives issued, effects on its arguments and objects) instead of re-running.
    """
    fn = func.node
    if fn in interp.inline_stack or len(interp.inline_stack) >= interp.ctx.options.max_inline_depth:
        return UNKNOWN
    if (
        func.scope is not None
        and func.scope.ctx.library
        and not func.scope.ctx.stub
        and not any(carries_types(v) for v in (receiver, *(v for _, v, _ in args)))
    ):
        return UNKNOWN  # a library function given nothing typed can produce no finding and no type
    key = _summary_key(interp, func, args, receiver)
    summary = interp.summaries.get(key) if key is not None else None
    if summary is not None:
        if interp.log is not None:
            interp.log.reuse(summary.root, summary.units)
        return _replay(interp, summary, fn, args, node, receiver)
    from spmdcheck.analysis.interpreter import Frame, Summary

    log = interp.log
    if log is not None:
        log.enter_body(fn)
    saved = (interp.frame, interp.grad_enabled, interp.mesh, interp.checking)
    restore = None
    interp.inline_stack.append(fn)
    interp.call_sites.append((interp.ctx, node))
    start = len(interp.collectives)
    instances = _instances_of(args, receiver)
    result: Value = UNKNOWN
    globals_ = func.scope.globals if func.scope is not None else interp.frame.globals
    frame = Frame({}, globals_, function=fn, owner=func.owner)
    try:
        # decorators and defaults resolve in the callee's globals; argument mismatches are reported
        # at the call site, in the caller's file
        interp.frame = frame
        decor = function_decorations(interp, fn)
        if decor.skip:
            frame = None
            return TensorValue()  # a no_typecheck function's results are untyped tensors
        if decor.grad_enabled is not None:
            interp.grad_enabled = decor.grad_enabled
        for name, value in parameter_values(interp, fn, decor, args, receiver):
            frame.env[name] = value
        if func.scope is not None:
            restore = interp.enter_scope(func.scope)
        if not interp.mesh:
            interp.mesh = interp.ctx.options.mesh
        interp.exec_block(fn.body.body if isinstance(fn.body, cst.IndentedBlock) else fn.body.body)
        result = check_returns(interp, fn, decor, frame.returns)
        return result
    finally:
        interp.inline_stack.pop()
        interp.call_sites.pop()
        interp.frame, interp.grad_enabled, interp.mesh, interp.checking = saved
        if restore is not None:
            interp.ctx, interp.scope = restore
        units = log.exit_body() if log is not None else frozenset()
        if frame is not None:
            _apply_param_effects(interp, fn, args, frame.param_effects, receiver)
            if key is not None:
                from spmdcheck.analysis.interpreter import Summary

                # what the summary keeps, later checks see: writes to it are undone from now on
                share_objects(result)
                for _, obj in instances:
                    for value in obj.attrs.values():
                        share_objects(value)
                interp.summaries[key] = Summary(
                    result,
                    _distinct_sites(interp.collectives[start:]),
                    dict(frame.param_effects),
                    [(i, dict(obj.attrs)) for i, obj in instances],
                    units,
                    log.current if log is not None else None,
                )


def _distinct_sites(collectives: list) -> list:
    """The collectives a call issued, each site once: enough to compare branches, and bounded."""
    seen: set[int] = set()
    out = []
    for entry in collectives:
        if id(entry[2]) not in seen:
            seen.add(id(entry[2]))
            out.append(entry)
    return out


def _instances_of(args: list[Arg], receiver: Value | None) -> list[tuple[int, InstanceValue]]:
    """The objects a call can change, by position (-1: the receiver), so a summary replays onto the new ones."""
    out = [(i, v) for i, (_, v, _) in enumerate(args) if isinstance(v, InstanceValue)]
    if isinstance(receiver, InstanceValue):
        out.append((-1, receiver))
    return out


def _summary_key(interp: Interpreter, func: FunctionValue, args: list[Arg], receiver: Value | None) -> tuple | None:
    passed = [receiver, *(v for _, v, _ in args)]

    def abstract(value: Value) -> object:
        if isinstance(value, InstanceValue):
            return (value.snapshot(), contracts.slot_key(interp, value))
        if isinstance(value, (DimSize, ShapeValue)):
            # a size matters to the callee only as the size of a tensor it is given (a view of that tensor
            # keeps the dim); any other size is just a number, and calls given one share their summary
            owner = next((i for i, v in enumerate(passed) if v is value.tensor), None)
            if owner is None:
                return NUMBER if isinstance(value, DimSize) else UNKNOWN
            return (type(value).__name__, owner, getattr(value, "index", None), getattr(value, "rank", None))
        return value

    try:
        key = (
            id(func.node),
            tuple((k, abstract(v)) for k, v, _ in args),
            abstract(receiver) if receiver is not None else None,
            interp.grad_enabled,
            interp.mesh,
            interp.checking,
        )
        hash(key)
    except TypeError:
        return None  # a value that cannot be compared (should not happen): just no memo
    return key


def _replay(
    interp: Interpreter, summary, fn: cst.FunctionDef, args: list[Arg], node: cst.CSTNode, receiver: Value | None
) -> Value:  # noqa: ANN001
    if interp.divergent or interp.rank_branches:
        for api, axis, call in summary.collectives:
            interp.note_collective(api, axis, call)  # checked against the rank-dependent conditions
    else:
        interp.collectives.extend(summary.collectives)
    objects = dict(_instances_of(args, receiver))
    for i, attrs in summary.instance_states:
        if i in objects:
            obj = objects[i]
            for name in [n for n in obj.attrs if n not in attrs]:
                interp.set_attr(obj, name, None)
            for name, value in attrs.items():
                if obj.attrs.get(name) is not value:
                    interp.set_attr(obj, name, value)
    _apply_param_effects(interp, fn, args, summary.param_effects, receiver)
    return summary.result


def _apply_param_effects(
    interp: Interpreter, fn: cst.FunctionDef, args: list[Arg], effects: dict[str, Value], receiver: Value | None
) -> None:
    """In-place writes to a parameter happened to the caller's argument: rebind what the caller named."""
    if not effects:
        return
    params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    if receiver is not None and params:
        params = params[1:]
    positional = [a for a in args if a[0] is None]
    by_name = {p: a for p, a in zip(params, positional)}
    by_name.update({k: (k, v, n) for k, v, n in args if k is not None})
    for name, value in effects.items():
        arg = by_name.get(name)
        if arg is not None and isinstance(arg[2], (cst.Name, cst.Attribute)):
            interp.rebind(arg[2], value)


__all__ = [
    "dispatch",
    "call_method",
    "apply_rule",
    "getitem",
    "setitem",
    "annotation_type",
    "check_declared",
    "check_returns",
    "function_decorations",
    "parameter_values",
    "python_arith",
    "TypeValue",
    "ContextValue",
]

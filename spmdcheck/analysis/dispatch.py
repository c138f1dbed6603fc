"""Call dispatch: from a callee value to what types the call (a stub rule's transfer function, a layout or
contract constructor, an inlined checked function, a module's contract), and calls typed once per
alternative of a branch-dependent argument."""

from __future__ import annotations

import itertools
import operator

import libcst as cst

from spmdcheck.analysis import (
    attributes,
    autograd_functions,
    configs,
    containers,
    contracts,
    decorators,
    layouts,
    objects,
    rankflow,
    spmd_api,
    tp_plans,
    transfer,
)
from spmdcheck.analysis.binding import Arg, bind
from spmdcheck.analysis.dtensor import DTensorValue
from spmdcheck.analysis.dtensor import localmap as dtensor_local_map
from spmdcheck.analysis.dtensor import propagate as dtensor_ops
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.inline import call_function
from spmdcheck.analysis.signature import takes_self
from spmdcheck.analysis.values import (
    NUMBER,
    UNKNOWN,
    Alternatives,
    Assumed,
    BoundMethod,
    BuiltinValue,
    Chain,
    ClassValue,
    FunctionValue,
    Homogeneous,
    InstanceValue,
    LazyImport,
    Literal,
    LocalMapValue,
    MethodValue,
    ModuleRef,
    PyNumber,
    RankValue,
    Seq,
    SuperValue,
    TensorValue,
    TrustedForward,
    Unknown,
    Value,
    carries_types,
    consistent,
    join,
)
from spmdcheck.lattice import Kind, Linearity, SpmdType
from spmdcheck.rules.model import OpRule, Param, ParamRole, Returns

MAX_COMBINATIONS = 8
TENSOR = "torch.Tensor"  # the qualified name of a tensor's methods' class


def default_tensor_rule(qualname: str, method: bool) -> OpRule:
    """spmd_types types every torch op it sees; an op missing from the stubs is NONLINEAR."""
    params = (Param("self", ParamRole.TENSOR, True, False),) if method else ()
    params = params + (Param("args", ParamRole.TENSOR_OR_NUMBER, True, False, variadic=True),)
    return OpRule(qualname=qualname, params=params, linearity=Linearity.NONLINEAR)


def dispatch(interp: Engine, func: Value, args: list[Arg], node: cst.Call) -> Value:
    kind = type(func)  # the commonest callees first, by exact type (none is a subclass of a later case)
    if kind is Unknown:  # most calls of library code: only a planned submodule's call is known
        planned = tp_plans.call_submodule(interp, func, args, node)
        return planned if planned is not None else UNKNOWN
    if kind is BuiltinValue:
        return _call_builtin(interp, func, args, node)
    if kind is FunctionValue:
        return _call_checked_function(interp, func, args, node)
    if isinstance(func, LocalMapValue):
        return spmd_api.call_local_map(interp, func, args, node)
    if isinstance(func, dtensor_local_map.DTensorLocalMap):
        return dtensor_local_map.call(interp, func, args, node)
    declared = layouts.rule_of(interp, func)
    if declared is not None:
        return layouts.build(interp, declared, args, node)  # a layout or a module contract, read as data
    if isinstance(func, LazyImport):
        registry = interp.ctx.registry
        stubbed = _declaration(registry.lookup(registry.resolve_alias(f"{func.module}.{func.name}")))
        if stubbed is not None:
            return apply_rule(interp, stubbed, args, node)  # a stub (or a config key) describes this helper
        planned = tp_plans.call_library(interp, registry.resolve_alias(f"{func.module}.{func.name}"), args, node)
        if planned is not None:
            return planned  # a parallel style, or parallelize_module recording its plan
        if not any(carries_types(v) for _, v, _ in args):
            return UNKNOWN  # a library function given nothing typed can produce no finding and no type
        func = interp.resolve_lazy(func)
    if isinstance(func, ModuleRef):
        qual = interp.ctx.registry.resolve_alias(func.qualname)
        rule = interp.ctx.registry.lookup(qual)
        if rule is None:
            if qual.startswith("torch.") and not qual.startswith("torch.distributed") and _has_tensor(args):
                rule = default_tensor_rule(qual, False)
                rule.params = (Param("args", ParamRole.TENSOR, True, False, variadic=True),)
            else:
                known = objects.call_library(interp, qual, args, node, dispatch)  # dataclasses, partial, ...
                known = known if known is not None else tp_plans.call_library(interp, qual, args, node)
                return known if known is not None else UNKNOWN  # gradual typing: an unknown callee checks nothing
        return apply_rule(interp, rule, args, node)
    if isinstance(func, BoundMethod) and func.qualname.startswith(("builtins.dict.", "builtins.list.")):
        return containers.call_method(interp, func.receiver, func.qualname.rsplit(".", 1)[1], args, node)
    if isinstance(func, containers.Candidates):  # `LOSSES[name](x)`: once per entry the key may pick
        return containers.call_candidates(interp, func, args, node, dispatch)
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
            found = attributes.call_module_method(interp, func, args)  # `self.add_module(...)`, `self.children()`
            return found if found is not None else UNKNOWN
        receiver_node = node.func.value if isinstance(node.func, cst.Attribute) else node
        return apply_rule(interp, rule, [(None, func.receiver, receiver_node), *args], node)
    if isinstance(func, FunctionValue):
        return _call_checked_function(interp, func, args, node)
    if isinstance(func, configs.ConfigBuilder):
        return configs.build_module(interp, func) or UNKNOWN  # `config.w1.build()`: a typed field's module
    if isinstance(func, MethodValue):
        return call_function(interp, func.func, args, node, receiver=func.receiver)
    if isinstance(func, TrustedForward):
        return _trusted_forward(interp, func, args, node)
    if isinstance(func, autograd_functions.FunctionApply):
        return autograd_functions.call_apply(interp, func, args, node)
    if isinstance(func, ClassValue):
        return instantiate(interp, func, args, node)
    if isinstance(func, objects.PartialValue):
        return objects.call_partial(interp, func, args, node, dispatch)
    if isinstance(func, Chain) and len(args) == 1:
        value = args[0]
        for module in func.items:
            value = (None, dispatch(interp, module, [value], node), value[2])
        return value[1]
    if isinstance(func, InstanceValue):
        call = func.cls.lookup("forward") if func.cls.lookup("__call__") is None else func.cls.lookup("__call__")
        if isinstance(call, FunctionValue):
            routed = contracts.call_module(interp, func, call, args, node)
            if routed is None:
                routed = tp_plans.call_planned_module(interp, func, call, args, node)  # a style's prepared inputs
            if routed is not None:
                return routed  # a module contract: its wrapper redistributes the arguments and the output
            return call_function(interp, call, args, node, receiver=func)
        return contracts.call_opaque_module(interp, func, args) or UNKNOWN
    if isinstance(func, BuiltinValue):
        return _call_builtin(interp, func, args, node)
    planned = tp_plans.call_submodule(interp, func, args, node)  # `self.w1(x)` of a tensor-parallel plan
    return planned if planned is not None else UNKNOWN


def _call_checked_function(interp: Engine, func: FunctionValue, args: list[Arg], node: cst.Call) -> Value:
    """A call of a function of the program: its stub or config rule when one describes it, else its body."""
    declared = _declared_rule(interp, func)
    if declared is not None:
        return apply_rule(interp, declared, args, node)  # a stub (or a config key) describes this helper
    forwarded = decorators.forwarded(func, args)  # `call(fn, *args, **kwargs)`: `fn` called right here
    if forwarded is not None:
        return dispatch(interp, forwarded[0], forwarded[1], node)
    return call_function(interp, func, args, node)


def _call_builtin(interp: Engine, func: BuiltinValue, args: list[Arg], node: cst.Call) -> Value:
    """A call of a Python builtin the checker models (`super`, `isinstance`, `dict`, `len`, `sum`, ...)."""
    if func.name == "super":
        owner, receiver = interp.frame.owner, _receiver_of(interp)
        if owner is not None and receiver is not None:
            return SuperValue(owner, receiver)
    if func.name == "isinstance" and len(args) == 2:
        return _isinstance(interp, args[0][1], args[1][1])
    if func.name == "dict":
        return objects.call_dict(interp, args, node)
    if func.name in ("tuple", "list") and len(args) == 1 and args[0][0] is None:
        items = rankflow.iterated(interp, args[0][1], node)  # an object: what its `__iter__` gives
        if isinstance(items, Seq):
            return Seq(items.items, is_list=func.name == "list")
        return items if isinstance(items, Homogeneous) else UNKNOWN
    if func.name in rankflow.BUILTINS:
        found = rankflow.call_builtin(interp, func.name, args, node)  # `len`, `enumerate` of a rank-sized list
        if found is not UNKNOWN or func.name not in attributes.BUILTINS:
            return found
    if func.name == "sum":
        return containers.total(interp, args, node, lambda left, right, arg: _add(interp, left, right, arg, node))
    if func.name in RANK_PRESERVING_BUILTINS:
        ranks = [v for _, v, _ in args if isinstance(v, RankValue)]
        if ranks:
            value = ranks[0]
            for other in ranks[1:]:
                value = value.combine(other)
            return value
    if func.name in attributes.BUILTINS:
        return attributes.call_builtin(interp, func.name, args)
    return UNKNOWN


# Builtins whose result differs across ranks when an argument does (`range(rank)` as a loop bound).
RANK_PRESERVING_BUILTINS = frozenset({"range", "int", "float", "min", "max", "abs", "bool", "divmod", "round"})


def _declared_rule(interp: Engine, func: FunctionValue) -> OpRule | None:
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


def _isinstance(interp: Engine, value: Value, classes: Value) -> Value:
    """`isinstance(t, DTensor)` for a tensor the checker types: what the stubs declare (@instance_test); for a
    DTensor it is true."""
    dtensor = isinstance(value, DTensorValue)
    if not (dtensor or (isinstance(value, TensorValue) and value.typed and not value.opaque)):
        return UNKNOWN
    answers = set()
    for cls in classes.items if isinstance(classes, Seq) else (classes,):
        rule = None
        if isinstance(cls, ModuleRef):
            registry = interp.ctx.registry
            rule = registry.lookup(registry.resolve_alias(cls.qualname))
        if rule is None or rule.instance_test is None:
            return UNKNOWN
        answers.add(True if dtensor else rule.instance_test)
    return Assumed(True in answers) if answers else UNKNOWN


def _trusted_forward(interp: Engine, func: TrustedForward, args: list[Arg], node: cst.Call) -> Value:
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


def _add(interp: Engine, left: Value, right: Value, right_arg: Arg, node: cst.Call) -> Value:
    """`left + right` as `sum` adds its items (the finding points at the call's argument)."""
    where = right_arg[2]
    if isinstance(left, (TensorValue, Alternatives)):
        return call_method(interp, left, f"{TENSOR}.__add__", [right_arg], node, receiver_node=where)
    if isinstance(right, (TensorValue, Alternatives)):
        return call_method(interp, right, f"{TENSOR}.__radd__", [(None, left, where)], node, receiver_node=where)
    return python_arith(left, right, "__add__")


def instantiate(interp: Engine, cls: ClassValue, args: list[Arg], node: cst.Call) -> Value:
    """`Cls(...)`: a new object, its `__init__` run with the call's arguments."""
    contracts.attach_from_call(interp, cls, args)
    fields = objects.dataclass_fields(cls)
    if fields is not None:  # a dataclass's generated `__init__`
        return objects.build_dataclass(interp, cls, fields, args, node, dispatch)
    obj = InstanceValue(cls)
    init = cls.lookup("__init__")
    if isinstance(init, FunctionValue):
        call_function(interp, init, args, node, receiver=obj)
    return obj


def _receiver_of(interp: Engine) -> Value | None:
    fn = interp.frame.function
    if fn is None or not takes_self(fn):
        return None
    first = (list(fn.params.posonly_params) + list(fn.params.params))[0].name.value
    return interp.frame.env.get(first)


def _has_tensor(args: list[Arg]) -> bool:
    return any(isinstance(v, (TensorValue, Alternatives)) for _, v, _ in args)


def call_method(
    interp: Engine, receiver: Value, qualname: str, args: list[Arg], node: cst.CSTNode, receiver_node: cst.CSTNode
) -> Value:
    rule = interp.ctx.registry.lookup(qualname) or default_tensor_rule(qualname, True)
    return apply_rule(interp, rule, [(None, receiver, receiver_node), *args], node)  # type: ignore[list-item]


def apply_rule(interp: Engine, rule: OpRule, args: list[Arg], node: cst.CSTNode) -> Value:
    """Expand variables that differ by branch, then type the call once per combination."""
    alt_positions = [i for i, (_, v, _) in enumerate(args) if isinstance(v, Alternatives)]
    if not alt_positions:
        return _apply_rule(interp, rule, args, node)
    choices = [args[i][1].options for i in alt_positions]  # type: ignore[union-attr]
    # one condition is one choice: a value from one arm never meets a value from the other arm of it
    taken = interp.conditions_taken
    feasible = (c for c in itertools.product(*choices) if consistent(tuple(b for _, p in c for b in p), taken))
    combos = list(itertools.islice(feasible, MAX_COMBINATIONS))
    if not combos:
        return UNKNOWN
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
        mark = interp.ctx.program.checkpoint()
        interp.effects = []
        try:
            result = _apply_rule(interp, rule, trial, node)
        finally:
            writes.append((interp.effects, path))
            interp.effects = outer_effects
        captured.append(interp.ctx.program.withdraw(mark))
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


def _merge_branch_findings(interp: Engine, captured: list[list[Finding]], paths: list[tuple]) -> None:
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


def _apply_rule(interp: Engine, rule: OpRule, args: list[Arg], node: cst.CSTNode) -> Value:
    """One call typed by its rule: the transfer function of the rule's kind (analysis/transfer.py)."""
    if rule.overloads:
        chosen = _overload_for(rule.overloads, args)
        if chosen is None:
            return UNKNOWN  # no overload is known to apply (a keyword the checker cannot read): silent
        rule = chosen
    kind = rule.kind
    if kind == "op" and dtensor_ops.has_dtensor(args):
        return dtensor_ops.apply_op(interp, rule, args, node)  # DTensor's own propagation: never reported
    return transfer.TRANSFER[kind](interp, rule, bind(rule, args), args, node)


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
    if dunder == "__add__" and isinstance(left, (Seq, Homogeneous)):
        joined = containers.concatenate(left, right)  # `xs + [y]`: the items of both
        if joined is not None:
            return joined
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
            fn = getattr(operator, dunder.strip("_"), None)
            if fn is not None and isinstance(left.value, (int, float)) and isinstance(right.value, (int, float)):
                if not _foldable(left.value, right.value, dunder):
                    return UNKNOWN
                return Literal(fn(left.value, right.value))
        except Exception:  # noqa: BLE001 - e.g. division by zero: just unknown
            return UNKNOWN
    if isinstance(left, Literal) and isinstance(left.value, (int, float)) and isinstance(right, Literal):
        return UNKNOWN
    return rankflow.joined_lengths(left, right) or UNKNOWN

"""A checked function's signature: its decorators, its parameters' values (a call's arguments bound to them,
or their annotations when it is checked on its own), and the checks of declared types (annotated
parameters, variables and attributes, return annotations)."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from spmdcheck.analysis import configs, spmd_api
from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.dtensor import localmap as dtensor_local_map
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.typeexpr import TypeExprError, group_parameter, is_opaque_axis, type_dict
from spmdcheck.analysis.values import (
    UNKNOWN,
    Alternatives,
    DictValue,
    Literal,
    ModuleRef,
    Seq,
    TensorValue,
    TypeValue,
    Value,
    join,
)
from spmdcheck.diagnostics.violations.contracts import ArgumentTypeMismatch, DeclaredTypeMismatch, ReturnTypeMismatch
from spmdcheck.diagnostics.violations.inputs import MalformedAnnotation, UnknownAxis
from spmdcheck.lattice import AxisType, GradState, SpmdType
from spmdcheck.rules.typespec import TypeSpecError, parse_type_spec


@dataclass
class Decorations:
    skip: bool = False
    grad_enabled: bool | None = None  # @torch.no_grad() / @torch.enable_grad()
    in_types: list | None = None
    out_types: Value | None = None


def function_decorations(interp: Engine, fn: cst.FunctionDef) -> Decorations:
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
        elif rule.dtensor_api == "local_map":
            decor.in_types, decor.out_types = dtensor_local_map.decorations(interp, call_args)
        elif rule.spmd_api == "local_map":
            for a in call_args:
                if a.keyword and a.keyword.value == "out_types":
                    decor.out_types = interp.eval(a.value)
                elif a.keyword and a.keyword.value == "in_types":
                    v = interp.eval(a.value)
                    decor.in_types = list(v.items) if isinstance(v, Seq) else None
    return decor


def takes_self(fn: cst.FunctionDef) -> bool:
    """A method called on an object binds its first parameter (not static, not a class method)."""
    for dec in fn.decorators:
        expr = dec.decorator
        if isinstance(expr, cst.Name) and expr.value in ("staticmethod", "classmethod"):
            return False
    return bool(fn.params.posonly_params or fn.params.params)


def annotation_type(interp: Engine, ann: cst.BaseExpression) -> dict[str, AxisType] | None:
    """`Annotated[Tensor, Local("tp: V")]`, `Annotated[Tensor, {"tp": V}]`, `Annotated[Tensor, "tp: V"]` or
    `Local["tp: V"]` -> axes; else None."""
    kind = type(ann)  # exact types: asked of every parameter of every call (an ABC check is slow)
    if kind is cst.SimpleString or kind is cst.ConcatenatedString:
        inner = configs.parsed_annotation(ann.evaluated_value)  # type: ignore[arg-type]
        return annotation_type(interp, inner) if inner is not None else None
    if kind is not cst.Subscript:
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
    if _is_local(head) and elements:
        value = interp.eval(elements[0])
        if isinstance(value, Literal) and isinstance(value.value, str):
            return _spec_string(interp, value.value, ann)
        interp.report(Finding.of(MalformedAnnotation("local-spec"), ann))
    return None


def _is_local(value: Value) -> bool:
    """`spmdcheck.annotations.Local`, however it was imported."""
    return (
        isinstance(value, ModuleRef)
        and value.qualname.endswith("annotations.Local")
        and value.qualname.startswith("spmdcheck")
    )


def _spec_string(interp: Engine, text: str, node: cst.CSTNode) -> dict[str, AxisType] | None:
    """The short spelling `"tp: V, dp: S(0)"`, in `Local[...]` or `Annotated[T, ...]`."""
    try:
        return _check_axes(interp, parse_type_spec(text), node)
    except TypeSpecError as exc:
        interp.report(Finding.of(MalformedAnnotation("unreadable", str(exc)), node))
        return None


def _metadata_type(interp: Engine, meta: cst.BaseExpression) -> dict[str, AxisType] | None:
    if isinstance(meta, cst.Call) and _is_local(interp.eval(meta.func)):  # `Annotated[T, Local("tp: V")]`
        spec = interp.eval(meta.args[0].value) if len(meta.args) == 1 and not meta.args[0].keyword else None
        if isinstance(spec, Literal) and isinstance(spec.value, str):
            return _spec_string(interp, spec.value, meta)
        interp.report(Finding.of(MalformedAnnotation("local-spec"), meta))
        return None
    value = interp.eval(meta)
    if isinstance(value, Literal) and isinstance(value.value, str):
        return _spec_string(interp, value.value, meta)
    if isinstance(value, (DictValue, TypeValue)):
        try:
            td = type_dict(value)
        except TypeExprError as exc:
            interp.report(Finding.of(MalformedAnnotation("unreadable", str(exc)), meta))
            return None
        return spmd_api.asserted_axes(interp, td, meta)
    return None


def _check_axes(interp: Engine, axes: dict[str, AxisType], node: cst.CSTNode) -> dict[str, AxisType]:
    known = interp.ctx.known_axes
    out = {}
    for axis, t in axes.items():
        if known and axis not in known and not is_opaque_axis(axis):
            interp.report(Finding.of(UnknownAxis(axis, tuple(known)), node))
            continue
        out[axis] = t
    return out


def _annotation_words(interp: Engine, node: cst.BaseExpression) -> str:
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
    interp: Engine,
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
                    value = _object_parameter(interp, p.annotation, receiver) or value
        else:
            value = given[0]
            if value is UNKNOWN:  # a module or its config object, known by its annotation only
                value = _object_parameter(interp, p.annotation, receiver) or value
            if declared:
                checked = check_declared(interp, value, declared, given[1], ArgumentTypeMismatch, f"argument `{name}`")
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
        # the keywords no parameter takes, a dict a wrapper forwards (`fn(*args, **kwargs)`)
        rest_kw = DictValue(tuple((Literal(k), v, n) for k, v, n in extra_keywords)) if args is not None else UNKNOWN
        out.append((fn.params.star_kwarg.name.value, rest_kw))
    return out


def _object_parameter(interp: Engine, ann: cst.Annotation | None, receiver: Value | None) -> Value | None:
    """A parameter known by its annotation only: a module's config object, or a module of the program."""
    owner = interp.frame.owner
    return configs.config_parameter(interp, ann, receiver, owner) or configs.module_parameter(
        interp, ann, receiver, owner
    )


def check_declared(
    interp: Engine,
    value: Value,
    declared: dict[str, AxisType],
    node: cst.CSTNode,
    contract: type[DeclaredTypeMismatch],
    what: str,
) -> Value:
    """`value` checked against the `declared` type of `what`: a disagreement is reported as `contract`."""
    if isinstance(value, Alternatives):
        options = []
        for t, path in value.options:
            before = len(interp.ctx.findings)
            options.append((check_declared(interp, t, declared, node, contract, what), path))
            for f in interp.ctx.findings[before:]:
                f.branches = f.branches or path
        return Alternatives(tuple(options))  # type: ignore[arg-type]
    if isinstance(value, TensorValue):
        return spmd_api.refine(interp, value, declared, node, contract, what)
    if value is UNKNOWN:
        return TensorValue(SpmdType(declared), GradState.UNKNOWN, None)
    return value


def check_returns(
    interp: Engine, fn: cst.FunctionDef, decor: Decorations, returns: list[tuple[Value, cst.CSTNode]]
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
        check_declared(interp, value, declared, node, ReturnTypeMismatch, "return value")
    reduced = next((v.reduced_at for v, _ in returns if isinstance(v, TensorValue) and v.reduced_at), ())
    return TensorValue(SpmdType(declared), GradState.UNKNOWN, None, reduced_at=reduced)


def _tuple_annotation(interp: Engine, ann: cst.BaseExpression) -> list[dict[str, AxisType] | None] | None:
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


def _check_tuple_returns(interp: Engine, elements: list, returns: list[tuple[Value, cst.CSTNode]]) -> Value:
    for value, node in returns:
        if isinstance(value, Seq) and len(value.items) == len(elements):
            for item, want in zip(value.items, elements):
                if want is not None:
                    check_declared(interp, item, want, node, ReturnTypeMismatch, "returned tuple element")
    return Seq(tuple(TensorValue(SpmdType(d), GradState.UNKNOWN, None) if d is not None else UNKNOWN for d in elements))

"""Load `.pyi` stub files (parsed with Python's `ast`, never imported) into a Registry.

A stub is read for its signatures and decorators only (a `@model` body is interpreted later, from its
file, by the analysis), so the standard parser suffices: it reads the shipped stubs in a twentieth of
libcst's time, and a run whose results are cached never imports libcst for them.

A stub file's path gives its module (`stubs/torch/nn/functional.pyi` ->
`torch.nn.functional`, `__init__.pyi` -> the package). In it:

* ``def f(...)`` with decorators from ``spmdcheck.annotations`` -> rule ``module.f``;
* ``class C:`` methods -> ``module.C.method`` (``@property`` marks a property);
* ``NAME: LocalType["R"]`` -> a type constant;
* ``from .x import a as b`` / ``b = a`` -> an alias (re-export).

Every rule comes from one stub line; see docs/stubs.md for the vocabulary.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from spmdcheck.lattice import Linearity
from spmdcheck.rules.model import (
    CollectiveRule,
    ContractRule,
    DimsRule,
    LayoutRule,
    MappingRule,
    OpRule,
    Param,
    ParamRole,
    RawCollectiveRule,
    Returns,
    Transition,
)
from spmdcheck.rules.typespec import parse_axis_type


class StubError(Exception):
    """A stub file that cannot be read; reported as SPMD005 with its location."""


@dataclass
class Registry:
    rules: dict[str, OpRule] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def lookup(self, qualname: str) -> OpRule | None:
        seen = 0
        rule = self.rules.get(qualname)
        while rule is not None and rule.alias_of is not None and seen < 16:
            rule = self.rules.get(rule.alias_of)
            seen += 1
        if rule is None:
            # a re-exporting package: `pkg.mod.f` where `pkg.mod` is an alias of `other`
            head, _, tail = qualname.rpartition(".")
            if head and head in self.rules and self.rules[head].alias_of:
                return self.lookup(f"{self.rules[head].alias_of}.{tail}")
        return rule

    def resolve_alias(self, qualname: str) -> str:
        seen = 0
        while seen < 16:
            rule = self.rules.get(qualname)
            if rule is None or rule.alias_of is None:
                head, _, tail = qualname.rpartition(".")
                if head and head in self.rules and self.rules[head].alias_of:
                    qualname = f"{self.rules[head].alias_of}.{tail}"
                    seen += 1
                    continue
                return qualname
            qualname = rule.alias_of
            seen += 1
        return qualname

    def merge(self, other: Registry) -> None:
        self.rules.update(other.rules)
        self.errors.extend(other.errors)


class _Source:
    """A stub's text, for the exact spelling of a node (annotations are matched as written)."""

    def __init__(self, text: str) -> None:
        # lines as UTF-8 (the parser's column offsets count bytes), split once: `ast.get_source_segment`
        # splits the whole text again on every call
        self.lines = [line.encode("utf-8") for line in text.splitlines(keepends=True)]

    def code(self, node: ast.AST) -> str:
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1  # type: ignore[attr-defined]
        start, end = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        if first == last:
            return self.lines[first][start:end].decode("utf-8")
        parts = [self.lines[first][start:], *self.lines[first + 1 : last], self.lines[last][:end]]
        return b"".join(parts).decode("utf-8")


def _literal(node: ast.expr, module: _Source) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError) as exc:
        raise StubError(f"decorator argument is not a literal: {module.code(node)}") from exc


def _decorator_parts(node: ast.expr, module: _Source) -> tuple[str, list[object], dict[str, object]]:
    args: list[object] = []
    kwargs: dict[str, object] = {}
    if isinstance(node, ast.Call):
        for arg in node.args:
            args.append(_literal(arg, module))
        for keyword in node.keywords:
            if keyword.arg is None:
                raise StubError(f"decorator argument is not a literal: **{module.code(keyword.value)}")
            kwargs[keyword.arg] = _literal(keyword.value, module)
        node = node.func
    name = module.code(node).split(".")[-1]
    return name, args, kwargs


def _role(annotation: ast.expr | None, module: _Source) -> ParamRole:
    if annotation is None:
        return ParamRole.OTHER
    text = module.code(annotation).replace(" ", "")
    if "Tensor" in text and any(s in text for s in ("Sequence[", "list[", "List[", "tuple[", "Tuple[", "Iterable[")):
        return ParamRole.TENSORS
    if "Tensor" in text and any(s in text for s in ("Number", "float", "int", "complex")):
        return ParamRole.TENSOR_OR_NUMBER
    if "Tensor" in text and "ProcessGroup" not in text:
        return ParamRole.TENSOR
    return ParamRole.OTHER


def _returns(annotation: ast.expr | None, module: _Source) -> Returns:
    if annotation is None:
        return Returns.TENSOR
    text = module.code(annotation).replace(" ", "")
    if text == "None":
        return Returns.NONE
    if "Tensor" in text and any(s in text for s in ("tuple[", "Tuple[", "list[", "List[", "Sequence[")):
        return Returns.TENSORS
    if text in ("Tensor", "Self") or text.endswith(".Tensor") or text.startswith("Tensor|"):
        return Returns.TENSOR
    if text in ("int", "float", "bool", "complex", "Number", "int|float", "float|int"):
        return Returns.NUMBER
    return Returns.VALUE


def _default(node: ast.expr | None) -> tuple[object, bool]:
    """A parameter's default as a literal (None when it is not one) and whether it has one."""
    if node is None:
        return None, False
    try:
        return ast.literal_eval(node), True
    except (ValueError, SyntaxError, TypeError):
        return None, True


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef, module: _Source, is_method: bool) -> tuple[Param, ...]:
    out: list[Param] = []
    p = fn.args
    plain = [*p.posonlyargs, *p.args]
    # defaults belong to the last positional parameters
    defaults: list[ast.expr | None] = [None] * (len(plain) - len(p.defaults)) + list(p.defaults)
    for i, (param, default_node) in enumerate(zip(plain, defaults)):
        role = _role(param.annotation, module)
        if is_method and i == 0:
            role = ParamRole.TENSOR  # self
        default, has_default = _default(default_node)
        out.append(Param(param.arg, role, True, i >= len(p.posonlyargs), False, default, has_default))
    if p.vararg is not None:
        out.append(Param(p.vararg.arg, _role(p.vararg.annotation, module), True, False, True))
    for param, default_node in zip(p.kwonlyargs, p.kw_defaults):
        default, has_default = _default(default_node)
        out.append(Param(param.arg, _role(param.annotation, module), False, True, False, default, has_default))
    return tuple(out)


def _letters(spec: str) -> frozenset[str]:
    return frozenset(s.strip() for s in spec.split("|") if s.strip())


def _transitions(spec: str) -> frozenset[Transition]:
    out = set()
    for item in spec.split():
        src, _, dst = item.partition("->")
        if not dst:
            raise StubError(f"bad transition {item!r} (want SRC->DST)")
        out.add(Transition(src.strip(), dst.strip()))
    return frozenset(out)


def _hints(spec: str) -> dict[Transition, str]:
    hints: dict[Transition, str] = {}
    for item in spec.split():
        pair, _, hint = item.partition(":")
        hints.update({t: hint for t in _transitions(pair)})
    return hints


def _collective_rule(
    args: list[object], kwargs: dict[str, object], *, family: str, implicit_partial: bool, **fields: object
) -> CollectiveRule:
    """The fields `@collective` and `@conversion` share; `implicit_partial` is each one's default."""
    return CollectiveRule(
        op=str(args[0]),
        family=family,
        default_src=kwargs.get("default_src"),  # type: ignore[arg-type]
        default_dst=kwargs.get("default_dst"),  # type: ignore[arg-type]
        implicit_partial=bool(kwargs.get("implicit_partial", implicit_partial)),
        tensor_param=str(kwargs.get("tensor", "x")),
        axis_param=str(kwargs.get("axis", "axis")),
        **fields,  # type: ignore[arg-type]
    )


def _apply_decorator(rule: OpRule, name: str, args: list[object], kwargs: dict[str, object]) -> None:
    """One decorator -> fields of the rule. The whole stub vocabulary is here."""
    if name == "linear":
        rule.linearity = Linearity.LINEAR
    elif name == "multilinear":
        rule.linearity = Linearity.MULTILINEAR
    elif name == "nonlinear":
        rule.linearity = Linearity.NONLINEAR
    elif name == "divisor":
        rule.linearity = Linearity.MULTILINEAR
        rule.divisors = tuple(str(a) for a in args)
    elif name == "contraction":
        rule.linearity = Linearity.MULTILINEAR
        rule.contraction = str(args[0])
        rule.bias = kwargs.get("bias")  # type: ignore[assignment]
    elif name == "affine":
        rule.linearity = Linearity.MULTILINEAR
        rule.affine_bias = str(args[0])
        rule.contraction = str(args[1]) if len(args) > 1 else None
    elif name == "factory":
        rule.factory = str(args[0]) if args else "deterministic"
        rule.factory_size = kwargs.get("size")  # type: ignore[assignment]
        rule.factory_rank = kwargs.get("rank")  # type: ignore[assignment]
    elif name == "passthrough":
        rule.passthrough = True
        if rule.returns is not Returns.NUMBER:
            rule.returns = Returns.VALUE
    elif name == "rank_dependent":
        rule.rank_dependent = True
        rule.passthrough = True
        rule.rank_axis = kwargs.get("axis")  # type: ignore[assignment]
        rule.rank_group_param = kwargs.get("group")  # type: ignore[assignment]
    elif name == "container":
        rule.container_param = str(args[0])
        rule.returns = Returns.VALUE
    elif name == "sequential":
        rule.sequential_param = str(args[0])
        rule.returns = Returns.VALUE
    elif name == "constant_test":
        rule.constant_test = True
        rule.returns = Returns.VALUE
    elif name == "group_members":
        rule.group_members_param = str(kwargs.get("param", args[0] if args else "group"))
        rule.returns = Returns.VALUE
    elif name == "opaque":
        rule.opaque = True
    elif name == "rank_of":
        rule.rank_of = True
    elif name == "shape_of":
        rule.shape_of = True
    elif name == "untyped_is_unknown":
        rule.untyped_is_unknown = True
    elif name == "parallel_loss":
        rule.parallel_loss = True
    elif name == "grad":
        rule.grad = str(args[0])
    elif name == "dims":
        pieces = kwargs.get("pieces")
        rule.dims = DimsRule(str(args[0]), tuple(str(a) for a in args[1:]), str(pieces) if pieces else None)
    elif name == "inplace":
        rule.inplace_param = str(args[0]) if args else "self"
    elif name == "property":
        rule.is_property = True
    else:
        _apply_communication_decorator(rule, name, args, kwargs)


def _apply_communication_decorator(rule: OpRule, name: str, args: list[object], kwargs: dict[str, object]) -> None:
    """The decorators of collectives, mappings, process groups, meshes and the spmd_types API (and the errors)."""
    if name == "collective":
        rule.collective = _collective_rule(
            args,
            kwargs,
            family="collective",
            implicit_partial=True,
            src=_letters(str(kwargs.get("src", ""))),
            dst=_letters(str(kwargs.get("dst", ""))),
        )
    elif name == "conversion":
        allowed = str(kwargs.get("allowed", "*"))
        rule.collective = _collective_rule(
            args,
            kwargs,
            family="conversion",
            implicit_partial=False,
            allowed=None if allowed.strip() == "*" else _transitions(allowed),
            expert=_transitions(str(kwargs.get("expert", ""))),
            forbidden_hints=_hints(str(kwargs.get("hints", ""))),
        )
    elif name == "raw_collective":
        rule.raw = RawCollectiveRule(
            src=_letters(str(kwargs.get("src", "*"))),
            dst=_letters(str(kwargs.get("dst", "R"))),
            input=str(kwargs.get("input", "tensor")),
            output=kwargs.get("output"),  # type: ignore[arg-type]
            mutates=bool(kwargs.get("mutates", kwargs.get("output") is None)),
            group_param=str(kwargs.get("group", "group")),
            differentiable=bool(kwargs.get("differentiable", False)),
        )
    elif name == "maps_to":
        when = kwargs.get("when") or {}
        if not isinstance(when, dict):
            raise StubError("maps_to(when=...) must be a dict of parameter literals")
        rule.mappings = rule.mappings + (
            MappingRule(
                op=str(args[0]),
                src=parse_axis_type(str(kwargs["src"])),
                dst=parse_axis_type(str(kwargs["dst"])),
                axis=kwargs.get("axis"),  # type: ignore[arg-type]
                group_param=kwargs.get("group", "group"),  # type: ignore[arg-type]
                tensor_param=str(kwargs.get("tensor", "input_")),
                when=tuple(sorted(when.items())),
            ),
        )
    elif name == "process_group":
        rule.process_group_axis = str(args[0])
        rule.returns = Returns.VALUE
    elif name == "group_size":
        rule.passthrough = True
        rule.returns = Returns.NUMBER
        rule.size_axis = str(args[0])
    elif name == "mesh_factory":
        rule.mesh_factory_names = str(kwargs.get("names", args[0] if args else "mesh_dim_names"))
        rule.returns = Returns.VALUE
    elif name == "mesh_group":
        rule.mesh_group_param = str(kwargs.get("param", args[0] if args else "mesh_dim"))
        rule.returns = Returns.VALUE
    elif name == "assume_returns":
        rule.assumed = (args[0] if args else kwargs.get("value"),)
        rule.returns = Returns.VALUE
    elif name == "spmd_api":
        rule.spmd_api = str(args[0])
    elif name == "dtensor_api":
        _dtensor_api(rule, args, kwargs)
    elif name == "context":
        rule.context = str(args[0])
    elif name in ("staticmethod", "classmethod", "overload"):
        pass
    else:
        raise StubError(f"unknown stub decorator @{name}")


_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _dtensor_api(rule: OpRule, args: list[object], kwargs: dict[str, object]) -> None:
    """`@dtensor_api("from_local")`, `@dtensor_api("placement", placement="shard", dim="dim")`: a DTensor API
    typed by its handler in analysis/dtensor/; the keywords are literals the handler reads."""
    if not args or not isinstance(args[0], str):
        raise StubError("dtensor_api(...) needs the API's name as its first argument")
    if any(not isinstance(v, (str, int, bool)) and v is not None for v in kwargs.values()):
        raise StubError("dtensor_api(...) keywords must be literals")
    rule.dtensor_api = args[0]
    rule.dtensor_args = tuple(sorted(kwargs.items()))
    rule.returns = Returns.VALUE


def _literal_params(fn: _Function, module: _Source) -> tuple[tuple[str, tuple[object, ...]], ...]:
    """`flag: Literal[True]` in an @overload: this overload applies when `flag` is that constant."""
    out = []
    p = fn.args
    for param in (*p.posonlyargs, *p.args, *p.kwonlyargs):
        if param.annotation is None:
            continue
        text = module.code(param.annotation).replace(" ", "")
        for head in ("Literal[", "typing.Literal[", "typing_extensions.Literal["):
            if text.startswith(head) and text.endswith("]"):
                value = ast.literal_eval(f"({text[len(head) : -1]},)")
                out.append((param.arg, tuple(value)))
    return tuple(out)


def _load_function(fn: _Function, qualname: str, module: _Source, is_method: bool, where: str) -> OpRule:
    rule = OpRule(qualname=qualname, source=where)
    rule.params = _params(fn, module, is_method)
    if any(isinstance(d, ast.Name) and d.id == "overload" for d in fn.decorator_list):
        rule.is_overload = True
        rule.literal_params = _literal_params(fn, module)
    rule.returns = _returns(fn.returns, module)
    # Decorators apply bottom-up, like Python's; later ones refine earlier ones.
    for dec in reversed(fn.decorator_list):
        name, args, kwargs = _decorator_parts(dec, module)
        _apply_decorator(rule, name, args, kwargs)
    short = qualname.rsplit(".", 1)[-1]
    if rule.inplace_param is None and is_method and short.endswith("_") and not short.startswith("__"):
        rule.inplace_param = rule.params[0].name if rule.params else "self"
    if rule.inplace_param is None and is_method and short in _INPLACE_DUNDERS:
        rule.inplace_param = rule.params[0].name if rule.params else "self"
    return rule


_INPLACE_DUNDERS = {
    "__iadd__",
    "__isub__",
    "__imul__",
    "__itruediv__",
    "__ifloordiv__",
    "__imatmul__",
    "__ipow__",
    "__iand__",
    "__ior__",
    "__ixor__",
    "__imod__",
    "__ilshift__",
    "__irshift__",
}


# Imports from these modules in a stub are for annotations, not re-exports of rules.
_NOT_RULES = {"typing", "typing_extensions", "__future__", "collections", "abc", "types", "builtins", "enum"}


def module_name_for(path: pathlib.Path, root: pathlib.Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve_relative(module: str, is_package: bool, level: int, target: str) -> str:
    base = module.split(".") if module else []
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def load_stub_source(source: str, module_name: str, is_package: bool, where: str) -> Registry:
    registry = Registry()
    try:
        tree = ast.parse(source, filename=where, type_comments=False)
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the text
        line = getattr(exc, "lineno", None)
        reason = getattr(exc, "msg", None) or str(exc)
        registry.errors.append(f"{where}: syntax error: {reason}" + (f" (line {line})" if line else ""))
        return registry
    module = _Source(source)

    def add(rule: OpRule) -> None:
        previous = registry.rules.get(rule.qualname)
        if rule.is_overload and previous is not None and previous.is_overload:
            # another @overload of the same function: the registered rule lists them all, in stub order
            members = previous.overloads or (previous,)
            rule = replace(members[0], overloads=(*members, rule))
        registry.rules[rule.qualname] = rule

    for stmt in tree.body:
        try:
            _load_statement(stmt, module, module_name, is_package, where, add)
        except (StubError, KeyError, IndexError, ValueError, SyntaxError, TypeError) as exc:
            registry.errors.append(f"{where}: {exc}")
    return registry


def _is_model(node: _Function | ast.ClassDef) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id == "model") or (isinstance(d, ast.Attribute) and d.attr == "model")
        for d in node.decorator_list
    )


def _load_statement(stmt, module, module_name, is_package, where, add) -> None:  # noqa: ANN001
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _is_model(stmt):
        # its body is interpreted by the analysis, not read as rules
        add(
            OpRule(
                qualname=f"{module_name}.{stmt.name}",
                returns=Returns.VALUE,
                model_path=where,
                model_module=module_name,
                source=where,
            )
        )
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        add(_load_function(stmt, f"{module_name}.{stmt.name}", module, False, where))
    elif isinstance(stmt, ast.ClassDef):
        cls = f"{module_name}.{stmt.name}"
        add(_class_rule(stmt, cls, module, stmt.body, where))
        for item in stmt.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                add(_load_function(item, f"{cls}.{item.name}", module, True, where))
            else:
                _load_small(item, module, cls, add, where)
    elif isinstance(stmt, ast.ImportFrom):
        if any(alias.name == "*" for alias in stmt.names):
            return
        target = stmt.module or ""
        level = stmt.level or 0
        source_mod = _resolve_relative(module_name, is_package, level, target) if level else target
        if source_mod.startswith("spmdcheck") or source_mod.split(".")[0] in _NOT_RULES:
            return
        for alias in stmt.names:
            local = alias.asname or alias.name
            if f"{source_mod}.{alias.name}" != f"{module_name}.{local}":
                add(OpRule(qualname=f"{module_name}.{local}", alias_of=f"{source_mod}.{alias.name}", source=where))
    else:
        _load_small(stmt, module, module_name, add, where)


def _class_rule(stmt: ast.ClassDef, cls: str, module: _Source, body: Sequence[ast.stmt], where: str) -> OpRule:
    """A stub class: opaque, unless a class decorator says what its objects are (@layout, @module_contract).

    Its constructor's parameters are those of the stub's `__init__` (after `self`).
    """
    rule = OpRule(qualname=cls, returns=Returns.VALUE, opaque=True, source=where)
    init = next((i for i in body if isinstance(i, _Function) and i.name == "__init__"), None)
    for dec in reversed(stmt.decorator_list):
        name, args, kwargs = _decorator_parts(dec, module)
        if name == "layout":
            types = str(kwargs.get("types", args[0] if args else "axis_types"))
            rule.layout = LayoutRule(types, kwargs.get("partition_spec"))  # type: ignore[arg-type]
        elif name == "instance_test":
            rule.instance_test = bool(args[0] if args else kwargs.get("value"))
        elif name == "dtensor_api":
            _dtensor_api(rule, args, kwargs)
        elif name == "module_contract":
            attach = kwargs.get("attach", ())
            builders = kwargs.get("build", ())
            fields = {k: kwargs.get(k) for k in ("state", "in_src", "in_dst", "out_src", "out_dst")}
            if any(v is not None and not isinstance(v, str) for v in fields.values()):
                raise StubError("module_contract(...) fields name constructor parameters: strings")
            rule.contract = ContractRule(
                attach=(attach,) if isinstance(attach, str) else tuple(str(a) for a in attach),  # type: ignore[union-attr]
                redistribute=str(kwargs.get("redistribute", "spmd_types.redistribute")),
                build=(builders,) if isinstance(builders, str) else tuple(str(b) for b in builders),  # type: ignore[union-attr]
                dst_needs_src=bool(kwargs.get("dst_needs_src", False)),
                **fields,  # type: ignore[arg-type]
            )
    if (rule.layout is not None or rule.contract is not None or rule.dtensor_api is not None) and init is not None:
        rule.params = _params(init, module, True)[1:]
    return rule


def _load_small(small, module, prefix, add, where) -> None:  # noqa: ANN001
    if isinstance(small, ast.AnnAssign) and isinstance(small.target, ast.Name):
        text = module.code(small.annotation).replace(" ", "")
        if text.startswith("LocalType["):
            letter = ast.literal_eval(text[len("LocalType[") : -1])
            add(
                OpRule(
                    qualname=f"{prefix}.{small.target.id}",
                    const_type=str(letter),
                    returns=Returns.VALUE,
                    source=where,
                )
            )
    elif isinstance(small, ast.Assign) and len(small.targets) == 1 and isinstance(small.targets[0], ast.Name):
        target = small.targets[0].id
        if isinstance(small.value, ast.Constant) and isinstance(small.value.value, str):
            add(OpRule(qualname=f"{prefix}.{target}", const_str=small.value.value, returns=Returns.VALUE, source=where))
            return
        value = module.code(small.value)
        if value.replace(".", "").replace("_", "").isalnum():
            full = value if "." in value else f"{prefix}.{value}"
            add(OpRule(qualname=f"{prefix}.{target}", alias_of=full, source=where))


def load_stub_dirs(dirs: Iterable[pathlib.Path]) -> Registry:
    """Later directories override earlier ones rule by rule (users' stubs last)."""
    registry = Registry()
    for root in dirs:
        if not root.is_dir():
            registry.errors.append(f"{root}: stub path is not a directory")
            continue
        for path in sorted(root.rglob("*.pyi")):
            name = module_name_for(path, root)
            where = str(path)
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                registry.errors.append(f"{where}: {exc}")
                continue
            registry.merge(load_stub_source(text, name, path.name == "__init__.pyi", where))
    return registry

"""Read a program statically: its mesh, its entry function, the SPMD type of each
parameter and of the result, and the global shapes of its inputs.

Independent of spmdcheck on purpose (plain ``ast``): the ground truth must not
share a reading bug with the checker it judges. The one exception is
:func:`inferred_return_types`, used only when a program does not annotate what
``step`` returns.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from expectations import claims  # the corpora's one expectation parser (tests/expectations.py)

ENTRY = "step"
HEADER_MESH = re.compile(r"^#\s*spmdcheck:\s*mesh\s*=\s*\[([^\]]*)\]", re.MULTILINE)
HEADER_STRICT = re.compile(r"^#\s*spmdcheck:\s*strict\b", re.MULTILINE)

KINDS = {
    "R": "R",
    "Replicate": "R",
    "I": "I",
    "Invariant": "I",
    "V": "V",
    "Varying": "V",
    "P": "P",
    "Partial": "P",
}


@dataclass(frozen=True)
class AxisType:
    """One axis' type: R, I, V, P, or S with a dim (a V with a global layout)."""

    kind: str
    dim: int | None = None

    def __str__(self) -> str:
        return f"S({self.dim})" if self.kind == "S" else self.kind

    @property
    def grad(self) -> AxisType:
        """The type of the gradient: R <-> P, I, V and S(d) fixed."""
        return {"R": AxisType("P"), "P": AxisType("R")}.get(self.kind, self)


R, I, V, P = AxisType("R"), AxisType("I"), AxisType("V"), AxisType("P")  # noqa: E741


def S(dim: int) -> AxisType:  # noqa: N802 - mirrors spmd_types.S
    return AxisType("S", dim)


TypeMap = dict[str, AxisType]


def format_types(types: TypeMap | None) -> str:
    if types is None:
        return "untyped"
    return "{" + ", ".join(f"{a}: {t}" for a, t in types.items()) + "}"


class SpecError(ValueError):
    """The program does not follow the runnable-program convention."""


@dataclass
class Param:
    name: str
    types: TypeMap | None  # None: not an SPMD-annotated parameter
    shape: tuple[int, ...] | None  # global shape, from GLOBAL_SHAPES
    has_default: bool = False

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None


@dataclass
class ProgramSpec:
    path: str
    source: str
    mesh: tuple[str, ...]
    strict: bool
    entry: str
    params: list[Param]
    returns: list[TypeMap] | None  # one per returned tensor; None: not annotated
    expected: set[tuple[int, str, str]] = field(default_factory=set)
    # a whole program (fixtures/programs/<name>/): the package folder; `source` is then its entry module
    package_dir: str | None = None

    @property
    def tensor_params(self) -> list[Param]:
        return [p for p in self.params if p.is_tensor]

    def full_types(self, types: TypeMap | None) -> TypeMap:
        """Every mesh axis typed: an axis a parameter does not name is R (documented)."""
        types = types or {}
        return {a: types.get(a, R) for a in self.mesh}


# --------------------------------------------------------------------------- reading types
def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def parse_axis_type(node: ast.AST) -> AxisType:
    if isinstance(node, ast.Call) and _name_of(node.func) in ("S", "Shard"):
        if len(node.args) != 1 or not isinstance(node.args[0], (ast.Constant, ast.UnaryOp)):
            raise SpecError("S(d) needs one literal dim")
        return S(int(ast.literal_eval(node.args[0])))
    name = _name_of(node)
    if name in KINDS:
        return AxisType(KINDS[name])
    raise SpecError(f"not an SPMD type: {ast.unparse(node)}")


_SPEC_ITEM = re.compile(r"^\s*([A-Za-z_][\w]*)\s*:\s*([A-Za-z]+)\s*(?:\(\s*(-?\d+)\s*\))?\s*$")


def parse_spec_string(text: str) -> TypeMap:
    out: TypeMap = {}
    for part in (p for p in _split_top(text) if p.strip()):
        m = _SPEC_ITEM.match(part)
        if not m:
            raise SpecError(f"cannot read type spec item {part!r}")
        axis, kind, dim = m.groups()
        if kind in ("S", "Shard"):
            if dim is None:
                raise SpecError(f"S needs a dim in {part!r}")
            out[axis] = S(int(dim))
        elif kind in KINDS and dim is None:
            out[axis] = AxisType(KINDS[kind])
        else:
            raise SpecError(f"cannot read type {kind!r}")
    return out


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def parse_type_meta(node: ast.AST, mesh: tuple[str, ...]) -> TypeMap:
    """The metadata of ``Annotated[T, meta]``: a dict, a spec string, ``Local("tp: V")`` or a bare type."""
    if isinstance(node, ast.Call) and _name_of(node.func) == "Local":
        if len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            return parse_spec_string(node.args[0].value)
        raise SpecError("Local(...) takes a spec string")
    if isinstance(node, ast.Dict):
        out: TypeMap = {}
        for k, v in zip(node.keys, node.values):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                raise SpecError("type dict keys must be axis-name strings")
            out[k.value] = parse_axis_type(v)
        return out
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return parse_spec_string(node.value)
    t = parse_axis_type(node)  # a bare type: every mesh axis
    return {a: t for a in mesh}


def parse_annotation(node: ast.AST | None, mesh: tuple[str, ...]) -> TypeMap | None:
    """``Annotated[Tensor, {...}]``, ``Annotated[Tensor, "tp: V"]``, ``Annotated[Tensor, Local("tp: V")]`` or
    ``Local["tp: V"]``; else None."""
    if node is None or not isinstance(node, ast.Subscript):
        return None
    head = _name_of(node.value)
    sl = node.slice
    if head == "Local":
        if isinstance(sl, ast.Constant) and isinstance(sl.value, str):
            return parse_spec_string(sl.value)
        raise SpecError("Local[...] takes a spec string")
    if head == "Annotated":
        if not isinstance(sl, ast.Tuple) or len(sl.elts) < 2:
            raise SpecError("Annotated needs a type and metadata")
        return parse_type_meta(sl.elts[1], mesh)
    return None


def parse_return(node: ast.AST | None, mesh: tuple[str, ...]) -> list[TypeMap] | None:
    if node is None:
        return None
    if isinstance(node, ast.Constant) and node.value is None:
        return []
    if isinstance(node, ast.Subscript) and _name_of(node.value) in ("tuple", "Tuple"):
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        out = []
        for e in elts:
            t = parse_annotation(e, mesh)
            if t is None:
                return None
            out.append(t)
        return out
    t = parse_annotation(node, mesh)
    return None if t is None else [t]


# --------------------------------------------------------------------------- module constants
_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
}


def const_eval(node: ast.AST, env: dict[str, object]) -> object:
    """Evaluate a literal expression that may name earlier module-level constants (``(TOKENS, HIDDEN)``)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise SpecError(f"{node.id} is not a module-level constant")
        return env[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(const_eval(e, env) for e in node.elts)
    if isinstance(node, ast.Dict):
        return {const_eval(k, env): const_eval(v, env) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -const_eval(node.operand, env)  # type: ignore[operator]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](const_eval(node.left, env), const_eval(node.right, env))
    raise SpecError(f"not a constant expression: {ast.unparse(node)}")


def module_constants(tree: ast.Module) -> dict[str, object]:
    env: dict[str, object] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        try:
            value = const_eval(node.value, env)
        except (SpecError, TypeError, ZeroDivisionError):
            continue
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            if isinstance(value, tuple) and len(value) == len(target.elts):
                for e, v in zip(target.elts, value):
                    env[e.id] = v  # type: ignore[attr-defined]
    return env


# --------------------------------------------------------------------------- the program
def mesh_of(text: str) -> tuple[str, ...]:
    m = HEADER_MESH.search(text)
    if not m:
        return ()
    return tuple(a.strip().strip("'\"") for a in m.group(1).split(",") if a.strip())


def read_program(source: str, path: str = "<program>", entry: str = ENTRY) -> ProgramSpec:
    """Read a runnable program; raises SpecError with the reason when it is not one."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise SpecError(f"syntax error: {exc.msg}") from exc
    mesh = mesh_of(source)
    env = module_constants(tree)
    shapes: dict[str, tuple[int, ...]] | None = None
    fn: ast.FunctionDef | None = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            fn = node
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else ([node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else [])
        )
        if any(isinstance(t, ast.Name) and t.id == "GLOBAL_SHAPES" for t in targets):
            try:
                shapes = {
                    str(k): tuple(int(d) for d in v)  # type: ignore[union-attr]
                    for k, v in const_eval(node.value, env).items()
                }  # type: ignore[union-attr]
            except (SpecError, ValueError, TypeError, AttributeError) as exc:
                raise SpecError(f"GLOBAL_SHAPES is not a literal dict of shapes: {exc}") from exc
    if fn is None:
        raise SpecError(f"no module-level `def {entry}(...)`")
    if shapes is None:
        raise SpecError("no module-level GLOBAL_SHAPES dict")
    if fn.args.vararg or fn.args.kwarg or fn.args.posonlyargs:
        raise SpecError(f"`{entry}` must take plain named parameters")
    args = fn.args.args + fn.args.kwonlyargs
    n_pos_defaults = len(fn.args.defaults)
    defaults = {a.arg for a in fn.args.args[len(fn.args.args) - n_pos_defaults :]}
    defaults |= {a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None}
    if not mesh:  # no header: the axes the annotations name, in order of appearance
        seen: list[str] = []
        for a in args:
            t = parse_annotation(a.annotation, ())
            for axis in t or {}:
                if axis not in seen:
                    seen.append(axis)
        mesh = tuple(seen)
    if not mesh:
        raise SpecError("no mesh: neither a `# spmdcheck: mesh = [...]` header nor typed parameters")
    params = []
    for a in args:
        types = parse_annotation(a.annotation, mesh)
        shape = shapes.get(a.arg)
        if types is not None and shape is None:
            raise SpecError(f"parameter {a.arg!r} is typed but has no entry in GLOBAL_SHAPES")
        if shape is None and a.arg not in defaults:
            raise SpecError(f"parameter {a.arg!r} has neither a global shape nor a default")
        if types is not None:
            unknown = set(types) - set(mesh)
            if unknown:
                raise SpecError(f"parameter {a.arg!r} names axes {sorted(unknown)} outside the mesh {list(mesh)}")
        params.append(Param(a.arg, types, shape, a.arg in defaults))
    returns = parse_return(fn.returns, mesh)
    return ProgramSpec(
        path, source, mesh, bool(HEADER_STRICT.search(source)), entry, params, returns, claims(source)
    )


PACKAGE_ENTRY = "train.py"


def read_package(folder: str) -> ProgramSpec:
    """Read a program package (fixtures/programs/<name>/): its entry module ``train.py`` follows the
    single-file convention (``step``, ``GLOBAL_SHAPES``, the mesh header); the other modules are imported
    from it. Raises SpecError when it is not a runnable package."""
    import os

    if not os.path.isfile(os.path.join(folder, "__init__.py")):
        raise SpecError(f"{folder} is not a package (no __init__.py)")
    entry = os.path.join(folder, PACKAGE_ENTRY)
    if not os.path.isfile(entry):
        raise SpecError(f"{folder} has no entry module {PACKAGE_ENTRY}")
    with open(entry, encoding="utf-8") as fh:
        spec = read_program(fh.read(), folder)
    spec.package_dir = folder
    return spec


# --------------------------------------------------------------------------- spmdcheck's inferred result type
def inferred_return_types(source: str, mesh: tuple[str, ...], entry: str = ENTRY) -> list[TypeMap] | None:
    """The type spmdcheck infers for what ``entry`` returns (one tensor or a tuple), or None.

    Used only for programs whose entry has no return annotation. It reads the
    checker's interpreter frame, an internal API: if that changes, this returns
    None and the program is judged on its gradients and invariants alone.
    """
    try:
        from spmdcheck.analysis import signature
        from spmdcheck.analysis.context import FileContext, Options
        from spmdcheck.analysis.interp.engine import Interpreter
        from spmdcheck.analysis.values import Alternatives, Seq, TensorValue
        from spmdcheck.api import load_registry
        from spmdcheck.frontend.source import ParseFailure, parse
        from spmdcheck.frontend.source_file import mesh_names_in
    except ImportError:
        return None
    parsed = parse(source)
    if isinstance(parsed, ParseFailure):
        return None
    captured: list = []

    class Capturing(Interpreter):
        def analyze_function(self, fn, *rest):  # noqa: ANN001
            if fn.name.value != entry or self.inline_stack:
                return super().analyze_function(fn, *rest)
            orig = signature.check_returns

            def spy(interp, f, decor, returns):  # noqa: ANN001
                if f is fn:
                    captured.extend(v for v, _ in returns)
                return orig(interp, f, decor, returns)

            signature.check_returns = spy
            try:
                return super().analyze_function(fn, *rest)
            finally:
                signature.check_returns = orig

    try:
        ctx = FileContext(registry=load_registry(()), options=Options(mesh=mesh), module=parsed)
        ctx.known_axes.update(mesh)
        ctx.known_axes.update(mesh_names_in(source))
        Capturing(ctx).run_module(parsed)
    except Exception:  # noqa: BLE001 - best effort only
        return None
    if not captured:
        return None

    def convert(value) -> TypeMap | None:  # noqa: ANN001
        if not isinstance(value, TensorValue) or not value.typed:
            return None
        out: TypeMap = {}
        for axis in mesh:
            t = value.type.get(axis) if hasattr(value.type, "get") else None
            if t is None:
                return None
            kind = t.kind.value
            out[axis] = S(t.shard) if kind == "V" and t.shard is not None else AxisType(kind)
        return out

    value = captured[-1]
    if isinstance(value, Alternatives) and value.options:
        value = value.options[0][0]
    if isinstance(value, Seq):
        items = [convert(v) for v in value.items]
        return None if any(i is None for i in items) else items
    t = convert(value)
    return None if t is None else [t]

"""Dynamic attributes: modules reached by name or by iteration rather than as `self.name`.

Layers are often made and reached through their names as strings, or through `nn.Module`'s own views of its
children: `setattr(self, f"layer_{i}", m)` / `self.add_module(f"layer_{i}", m)` then
`getattr(self, f"layer_{i}")`, `self._modules[name]`, `self.children()`, `self.named_modules()`,
`self.parameters()`, `zip(self.norms, self.mlps)`, `enumerate(self.layers)`. Each is followed as the direct
form (`self.layer_0`, `(self.a, self.b)`) is:

* an f-string whose parts are all known is that string; one with unknown parts is a `NamePattern` (its
  unknown parts wildcards), so `setattr(obj, f"layer_{i}", m)` with `i` unknown writes the attribute family
  `layer_{}` and `getattr(obj, f"layer_{i}")` reads it (or the one attribute all the names it may match
  hold);
* `range(n)` with `n` known is the sequence of its numbers, and a `for` loop over a short sequence of known
  items runs its body once per item (interp/unrolling.py), so the loops that name layers by number name each
  one;
* the views of a module's children are sequences of the objects its attributes hold, in the order they
  were set (as `nn.Module` registers them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from spmdcheck.analysis import configs, signature
from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.values import (
    NUMBER,
    UNKNOWN,
    BoundMethod,
    ClassValue,
    DictValue,
    FunctionValue,
    Homogeneous,
    InstanceValue,
    Literal,
    MethodValue,
    Seq,
    TensorValue,
    Value,
    element_of,
)
from spmdcheck.diagnostics.violations.contracts import AssertTypeMismatch
from spmdcheck.lattice import GradState, SpmdType

MAX_RANGE = 64  # `range(n)` with a larger known `n` stays unknown (a loop over it is not unrolled anyway)
WILDCARD = "{}"  # an unknown part of a NamePattern (never part of an identifier)


@dataclass(frozen=True)
class NamePattern(Value):
    """An f-string with unknown parts (`f"layer_{i}"`): its text with `{}` for each unknown part."""

    template: str

    def matches(self, name: str) -> bool:
        parts = [re.escape(p) for p in self.template.split(WILDCARD)]
        return re.fullmatch(".*".join(parts), name) is not None


def format_string(node: cst.FormattedString, values: list[Value]) -> Value:
    """An f-string's value from the values of its `{...}` parts (in order): the string when all are known
    constants without conversions or format specs, else its NamePattern."""
    pieces: list[str] = []
    known = True
    expressions = iter(values)
    for part in node.parts:
        if isinstance(part, cst.FormattedStringText):
            pieces.append(part.value)
            continue
        value = next(expressions, UNKNOWN)
        plain = part.conversion is None and part.format_spec is None  # type: ignore[union-attr]
        if plain and isinstance(value, Literal) and type(value.value) in (int, str):
            pieces.append(str(value.value))
        else:
            pieces.append(WILDCARD)
            known = False
    text = "".join(pieces)
    if "{" in text.replace(WILDCARD, "") or "}" in text.replace(WILDCARD, ""):
        return UNKNOWN  # `{{`/`}}` escapes: left to Python
    return Literal(text) if known else NamePattern(text)


# ----------------------------------------------------------------------------- getattr / setattr
def read_attribute(interp: Engine, obj: InstanceValue, name: Value) -> Value:
    """`getattr(obj, name)`: what `obj.<name>` reads for a known name; for a NamePattern, the family it
    writes, else the one value every attribute it may name holds."""
    if isinstance(name, Literal) and isinstance(name.value, str):
        return _named(interp, obj, name.value)
    if isinstance(name, NamePattern):
        if name.template in obj.attrs:
            return obj.attrs[name.template]
        found = [value for attr, value in obj.attrs.items() if attr != name.template and name.matches(attr)]
        if found and all(value is found[0] for value in found):
            return found[0]
    return UNKNOWN


def _named(interp: Engine, obj: InstanceValue, attr: str) -> Value:
    """`obj.attr` as the evaluator reads it (expressions.py `object_attribute`), and an attribute a
    NamePattern's family may hold."""
    if attr in obj.attrs:
        return obj.attrs[attr]
    families = [value for key, value in obj.attrs.items() if WILDCARD in key and NamePattern(key).matches(attr)]
    if len(families) == 1:
        return families[0]
    typed_field = configs.config_field(interp, obj, attr)
    if typed_field is not None:
        return typed_field
    found = obj.cls.lookup(attr)
    if isinstance(found, FunctionValue):
        return MethodValue(found, obj) if signature.takes_self(found.node) else found
    if found is not None:
        return found
    declared = obj.cls.declared_type(attr)
    if declared:
        return TensorValue(SpmdType(declared), GradState.UNKNOWN, None)
    member = module_member(obj, attr)  # `getattr(self, "add_module")`: nn.Module's
    return member if member is not None else UNKNOWN


def _as_declared(interp: Engine, obj: Value, name: Value, value: Value, node: cst.CSTNode) -> Value:
    """`setattr(self, "w1", v)` of an attribute the class declares (`w1: Local["ep: S(0)"]`): checked and
    typed as `self.w1 = v` is (interp/statements.py `assign`)."""
    if isinstance(obj, InstanceValue) and isinstance(name, Literal) and isinstance(name.value, str):
        declared = obj.cls.declared_type(name.value)
        if declared:
            return signature.check_declared(interp, value, declared, node, AssertTypeMismatch, "annotated attribute")
    return value


def write_attribute(interp: Engine, obj: Value, name: Value, value: Value) -> None:
    """`setattr(obj, name, value)`, `obj.add_module(name, value)`: a known name writes that attribute, a
    NamePattern its family. A name the checker cannot read writes nothing it tracks."""
    if not isinstance(obj, InstanceValue):
        return
    if isinstance(name, Literal) and isinstance(name.value, str):
        interp.set_attr(obj, name.value, value)
    elif isinstance(name, NamePattern):
        interp.set_attr(obj, name.template, value)


# ----------------------------------------------------------------------------- builtins
BUILTINS = ("getattr", "setattr", "zip", "enumerate", "range")


def call_builtin(interp: Engine, name: str, args: list[Arg]) -> Value:
    """`getattr`, `setattr`, `zip`, `enumerate` and `range` of values the checker knows."""
    if any(keyword is not None for keyword, _, _ in args):
        return UNKNOWN
    values = [value for _, value, _ in args]
    if name == "getattr" and len(values) in (2, 3) and isinstance(values[0], InstanceValue):
        return read_attribute(interp, values[0], values[1])
    if name == "setattr" and len(values) == 3:
        write_attribute(interp, values[0], values[1], _as_declared(interp, values[0], values[1], values[2], args[2][2]))
        return Literal(None)
    if name == "zip" and values:
        return _zip(values)
    if name == "enumerate" and len(values) == 1:
        return _enumerate(values[0])
    if name == "range":
        return _range(values)
    return UNKNOWN


def _zip(values: list[Value]) -> Value:
    if all(isinstance(v, Seq) for v in values):
        size = min(len(v.items) for v in values)  # type: ignore[attr-defined]
        return Seq(tuple(Seq(tuple(v.items[i] for v in values)) for i in range(size)))  # type: ignore[attr-defined]
    if all(isinstance(v, (Seq, Homogeneous)) for v in values):
        return Homogeneous(Seq(tuple(element_of(v) for v in values)))
    return UNKNOWN


def _enumerate(value: Value) -> Value:
    if isinstance(value, Seq):
        return Seq(tuple(Seq((Literal(i), item)) for i, item in enumerate(value.items)))
    if isinstance(value, Homogeneous):
        return Homogeneous(Seq((NUMBER, value.item)))
    return UNKNOWN


def _range(values: list[Value]) -> Value:
    numbers = [v.value for v in values if isinstance(v, Literal) and type(v.value) is int]
    if len(numbers) != len(values) or not 1 <= len(numbers) <= 3 or (len(numbers) == 3 and numbers[2] == 0):
        return UNKNOWN
    span = range(*numbers)
    return Seq(tuple(Literal(i) for i in span)) if len(span) <= MAX_RANGE else UNKNOWN


# ----------------------------------------------------------------------------- nn.Module's views
_MODULE_METHODS = frozenset(
    {
        "add_module",
        "register_module",
        "get_submodule",
        "children",
        "named_children",
        "modules",
        "named_modules",
        "parameters",
        "named_parameters",
    }
)
MODULE = "torch.nn.Module"


def _is_module_class(cls: ClassValue) -> bool:
    """A class of the program deriving from a library class (`nn.Module`), or defining `forward`."""
    return any(not isinstance(base, ClassValue) for c in cls.mro() for base in c.bases) or isinstance(
        cls.lookup("forward"), FunctionValue
    )


def module_member(obj: InstanceValue, attr: str) -> Value | None:
    """`self.add_module`, `self.children`, ..., `self._modules` of a module object whose class does not define
    them: `nn.Module`'s (None: not one of these)."""
    if attr == "_modules" and _is_module_class(obj.cls):
        return DictValue(tuple((Literal(name), value, cst.Name(name)) for name, value in _children(obj)))
    if attr in _MODULE_METHODS and _is_module_class(obj.cls):
        return BoundMethod(obj, f"{MODULE}.{attr}")
    return None


def _children(obj: InstanceValue) -> list[tuple[str, InstanceValue]]:
    """The modules an object's attributes hold directly, in the order they were set."""
    return [
        (name, value)
        for name, value in obj.attrs.items()
        if WILDCARD not in name and isinstance(value, InstanceValue) and _is_module_class(value.cls)
    ]


def _walk(obj: InstanceValue, prefix: str, depth: int = 6) -> list[tuple[str, InstanceValue]]:
    """`named_modules()`: the object, then each child's modules, depth first (each object once)."""
    out = [(prefix, obj)]
    if depth > 0:
        for name, child in _children(obj):
            for entry in _walk(child, f"{prefix}.{name}" if prefix else name, depth - 1):
                if all(entry[1] is not seen for _, seen in out):
                    out.append(entry)
    return out


def _parameters(obj: InstanceValue) -> list[tuple[str, TensorValue]]:
    """`named_parameters()`: the parameters (leaf tensors) each module holds, with their dotted names."""
    out: list[tuple[str, TensorValue]] = []
    for prefix, module in _walk(obj, ""):
        for name, value in module.attrs.items():
            if isinstance(value, TensorValue) and value.leaf and WILDCARD not in name:
                out.append((f"{prefix}.{name}" if prefix else name, value))
    return out


def call_module_method(interp: Engine, method: BoundMethod, args: list[Arg]) -> Value | None:
    """A call of one of `nn.Module`'s methods on a module object of the program (None: not one)."""
    obj = method.receiver
    if not isinstance(obj, InstanceValue) or not method.qualname.startswith(MODULE + "."):
        return None
    name = method.qualname[len(MODULE) + 1 :]
    values = [value for keyword, value, _ in args if keyword is None]
    if any(keyword is not None for keyword, _, _ in args):
        return UNKNOWN
    if name in ("add_module", "register_module") and len(values) == 2:
        write_attribute(interp, obj, values[0], values[1])
        return Literal(None)
    if name == "get_submodule" and len(values) == 1:
        target: Value = obj
        text = values[0]
        if not (isinstance(text, Literal) and isinstance(text.value, str)):
            return UNKNOWN
        for part in text.value.split(".") if text.value else ():
            target = _named(interp, target, part) if isinstance(target, InstanceValue) else UNKNOWN
        return target
    if values:
        return UNKNOWN
    if name == "children":
        return Seq(tuple(child for _, child in _children(obj)))
    if name == "named_children":
        return Seq(tuple(Seq((Literal(n), child)) for n, child in _children(obj)))
    if name == "modules":
        return Seq(tuple(module for _, module in _walk(obj, "")))
    if name == "named_modules":
        return Seq(tuple(Seq((Literal(n), module)) for n, module in _walk(obj, "")))
    if name == "parameters":
        return Seq(tuple(p for _, p in _parameters(obj)))
    if name == "named_parameters":
        return Seq(tuple(Seq((Literal(n), p)) for n, p in _parameters(obj)))
    return UNKNOWN

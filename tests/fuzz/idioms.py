"""Metamorphic rewrites in the idioms of issue 20: Python as ML infrastructure code is written.

Each family rewrites ANY module set (a generated program, after a helper or module rewrite when it needs a
function or a class to work on, or a fixture file or package) without changing what a rank computes:

* ``registry``: a call of a function or class the program defines (or imports from its own package) goes
  through a registry: a dict literal appended to the module, or a ``@register("name")`` decorator filling a
  dict; looked up by a constant key (``BUILDERS["part"](x)``) or by a config key (``BUILDERS[cfg.part](x)``);
* ``dynattr``: in a class, ``self.x`` reads become ``getattr(self, "x")`` (or ``f"x{1}"`` for a name ending in
  digits, or ``self._modules["x"]`` for a submodule), ``self.x = v`` becomes ``setattr(self, "x", v)`` (or
  ``self.add_module("x", v)`` when ``v`` is a module);
* ``container``: a local value ``v`` read through a dict or a comprehension (``{"v": v}["v"]``,
  ``dict(v=v)["v"]``, ``dict(zip(["v"], [v]))["v"]``, ``[t for t in [v]][0]``, ``{k: t for ...}["v"]``), a
  loop over ``[t for t in xs]`` instead of ``xs``;
* ``config``: a literal axis name given to a call (``"tp"``) or a literal flag keyword (``keepdim=True``)
  read from a config object: a dataclass (nested, with ``field(default_factory=...)``, or built with
  ``dataclasses.replace``), a ``SimpleNamespace``, or a constructor argument stored on ``self``;
* ``decorator``: a function wrapped by a program-defined ``functools.wraps`` pass-through decorator (plain or
  a factory ``@traced("name")``);
* ``generator``: a loop's iterable yielded by a generator function (``for ...: yield``, ``yield from``, or an
  ``__iter__`` generator of a small class);
* ``partial``: ``f(a, k=v)`` as ``functools.partial(f, k=v)(a)``, or a module-level partial factory;
* ``kwargs``: keyword arguments splatted from a dict (``**{"k": v}``, ``**dict(k=v)``, a local ``kwargs``
  dict), or forwarded through ``def forward_call(fn, *args, **kwargs)``;
* ``lambda``: a call ``f(a, k=v)`` made through a lambda: called at once (``(lambda p0, p1: f(p0, k=p1))(a, v)``,
  ``(lambda *args, **kwargs: f(*args, **kwargs))(a, k=v)``, the callee a default ``(lambda p0, fn=f: fn(p0))``),
  bound to a name first (``h = lambda *args, **kwargs: f(*args, **kwargs)`` on its own line before the statement
  when ``f`` is a module-level function, which the call then forwards to; else on the call's line, before a
  ``;``), or a module-level function called through a registry of lambdas (``CALLS["f"](a)``).

Each returns a :class:`Transformed` with the map (path, new line) -> (path, old line) | None: an edited line
keeps its number in the map, an inserted line (an import, a config class, a decorator line) maps to nothing, so a
finding there is always a difference. None when the family finds nothing to rewrite in the modules.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from .sourceedit import (
    CodeNode,
    FileEdit,
    after_imports,
    code_nodes,
    fresh,
    function_locals,
    module_names,
    statement_of,
)

FAMILIES = ("registry", "dynattr", "container", "config", "decorator", "generator", "partial", "kwargs", "lambda")


@dataclass
class Transformed:
    files: dict[str, str]
    line_map: dict[tuple[str, int], tuple[str, int] | None]  # (path, new line) -> (path, old line)
    note: str


class Module:
    """One module of the set being rewritten: its text, tree, code nodes and the edits made to it."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.tree = ast.parse(text)
        self.edit = FileEdit(text)
        self.nodes = list(code_nodes(self.tree))
        self.taken = module_names(self.tree)
        self.imports_at = after_imports(self.tree, text)

    def in_functions(self) -> list[CodeNode]:
        return [n for n in self.nodes if n.func is not None and not n.in_fstring]

    def seg(self, node: ast.AST) -> str:
        return self.edit.segment(node)


def _done(modules: dict[str, Module], touched: set[str], note: str) -> Transformed:
    files, line_map = {}, {}
    for path, m in modules.items():
        if path in touched:
            text, old_of = m.edit.apply()
        else:
            text, old_of = m.edit.text, {i: i for i in range(1, len(m.edit.lines) + 1)}
        files[path] = text
        line_map.update({(path, new): (None if old is None else (path, old)) for new, old in old_of.items()})
    return Transformed(files, line_map, note)


def _load(files: dict[str, str]) -> dict[str, Module]:
    return {p: Module(p, t) for p, t in files.items() if p.endswith(".py")}


def _some(c, items: list, most: int = 3) -> list:  # noqa: ANN001
    """One to ``most`` distinct items, drawn in order."""
    pool = list(items)
    out = []
    for _ in range(c.integer(1, min(most, len(pool)))):
        out.append(pool.pop(c.integer(0, len(pool) - 1)))
    return out


def _pick_module(c, modules: dict[str, Module], has: Callable[[Module], list]):  # noqa: ANN001, ANN202
    """A module with candidates (drawn) and its candidates, or (None, [])."""
    options = [(p, found) for p, m in sorted(modules.items()) if (found := has(m))]
    if not options:
        return None, []
    path, found = options[c.integer(0, len(options) - 1)]
    return modules[path], found


def _single_line_calls(m: Module, keywords: bool = True) -> list[ast.Call]:
    return [n.node for n in m.in_functions() if isinstance(n.node, ast.Call) and n.node.lineno == n.node.end_lineno
            and (not keywords or any(k.arg is not None for k in n.node.keywords))
            and not (isinstance(n.node.func, ast.Name) and n.node.func.id == "super")]


def _outermost(calls: list[ast.Call]) -> list[ast.Call]:
    """Calls not inside another of the list (their edits never overlap)."""
    def inside(a: ast.Call, b: ast.Call) -> bool:
        return a is not b and a.lineno == b.lineno and b.col_offset <= a.col_offset and a.end_col_offset <= \
            b.end_col_offset
    return [a for a in calls if not any(inside(a, b) for b in calls)]


# --------------------------------------------------------------------------- registry dispatch
def _callables(m: Module) -> set[str]:
    """Names of functions and classes the module defines at top level or imports from its own package."""
    out = {s.name for s in m.tree.body if isinstance(s, (ast.FunctionDef, ast.ClassDef))}
    for s in m.tree.body:
        if isinstance(s, ast.ImportFrom) and s.level > 0:
            out |= {a.asname or a.name for a in s.names if a.name != "*"}
    return out


def registry(files: dict[str, str], c, axes: tuple[str, ...] = ()) -> Transformed | None:  # noqa: ANN001
    modules = _load(files)

    def calls(m: Module) -> list[ast.Call]:
        names = _callables(m)
        return [n.node for n in m.in_functions() if isinstance(n.node, ast.Call) and isinstance(n.node.func, ast.Name)
                and n.node.func.id in names]

    m, found = _pick_module(c, modules, calls)
    if m is None:
        return None
    names = sorted({call.func.id for call in found})
    chosen = _some(c, names, 2)
    defined = {s.name: s for s in m.tree.body if isinstance(s, (ast.FunctionDef, ast.ClassDef))}
    # ``@register`` runs when the def does: the registry defined after the imports must come before it
    decoratable = all(n in defined and defined[n].lineno > m.imports_at for n in chosen)
    style = c.pick(["dict literal", "@register"]) if decoratable else "dict literal"
    key = c.pick(["constant key", "config key"])
    reg = fresh(m.taken, c.pick(["BUILDERS", "MODEL_REGISTRY", "LOSSES"]))
    cfg = fresh(m.taken, "registry_config")
    cls_cfg = fresh(m.taken, "RegistryConfig")
    tail: list[str] = ["", ""]
    if style == "@register":
        deco = fresh(m.taken, "register")
        m.edit.add_lines(m.imports_at, ["", "", f"{reg} = {{}}", "", "", f"def {deco}(name):", "    def add(obj):",
                                        f"        {reg}[name] = obj", "        return obj", "    return add", ""])
        for name in chosen:
            node = defined[name]
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            m.edit.add_lines(first, [f'{m.edit.indent_of(node.lineno)}@{deco}("{name}")'])
    else:
        tail += [f"{reg} = {{", *[f'    "{n}": {n},' for n in chosen], "}"]
    if key == "config key":
        holder = c.pick(["SimpleNamespace", "dataclass"])
        fields = ", ".join(f'{n.lower()}="{n}"' for n in chosen)
        if holder == "SimpleNamespace":
            tail += ["from types import SimpleNamespace", f"{cfg} = SimpleNamespace({fields})"]
        else:
            tail += ["from dataclasses import dataclass", "", "", "@dataclass", f"class {cls_cfg}:",
                     *[f'    {n.lower()}: str = "{n}"' for n in chosen], "", "", f"{cfg} = {cls_cfg}()"]
    m.edit.append(tail)
    for call in found:
        if call.func.id in chosen:
            k = f'"{call.func.id}"' if key == "constant key" else f"{cfg}.{call.func.id.lower()}"
            m.edit.replace_node(call.func, f"{reg}[{k}]")
    return _done(modules, {m.path}, f"{m.path}: {', '.join(chosen)} called through {style} `{reg}` by {key}")


# --------------------------------------------------------------------------- dynamic attributes
def _methods(cls: ast.ClassDef) -> list[ast.FunctionDef]:
    out = []
    for s in cls.body:
        if isinstance(s, ast.FunctionDef) and s.args.args and s.args.args[0].arg == "self" and not any(
                isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in s.decorator_list):
            out.append(s)
    return out


def _module_classes(modules: dict[str, Module]) -> set[str]:
    """The program's classes that derive (through one another) from ``nn.Module`` or an ``nn`` class."""
    bases = {s.name: [ast.unparse(b) for b in s.bases] for m in modules.values() for s in ast.walk(m.tree)
             if isinstance(s, ast.ClassDef)}
    found: set[str] = set()
    while True:
        more = {name for name, bs in bases.items() if name not in found and any(
            b in found or b.split(".")[-1] == "Module" or (b.startswith(("nn.", "torch.nn.")) and _nn_module(b))
            for b in bs)}
        if not more:
            return found
        found |= more


def _nn_module(dotted: str) -> bool:
    """``nn.Linear`` builds a module; ``nn.Parameter`` (and ``nn.Buffer``) do not."""
    name = dotted.split(".")[-1]
    return name[:1].isupper() and name not in ("Parameter", "Buffer", "UninitializedParameter")


def _module_valued(value: ast.AST, classes: set[str]) -> bool:
    """A call that builds an nn.Module: ``nn.X(...)``, ``torch.nn.X(...)``, or a module class of the program."""
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    if isinstance(f, ast.Attribute):
        root = f.value
        return ((isinstance(root, ast.Name) and root.id == "nn") or ast.unparse(root) == "torch.nn") and \
            _nn_module(f.attr)
    return isinstance(f, ast.Name) and f.id in classes


def _class_attributes(m: Module, cls: ast.ClassDef, classes: set[str]) -> tuple[list, list, set[str]]:
    """(``self.x = v`` statements, ``self.x`` reads, the names assigned a module) in the class's methods."""
    methods = _methods(cls)
    in_methods = {id(n.node) for n in m.nodes if n.func in methods and not n.in_fstring}
    submodules: set[str] = set()
    stores, loads = [], []
    for f in methods:
        for n in ast.walk(f):
            if id(n) not in in_methods:
                continue
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and _self_attr(n.targets[0]) and \
                    n.targets[0].end_lineno == n.value.lineno:
                stores.append(n)
                if _module_valued(n.value, classes):
                    submodules.add(n.targets[0].attr)
            elif _self_attr(n) and isinstance(n.ctx, ast.Load):
                loads.append(n)
    return stores, loads, submodules


def dynattr(files: dict[str, str], c, axes: tuple[str, ...] = ()) -> Transformed | None:  # noqa: ANN001
    modules = _load(files)
    classes = _module_classes(modules)

    def candidates(m: Module) -> list[tuple[ast.ClassDef, tuple]]:
        found = [(s, _class_attributes(m, s, classes)) for s in ast.walk(m.tree) if isinstance(s, ast.ClassDef)]
        return [(s, attrs) for s, attrs in found if attrs[0] or attrs[1]]

    m, found = _pick_module(c, modules, candidates)
    if m is None:
        return None
    cls, (stores, loads, submodules) = found[c.integer(0, len(found) - 1)]
    names = sorted({a.attr for a in loads} | {s.targets[0].attr for s in stores})
    which = c.pick(["every attribute", "one attribute"])
    chosen = set(names) if which == "every attribute" else {names[c.integer(0, len(names) - 1)]}
    spelling = c.pick(["string", "f-string", "_modules"])

    def key(attr: str) -> str:
        digits = re.search(r"\d+$", attr)
        if spelling == "f-string" and digits:
            return f'f"{attr[:digits.start()]}{{{int(digits.group())}}}"'
        return f'"{attr}"'

    for a in loads:
        if a.attr in chosen and a.lineno == a.end_lineno:
            text = f"self._modules[{key(a.attr)}]" if spelling == "_modules" and a.attr in submodules else \
                f"getattr(self, {key(a.attr)})"
            m.edit.replace_node(a, text)
    for s in stores:
        target = s.targets[0]
        if target.attr in chosen:
            call = "self.add_module(" if target.attr in submodules else "setattr(self, "
            m.edit.replace(target.lineno, target.col_offset, s.value.col_offset, f"{call}{key(target.attr)}, ")
            m.edit.insert(s.value.end_lineno, s.value.end_col_offset, ")")
    what = "every attribute" if which == "every attribute" else ", ".join(sorted(chosen))
    return _done(modules, {m.path}, f"{m.path}: class {cls.name}, {what} through getattr/setattr ({spelling})")


def _self_attr(n: ast.AST) -> bool:
    return isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" and \
        not n.attr.startswith("__")


# --------------------------------------------------------------------------- containers
CONTAINER_FORMS = {
    "dict literal": '{{"{k}": {v}}}["{k}"]',
    "dict call": 'dict({k}={v})["{k}"]',
    "dict zip": 'dict(zip(["{k}"], [{v}]))["{k}"]',
    "list comprehension": "[t for t in [{v}]][0]",
    "dict comprehension": '{{key: t for key, t in [("{k}", {v})]}}["{k}"]',
    "dict get": '{{"{k}": {v}}}.get("{k}")',
}


def container(files: dict[str, str], c, axes: tuple[str, ...] = ()) -> Transformed | None:  # noqa: ANN001
    modules = _load(files)

    def values(m: Module) -> list[ast.AST]:
        out: list[ast.AST] = []
        callees = {id(n.node.func) for n in m.nodes if isinstance(n.node, ast.Call)}
        for n in m.in_functions():
            node = n.node
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id != "self" and \
                    id(node) not in callees and node.id in function_locals(n.func) and not node.id.startswith("_"):
                out.append(node)
            elif isinstance(node, ast.For) and not n.in_lambda:
                out.append(node.iter)
        return out

    m, found = _pick_module(c, modules, values)
    if m is None:
        return None
    chosen = _some(c, found, 3)
    done = []
    for node in chosen:
        if isinstance(node, ast.Name):
            form = c.pick(list(CONTAINER_FORMS))
            v = node.id
            k = v if form != "dict call" or v.isidentifier() else "value"
            m.edit.replace_node(node, CONTAINER_FORMS[form].format(k=k, v=v))
            done.append(f"{v}@{node.lineno} ({form})")
        else:
            m.edit.wrap(node, "[t for t in ", "]")
            done.append(f"loop@{node.lineno} (list comprehension)")
    return _done(modules, {m.path}, f"{m.path}: {', '.join(done)} through a container")


# --------------------------------------------------------------------------- config-held axes and flags
def config(files: dict[str, str], c, axes: tuple[str, ...] = ()) -> Transformed | None:  # noqa: ANN001
    modules = _load(files)

    def literals(m: Module) -> list[tuple[ast.Constant, str, CodeNode]]:
        out = []
        for n in m.in_functions():
            if not isinstance(n.node, ast.Call):
                continue
            for a in n.node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value in axes:
                    out.append((a, f"{a.value}_axis", n))
            for k in n.node.keywords:
                v = k.value
                if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value in axes:
                    out.append((v, f"{v.value}_axis", n))
                elif isinstance(v, ast.Constant) and isinstance(v.value, bool) and k.arg is not None:
                    out.append((v, f"{k.arg.lstrip('_')}_{str(v.value).lower()}", n))
        return [x for x in out if x[0].lineno == x[0].end_lineno]

    m, found = _pick_module(c, modules, literals)
    if m is None:
        return None
    chosen = found if c.pick(["every literal", "some literals"]) == "every literal" else _some(c, found, 3)
    fields = {name: repr(lit.value) for lit, name, _ in chosen}
    holder = c.pick(["dataclass", "nested dataclass", "dataclasses.replace", "SimpleNamespace", "constructor"])
    owner = _constructor_owner(m, chosen) if holder == "constructor" else None
    if holder == "constructor" and owner is None:
        holder = "dataclass"
    if holder == "constructor":
        init, cls = owner
        _add_init_fields(m, init, fields)
        access = {name: f"self.{name}" for name in fields}
    else:
        access = _config_holder(m, holder, fields)
    for lit, name, _ in chosen:
        m.edit.replace_node(lit, access[name])
    return _done(modules, {m.path}, f"{m.path}: {', '.join(f'{v}@{lit.lineno}' for lit, v, _ in chosen)} held by "
                 f"a {holder}")


def _config_holder(m: Module, holder: str, fields: dict[str, str]) -> dict[str, str]:
    cls = fresh(m.taken, "ParallelConfig")
    obj = fresh(m.taken, "CONFIG")
    def default(value: str) -> str:  # dataclasses.replace sets the value: the class default is another one
        if holder != "dataclasses.replace":
            return value
        return "''" if value.startswith("'") else repr(value != "True")

    body = [f"    {name}: {'str' if value.startswith(chr(39)) else 'bool'} = {default(value)}"
            for name, value in fields.items()]
    lines = ["", ""]
    if holder == "SimpleNamespace":
        lines += ["from types import SimpleNamespace", "", "", f"{obj} = SimpleNamespace(",
                  *[f"    {name}={value}," for name, value in fields.items()], ")"]
        return _insert(m, lines, {name: f"{obj}.{name}" for name in fields})
    lines += ["import dataclasses" if holder == "dataclasses.replace" else "from dataclasses import dataclass, field",
              "", "", "@dataclasses.dataclass" if holder == "dataclasses.replace" else "@dataclass", f"class {cls}:",
              *body, ""]
    if holder == "nested dataclass":
        outer = fresh(m.taken, "TrainConfig")
        lines += ["", "@dataclass", f"class {outer}:", "    name: str = \"run\"",
                  f"    parallel: {cls} = field(default_factory={cls})", "", "", f"{obj} = {outer}()"]
        return _insert(m, lines, {name: f"{obj}.parallel.{name}" for name in fields})
    if holder == "dataclasses.replace":
        lines += ["", f"{obj} = dataclasses.replace({cls}(), {', '.join(f'{n}={v}' for n, v in fields.items())})"]
    else:
        lines += ["", f"{obj} = {cls}()"]
    return _insert(m, lines, {name: f"{obj}.{name}" for name in fields})


def _insert(m: Module, lines: list[str], access: dict[str, str]) -> dict[str, str]:
    m.edit.add_lines(m.imports_at, lines + [""])
    return access


def _constructor_owner(m: Module, chosen: list) -> tuple[ast.FunctionDef, ast.ClassDef] | None:  # noqa: ANN001
    """The class whose methods (not ``__init__``) hold every chosen literal, when its ``__init__`` can take one
    more keyword with a default."""
    owners = {(n.cls.name if n.cls is not None and n.func in _methods(n.cls) and n.func.name != "__init__"
               else None) for _, _, n in chosen}
    if len(owners) != 1 or None in owners:
        return None
    cls = next(n.cls for _, _, n in chosen)
    init = next((f for f in _methods(cls) if f.name == "__init__"), None)
    if init is None or init.args.vararg or init.args.kwarg or init.args.posonlyargs or not init.body:
        return None
    return init, cls


def _add_init_fields(m: Module, init: ast.FunctionDef, fields: dict[str, str]) -> None:
    a = init.args
    last = max([*a.args, *a.kwonlyargs, *a.defaults, *[d for d in a.kw_defaults if d is not None]],
               key=lambda n: (n.end_lineno, n.end_col_offset))
    end = last.annotation if isinstance(last, ast.arg) and last.annotation is not None else last
    m.edit.insert(end.end_lineno, end.end_col_offset, "".join(f", {n}={v}" for n, v in fields.items()))
    body = init.body
    at = body[0]
    if isinstance(at, ast.Expr) and isinstance(at.value, ast.Constant) and len(body) > 1:
        at = body[1]
    supers = [s for s in body if isinstance(s, ast.Expr) and "super()" in m.seg(s)]
    indent = m.edit.indent_of(at.lineno)
    where = supers[0].end_lineno + 1 if supers else at.lineno
    m.edit.add_lines(where, [f"{indent}self.{n} = {n}" for n in fields])


# --------------------------------------------------------------------------- decorators
DECORATORS = {
    "wraps": ["import functools", "", "", "def {name}(fn):", "    @functools.wraps(fn)",
              "    def wrapper(*args, **kwargs):", "        return fn(*args, **kwargs)", "", "    return wrapper"],
    "wraps factory": ["from functools import wraps", "", "", "def {name}(label):", "    def decorate(fn):",
                      "        @wraps(fn)", "        def wrapper(*args, **kwargs):",
                      "            return fn(*args, **kwargs)", "", "        return wrapper", "",
                      "    return decorate"],
}


def decorator(files: dict[str, str], c, axes: tuple[str, ...] = ()) -> Transformed | None:  # noqa: ANN001
    modules = _load(files)

    def functions(m: Module) -> list[ast.FunctionDef]:  # defined after the decorator (it runs at the def)
        return [f for f in ast.walk(m.tree) if isinstance(f, ast.FunctionDef) and f.lineno > m.imports_at]

    m, found = _pick_module(c, modules, functions)
    if m is None:
        return None
    style = c.pick(list(DECORATORS))
    name = fresh(m.taken, c.pick(["traced", "timed", "log_calls"]))
    m.edit.add_lines(m.imports_at, ["", "", *(ln.format(name=name) for ln in DECORATORS[style]), "", ""])
    chosen = _some(c, found, 3)
    for f in chosen:
        use = f'@{name}("{f.name}")' if style == "wraps factory" else f"@{name}"
        m.edit.add_lines(f.lineno, [m.edit.indent_of(f.lineno) + use])
    return _done(modules, {m.path}, f"{m.path}: {', '.join(f'{f.name}@{f.lineno}' for f in chosen)} wrapped by "
                 f"`{name}` ({style})")


# --------------------------------------------------------------------------- generators
GENERATORS = {
    "yield loop": ["def {name}(items):", "    for item in items:", "        yield item"],
    "yield from": ["def {name}(items):", "    yield from items"],
    "__iter__": ["class {name}:", "    def __init__(self, items):", "        self.items = items", "",
                 "    def __iter__(self):", "        for item in self.items:", "            yield item"],
}


def generator(files: dict[str, str], c, axes: tuple[str, ...] = ()) -> Transformed | None:  # noqa: ANN001
    modules = _load(files)
    m, found = _pick_module(c, modules, lambda m: [n.node for n in m.in_functions() if isinstance(n.node, ast.For)])
    if m is None:
        return None
    style = c.pick(list(GENERATORS))
    name = fresh(m.taken, "Items" if style == "__iter__" else "iterate")
    m.edit.add_lines(m.imports_at, ["", "", *(ln.format(name=name) for ln in GENERATORS[style]), "", ""])
    chosen = _some(c, found, 2)
    for loop in chosen:
        m.edit.wrap(loop.iter, f"{name}(", ")")
    return _done(modules, {m.path}, f"{m.path}: loops at {', '.join(str(f.lineno) for f in chosen)} over "
                 f"`{name}` ({style})")


# --------------------------------------------------------------------------- partial and **kwargs
def _call_text(m: Module, call: ast.Call, keep: list[ast.keyword], before: list[str] = (),
               extra: str = "") -> str:
    """The call's arguments as text: ``before`` first, its positional arguments, the kept keywords, ``extra``."""
    parts = [*before, *(m.seg(a) for a in call.args), *(m.seg(k) for k in keep)]
    return ", ".join(parts + ([extra] if extra else []))


def _module_level(m: Module, node: ast.AST) -> bool:
    """An expression made of constants and module-level names (it can be evaluated at module level)."""
    top = {s.name for s in m.tree.body if isinstance(s, (ast.FunctionDef, ast.ClassDef))}
    for s in m.tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            top |= {(a.asname or a.name).split(".")[0] for a in s.names}
        elif isinstance(s, ast.Assign):
            top |= {t.id for t in s.targets if isinstance(t, ast.Name)}
    return all(n.id in top for n in ast.walk(node) if isinstance(n, ast.Name)) and not any(
        isinstance(n, (ast.Call, ast.Lambda)) for n in ast.walk(node))


def partial(files: dict[str, str], c, axes: tuple[str, ...] = ()) -> Transformed | None:  # noqa: ANN001
    modules = _load(files)
    m, found = _pick_module(c, modules, lambda m: _outermost(_single_line_calls(m)))
    if m is None:
        return None
    call = found[c.integer(0, len(found) - 1)]
    named = [k for k in call.keywords if k.arg is not None]
    every = c.pick(["every keyword", "one keyword"]) == "every keyword"
    bound = named if every else [named[c.integer(0, len(named) - 1)]]
    rest = [k for k in call.keywords if k not in bound]
    spelling = c.pick(["functools.partial", "partial"])
    if spelling == "partial":
        pname = fresh(m.taken, "partial")
        m.edit.add_lines(m.imports_at, [f"from functools import partial as {pname}" if pname != "partial" else
                                        "from functools import partial"])
    else:
        pname = "functools.partial"
        m.edit.add_lines(m.imports_at, ["import functools"])
    bind = ", ".join(m.seg(k) for k in bound)
    factory = c.pick(["inline", "factory"])
    if factory == "factory" and _module_level(m, call.func) and all(_module_level(m, k.value) for k in bound):
        fname = fresh(m.taken, "bound_call")
        m.edit.append([f"{fname} = {pname}({m.seg(call.func)}, {bind})"])
        m.edit.replace_node(call, f"{fname}({_call_text(m, call, rest)})")
    else:
        factory = "inline"
        m.edit.replace_node(call, f"{pname}({m.seg(call.func)}, {bind})({_call_text(m, call, rest)})")
    return _done(modules, {m.path}, f"{m.path}: {', '.join(k.arg for k in bound)} of the call at line "
                 f"{call.lineno} bound by {spelling} ({factory})")


def kwargs(files: dict[str, str], c, axes: tuple[str, ...] = ()) -> Transformed | None:  # noqa: ANN001
    modules = _load(files)
    m, found = _pick_module(c, modules, lambda m: _outermost(_single_line_calls(m)))
    if m is None:
        return None
    call = found[c.integer(0, len(found) - 1)]
    named = [k for k in call.keywords if k.arg is not None]
    rest = [k for k in call.keywords if k.arg is None]
    form = c.pick(["dict literal", "dict call", "local dict", "forwarding function"])
    stmt = statement_of(m.tree, call) if form == "local dict" else None
    lambdas = {id(n.node) for n in m.nodes if n.in_lambda}
    if form == "local dict" and (not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr, ast.Return,
                                                        ast.AnnAssign)) or id(call) in lambdas
                                 or stmt.col_offset != len(m.edit.indent_of(stmt.lineno))):
        form = "dict literal"
    literal = "{" + ", ".join(f'"{k.arg}": {m.seg(k.value)}' for k in named) + "}"
    if form == "forwarding function":
        fwd = fresh(m.taken, "forward_call")
        m.edit.append(["", "", f"def {fwd}(fn, /, *args, **kwargs):", "    return fn(*args, **kwargs)"])
        m.edit.replace_node(call, f"{fwd}({_call_text(m, call, call.keywords, [m.seg(call.func)])})")
    else:
        if form == "local dict":
            name = fresh(m.taken, "call_kwargs")
            m.edit.add_lines(stmt.lineno, [f"{m.edit.indent_of(stmt.lineno)}{name} = {literal}"])
            splat = f"**{name}"
        elif form == "dict call":
            splat = "**dict(" + ", ".join(f"{k.arg}={m.seg(k.value)}" for k in named) + ")"
        else:
            splat = f"**{literal}"
        m.edit.replace_node(call, f"{m.seg(call.func)}({_call_text(m, call, rest, extra=splat)})")
    return _done(modules, {m.path}, f"{m.path}: keywords {', '.join(k.arg for k in named)} of the call at line "
                 f"{call.lineno} passed as {form}")


# --------------------------------------------------------------------------- lambdas
def _lambda_calls(m: Module) -> list[tuple[ast.Call, CodeNode]]:
    """Calls on one line whose callee a lambda can evaluate as the call does (no ``super()``: a lambda has no
    ``__class__`` cell; no ``yield`` / ``await`` / ``:=``, which a lambda cannot hold)."""
    out = []
    for n in m.in_functions():
        call = n.node
        if not isinstance(call, ast.Call) or call.lineno != call.end_lineno:
            continue
        if any(isinstance(x, (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr)) or (
                isinstance(x, ast.Name) and x.id == "super") for x in ast.walk(call.func)):
            continue
        out.append((call, n))
    spans = _outermost([c for c, _ in out])
    return [(c, n) for c, n in out if c in spans]


def _starred(call: ast.Call) -> bool:
    return any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)


def lambda_(files: dict[str, str], c, axes: tuple[str, ...] = ()) -> Transformed | None:  # noqa: ANN001
    modules = _load(files)
    m, found = _pick_module(c, modules, _lambda_calls)
    if m is None:
        return None
    defs = {s.name for s in m.tree.body if isinstance(s, ast.FunctionDef)}

    def module_function(call: ast.Call, n: CodeNode) -> bool:  # the callee a module-level def, never rebound
        return isinstance(call.func, ast.Name) and call.func.id in defs and call.func.id not in function_locals(
            n.func) and not _starred(call)

    form = c.pick(["at once", "pass-through", "default callee", "bound", "registry"])
    if form == "registry" and not any(module_function(*x) for x in found):
        form = "bound"
    if form == "registry":
        chosen = [x for x in found if module_function(*x)]
        names = sorted({call.func.id for call, _ in chosen})
        reg = fresh(m.taken, "CALLS")
        m.edit.add_lines(m.imports_at, ["", "", f"{reg} = {{", *[
            f'    "{name}": lambda *args, **kwargs: {name}(*args, **kwargs),' for name in names], "}", ""])
        for call, _ in chosen:
            m.edit.replace_node(call.func, f'{reg}["{call.func.id}"]')
        return _done(modules, {m.path}, f"{m.path}: {', '.join(names)} called through the lambdas of `{reg}`")
    call, n = found[c.integer(0, len(found) - 1)]
    callee, args = m.seg(call.func), _call_text(m, call, call.keywords)
    stmt = statement_of(m.tree, call) if form == "bound" else None
    simple = isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise, ast.Assert))
    own_line = simple and module_function(call, n) and not n.in_lambda
    if form == "bound" and not (own_line or (simple and not n.in_lambda and stmt.lineno == call.lineno)):
        form = "pass-through"
    if form == "bound":
        name = fresh(m.taken, "call_through")
        binding = f"{name} = lambda *args, **kwargs: {callee}(*args, **kwargs)"
        if own_line and stmt.col_offset == len(m.edit.indent_of(stmt.lineno)):
            m.edit.add_lines(stmt.lineno, [m.edit.indent_of(stmt.lineno) + binding])
        else:
            own_line = False
            m.edit.insert(stmt.lineno, stmt.col_offset, binding + "; ")
        m.edit.replace_node(call.func, name)
        form = "bound on its own line" if own_line else "bound on the call's line"
    elif form == "pass-through" or _starred(call):
        form = "pass-through"
        m.edit.replace_node(call, f"(lambda *args, **kwargs: {callee}(*args, **kwargs))({args})")
    else:
        used = {x.id for x in ast.walk(call.func) if isinstance(x, ast.Name)}
        params = []
        for _ in range(len(call.args) + len(call.keywords)):
            params.append(fresh(used, "p"))
        passed = [*params[:len(call.args)], *(f"{k.arg}={p}" for k, p in zip(call.keywords, params[len(call.args):]))]
        values = ", ".join([*(m.seg(a) for a in call.args), *(m.seg(k.value) for k in call.keywords)])
        if form == "default callee":
            fn = fresh(set(params), "fn")
            head = ", ".join([*params, f"{fn}={callee}"])
            m.edit.replace_node(call, f"(lambda {head}: {fn}({', '.join(passed)}))({values})")
        else:
            m.edit.replace_node(call, f"(lambda{' ' if params else ''}{', '.join(params)}: {callee}("
                                f"{', '.join(passed)}))({values})")
    return _done(modules, {m.path}, f"{m.path}: the call of `{callee}` at line {call.lineno} through a lambda ({form})")


TRANSFORMS: dict[str, Callable[..., Transformed | None]] = {
    "registry": registry, "dynattr": dynattr, "container": container, "config": config, "decorator": decorator,
    "generator": generator, "partial": partial, "kwargs": kwargs, "lambda": lambda_,
}

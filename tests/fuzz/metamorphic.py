"""Metamorphic testing: rewrites of a generated program that keep its meaning must keep spmdcheck's diagnostics.

A rewrite takes a generated program (tests/fuzz/programs.py) and moves a run of consecutive statements of
``step`` somewhere else, mechanically, without changing what any rank computes:

* ``helper``: into a function of the same file (before or after ``step``): the run's free variables become
  its parameters (passed by position or keyword), the names it assigns and ``step`` later uses are returned
  (a tuple when several, unpacked at the call);
* ``module``: into the ``forward`` of an ``nn.Module`` subclass of the same file; the weights the run reads
  (``step``'s weight, bias and scale parameters) become attributes set in ``__init__``, typed there as
  ``step``'s signature types them (``spmd.assert_type(self.w, ...)``, an annotated assignment, an annotated
  ``__init__`` parameter or a class-level annotation); the call site builds the module (at the run, or hoisted
  to the top of ``step``) and calls it;
* ``package``: into a function (or such a module) of ANOTHER file: the program becomes a package
  ``pkg/{__init__,main,helpers}.py`` and ``main`` imports the helper (``from .helpers import part``,
  ``... as``, ``from . import helpers``, or absolute ``from pkg.helpers import part``);
* ``tuple``: no move: at a point of ``step``, one to three live values are passed through a tuple (or list)
  -- unpacked, indexed, or returned by a helper ``pack`` -- and renamed after it.

Every rewrite carries a line map: (file, new line) -> the program's line. A moved statement's lines map to
their original lines; an annotation copied from ``step``'s signature maps to that parameter's line; the lines
that stand for the run (the call, the module's construction, the helper's ``def`` and ``return``) map to the
run's first statement; lines that exist only in the rewrite (imports, the tuple passing) map to nothing, so a
finding there is always a difference. The property (``compare``): the multiset of (code, mapped line) of the
rewrite's diagnostics equals the multiset of (code, line) of the program's. See docs/ground_truth.md,
"Metamorphic testing".

Statements are read with ``ast`` (the generated code is one statement per top-level entry, consistently
indented), names with ``ast`` too; the rewrite itself is line surgery on the generated text, which keeps
every moved line byte for byte (so a column in the rewrite is the original column plus the indentation).
"""
from __future__ import annotations

import ast
import hashlib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from hypothesis import strategies as st

from .programs import Program, programs

KINDS = ("helper", "module", "package", "tuple")
WEIGHT_ROLES = ("weight", "bias", "scale")
ROOT = "/spmdcheck-metamorphic"  # a folder that does not exist: only the checked paths make the package
ORIGINAL = "prog.py"


class Choices(Protocol):
    def pick(self, options): ...  # noqa: ANN001, ANN201, D102
    def integer(self, lo: int, hi: int) -> int: ...  # noqa: D102


class DrawChoices:
    """Choices drawn by hypothesis (they shrink toward the first option and the low end)."""

    def __init__(self, draw) -> None:  # noqa: ANN001
        self.draw = draw

    def pick(self, options):  # noqa: ANN001, ANN201
        return self.draw(st.sampled_from(list(options)))

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))


# --------------------------------------------------------------------------- reading the program
@dataclass
class Statement:
    first: int  # 1-based source lines, inclusive
    last: int
    loads: list[str]  # names read, in order of first appearance (an augmented assignment reads its target)
    stores: list[str]  # names bound


@dataclass
class Layout:
    """The generated program, as the rewrites see it."""

    program: Program
    lines: list[str]
    statements: list[Statement]  # step's top-level statements, the final return included
    params: list[str]  # step's parameter names
    param_line: dict[str, int]
    annotation: dict[str, str]  # parameter -> its annotation's text
    type_dict: dict[str, str]  # parameter -> the type dict of its Annotated[...] (the assert_type argument)
    step_line: int  # the line of ``def step(``
    module_names: set[str]  # names bound at module level
    imports: list[tuple[int, int]]  # line ranges of the module's import statements
    last_import: int  # the last line of the last import statement

    @property
    def weights(self) -> set[str]:
        return {p.name for p in self.program.params if p.role in WEIGHT_ROLES}

    def text(self, s: Statement) -> list[str]:
        return self.lines[s.first - 1:s.last]


def _names(node: ast.AST) -> tuple[list[str], list[str]]:
    """(names read, names bound) by a statement, each in order of first appearance in the text."""
    loads: set[str] = set()
    stores: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            loads.add(n.target.id)
        if isinstance(n, ast.Name):
            (loads if isinstance(n.ctx, ast.Load) else stores).add(n.id)
    return _ordered(node, loads), _ordered(node, stores)


def _ordered(node: ast.AST, wanted: set[str]) -> list[str]:
    found = sorted((n.lineno, n.col_offset, n.id) for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in wanted)
    return list(dict.fromkeys(name for _, _, name in found))


def layout(program: Program) -> Layout:
    src = program.source
    tree = ast.parse(src)
    step = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "step")
    statements = []
    for node in step.body:
        loads, stores = _names(node)
        statements.append(Statement(node.lineno, node.end_lineno, loads, stores))
    module_names: set[str] = set()
    imports = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append((node.lineno, node.end_lineno))
            for a in node.names:
                module_names.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            module_names.add(node.name)
        elif isinstance(node, ast.Assign):
            module_names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    params, param_line, annotation, type_dict = [], {}, {}, {}
    for a in step.args.args:
        params.append(a.arg)
        param_line[a.arg] = a.lineno
        annotation[a.arg] = ast.get_source_segment(src, a.annotation)
        sub = a.annotation.slice
        type_dict[a.arg] = ast.get_source_segment(src, sub.elts[1])
    return Layout(program, src.splitlines(), statements, params, param_line, annotation, type_dict, step.lineno,
                  module_names, imports, max(last for _, last in imports))


# --------------------------------------------------------------------------- the result of a rewrite
@dataclass
class Rewritten:
    kind: str
    files: dict[str, str]  # path (relative to the package root) -> text
    line_map: dict[tuple[str, int], int]  # (path, line) -> the program's line
    note: str  # what was moved where, in words
    copies: dict[int, tuple[str, int]] = field(default_factory=dict)  # program line -> (path, line) of its copy

    def where(self, line: int) -> tuple[str, int] | None:
        """Where a line of the program went: its copy (the moved statement itself, not the call that stands for
        it)."""
        return self.copies.get(line)

    def show(self) -> str:
        out = [f"rewrite `{self.kind}`: {self.note}"]
        for path, text in self.files.items():
            out.append(f"--- {path}")
            out += [f"{i:3} {ln}" for i, ln in enumerate(text.splitlines(), 1)]
        return "\n".join(out)


class Builder:
    """A file made of lines, each remembering the program line it stands for (None: a new line) and whether it
    is that line's copy."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int | None, bool]] = []

    def add(self, text: str, old: int | None, copied: bool = False) -> None:
        self.rows.append((text, old, copied))

    def copy(self, lay: Layout, first: int, last: int, edit=None) -> None:  # noqa: ANN001
        for n in range(first, last + 1):
            text = lay.lines[n - 1]
            self.add(edit(text) if edit else text, n, True)

    def text(self) -> str:
        return "\n".join(t for t, _, _ in self.rows) + "\n"

    def line_map(self, path: str) -> dict[tuple[str, int], int]:
        return {(path, i): old for i, (_, old, _) in enumerate(self.rows, 1) if old is not None}

    def copies(self, path: str) -> dict[int, tuple[str, int]]:
        return {old: (path, i) for i, (_, old, copied) in enumerate(self.rows, 1) if copied and old is not None}


def rename(text: str, old: str, new: str) -> str:
    """Rename the variable ``old`` in a line of generated code (not an attribute ``.old``, not inside a word)."""
    return re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", new, text)


def indent(text: str, n: int = 4) -> str:
    return " " * n + text if text.strip() else text


# --------------------------------------------------------------------------- choosing the run
@dataclass
class Run:
    start: int  # index into Layout.statements
    stop: int  # exclusive
    inputs: list[str]
    outputs: list[str]


def choose_run(lay: Layout, c: Choices) -> Run:
    n = len(lay.statements) - 1  # the final return stays in step
    start = c.integer(0, n - 1)
    length = c.integer(1, min(8, n - start))
    return make_run(lay, start, start + length)


def make_run(lay: Layout, start: int, stop: int) -> Run:
    before = set(lay.params)
    for s in lay.statements[:start]:
        before.update(s.stores)
    inside = lay.statements[start:stop]
    after: set[str] = set()
    for s in lay.statements[stop:]:
        after.update(s.loads, s.stores)
    seen: list[str] = []
    for s in inside:
        seen += s.loads + s.stores
    # a name bound before the run is passed in when the run reads it, and also when the run may rebind it (a
    # one-armed ``if``): its old value must survive the branch that does not
    inputs = [n for n in dict.fromkeys(seen) if n in before and n not in lay.module_names]
    stores = list(dict.fromkeys(n for s in inside for n in s.stores))
    outputs = [n for n in stores if n in after]
    return Run(start, stop, inputs, outputs)


def _call_args(run: Run, c: Choices, names: list[str] | None = None) -> str:
    """The arguments of a call: by position, by keyword, or unpacked from a tuple (``*(a, b)``) or a dict
    (``**{"a": a}``)."""
    names = run.inputs if names is None else names
    how = c.pick(["positional", "keyword", "unpacked tuple", "unpacked dict"])
    if not names:
        return ""
    if how == "keyword":
        return ", ".join(f"{n}={n}" for n in names)
    if how == "unpacked tuple":
        return f"*({', '.join(names)},)"
    if how == "unpacked dict":
        return "**{" + ", ".join(f'"{n}": {n}' for n in names) + "}"
    return ", ".join(names)


def _targets(outputs: list[str], c: Choices) -> str:
    if len(outputs) == 1:
        return outputs[0]
    return ", ".join(outputs) if c.pick(["bare", "parenthesised"]) == "bare" else "(" + ", ".join(outputs) + ")"


def _returns(outputs: list[str], c: Choices) -> str:
    return "return " + _targets(outputs, c) if outputs else ""


# --------------------------------------------------------------------------- the moved code
def helper_def(b: Builder, lay: Layout, run: Run, name: str, c: Choices) -> None:
    """``def name(inputs):`` + the run + ``return outputs``; the def and return lines map to the run's start."""
    first = lay.statements[run.start].first
    b.add(f"def {name}({', '.join(run.inputs)}):", first)
    for s in lay.statements[run.start:run.stop]:
        b.copy(lay, s.first, s.last)
    ret = _returns(run.outputs, c)
    if ret:
        b.add("    " + ret, first)


def _typed_init(b: Builder, lay: Layout, weights: list[str], typing: str, first: int) -> None:
    """``__init__`` setting the weights as attributes, typed as step's signature types them."""
    if typing == "annotated parameter":
        b.add("    def __init__(", first)
        b.add("        self,", first)
        for w in weights:
            b.add(f"        {w}: {lay.annotation[w]},", lay.param_line[w])
        b.add("    ) -> None:", first)
    else:
        b.add(f"    def __init__(self, {', '.join(weights)}) -> None:", first)
    b.add("        super().__init__()", first)
    for w in weights:
        if typing == "annotated assignment":
            b.add(f"        self.{w}: {lay.annotation[w]} = {w}", lay.param_line[w])
        else:
            b.add(f"        self.{w} = {w}", first)
        if typing == "assert_type":
            b.add(f"        spmd.assert_type(self.{w}, {lay.type_dict[w]})", lay.param_line[w])


def _class_head(b: Builder, lay: Layout, cls: str, base: str, weights: list[str], typing: str, first: int) -> None:
    b.add(f"class {cls}({base}):", first)
    if weights and typing == "class annotation":
        for w in weights:
            b.add(f"    {w}: {lay.annotation[w]}", lay.param_line[w])
        b.add("", None)


def module_def(b: Builder, lay: Layout, run: Run, name: str, c: Choices) -> tuple[list[str], str]:
    """An nn.Module running the run: in its ``forward``, in another method (``compute``), in the forward of an
    inner module it holds as ``self.inner``, or in the forward of a subclass of the module whose ``__init__`` sets
    the weights. Returns the weights its constructor takes and the method to call ("" for the call itself)."""
    first = lay.statements[run.start].first
    weights = [n for n in run.inputs if n in lay.weights]
    args = [n for n in run.inputs if n not in lay.weights]
    structure = c.pick(["forward", "method", "nested", "inherited"])
    typing = c.pick(["assert_type", "annotated assignment", "annotated parameter", "class annotation"])
    runner = f"{name}Inner" if structure == "nested" else name
    if structure == "inherited":
        _class_head(b, lay, f"{name}Base", "nn.Module", weights, typing, first)
        if weights:
            _typed_init(b, lay, weights, typing, first)
        else:
            b.add("    pass", first)
        b.add("", None)
        b.add("", None)
        b.add(f"class {name}({name}Base):", first)
    else:
        _class_head(b, lay, runner, "nn.Module", weights, typing, first)
        if weights:
            _typed_init(b, lay, weights, typing, first)
            b.add("", None)
    method = "compute" if structure == "method" else "forward"
    b.add(f"    def {method}(self{''.join(', ' + a for a in args)}):", first)

    def to_method(text: str) -> str:
        for w in weights:
            text = rename(text, w, f"self.{w}")
        return indent(text)

    for s in lay.statements[run.start:run.stop]:
        b.copy(lay, s.first, s.last, to_method)
    ret = _returns(run.outputs, c)
    if ret:
        b.add("        " + ret, first)
    if structure == "nested":
        b.add("", None)
        b.add("", None)
        b.add(f"class {name}(nn.Module):", first)
        b.add(f"    def __init__(self{''.join(', ' + w for w in weights)}) -> None:", first)
        b.add("        super().__init__()", first)
        b.add(f"        self.inner = {runner}({', '.join(weights)})", first)
        b.add("", None)
        b.add(f"    def forward(self{''.join(', ' + a for a in args)}):", first)
        b.add(f"        {'return ' if run.outputs else ''}self.inner({', '.join(args)})", first)
    return weights, ("compute" if structure == "method" else "")


def module_call(lay: Layout, run: Run, cls: str, made: tuple[list[str], str],
                c: Choices) -> tuple[list[str], list[str]]:
    """(lines to put at the top of step, lines at the run), all standing for the run's first statement."""
    weights, method = made
    args = [n for n in run.inputs if n not in lay.weights]
    make = f"{cls}({_call_args(run, c, weights)})"
    lhs = f"{_targets(run.outputs, c)} = " if run.outputs else ""
    call = f".{method}" if method else ""
    where = c.pick(["at the run", "one expression", "hoisted"])
    if where == "one expression":
        return [], [f"    {lhs}{make}{call}({', '.join(args)})"]
    build = [f"    block = {make}"]
    use = [f"    {lhs}block{call}({', '.join(args)})"]
    return (build, use) if where == "hoisted" else ([], build + use)


def step_with_call(b: Builder, lay: Layout, run: Run, call: list[str], top: list[str] | None = None) -> None:
    """``def step`` with the run replaced by ``call`` (and ``top`` before its first statement)."""
    first = lay.statements[run.start].first
    b.copy(lay, lay.step_line, lay.statements[0].first - 1)
    for line in top or []:
        b.add(line, first)
    for i, s in enumerate(lay.statements):
        if i == run.start:
            for line in call:
                b.add(line, first)
        if run.start <= i < run.stop:
            continue
        b.copy(lay, s.first, s.last)


def function_call(run: Run, callee: str, c: Choices) -> list[str]:
    lhs = f"{_targets(run.outputs, c)} = " if run.outputs else ""
    return [f"    {lhs}{callee}({_call_args(run, c)})"]


def _describe(lay: Layout, run: Run) -> str:
    a, z = lay.statements[run.start].first, lay.statements[run.stop - 1].last
    return (f"lines {a}-{z} ({run.stop - run.start} statements; in: {', '.join(run.inputs) or '-'}; "
            f"out: {', '.join(run.outputs) or '-'})")


# --------------------------------------------------------------------------- the rewrites
def rewrite_helper(lay: Layout, c: Choices) -> Rewritten:
    run = choose_run(lay, c)
    where = c.pick(["before step", "after step"])
    b = Builder()
    helper = Builder()
    helper_def(helper, lay, run, "part", c)
    b.copy(lay, 1, lay.step_line - 1)
    if where == "before step":
        b.rows += helper.rows
        b.add("", None)
        b.add("", None)
    step_with_call(b, lay, run, function_call(run, "part", c))
    if where == "after step":
        b.add("", None)
        b.add("", None)
        b.rows += helper.rows
    return Rewritten("helper", {ORIGINAL: b.text()}, b.line_map(ORIGINAL),
                     f"{_describe(lay, run)} moved into `part` {where}", b.copies(ORIGINAL))


def _with_import(b: Builder, lay: Layout, line: str) -> None:
    """Copy the program's header with one more import after its imports."""
    b.copy(lay, 1, lay.last_import)
    b.add(line, None)
    b.copy(lay, lay.last_import + 1, lay.step_line - 1)


def rewrite_module(lay: Layout, c: Choices) -> Rewritten:
    run = choose_run(lay, c)
    where = c.pick(["before step", "after step"])
    nn_import = c.pick(["from torch import nn", "import torch.nn as nn"])
    cls = Builder()
    made = module_def(cls, lay, run, "Block", c)
    top, call = module_call(lay, run, "Block", made, c)
    weights = made[0]
    b = Builder()
    _with_import(b, lay, nn_import)
    if where == "before step":
        b.rows += cls.rows
        b.add("", None)
        b.add("", None)
    step_with_call(b, lay, run, call, top)
    if where == "after step":
        b.add("", None)
        b.add("", None)
        b.rows += cls.rows
    return Rewritten("module", {ORIGINAL: b.text()}, b.line_map(ORIGINAL),
                     f"{_describe(lay, run)} moved into `Block.{made[1] or 'forward'}` {where}, weights "
                     f"{', '.join(weights) or '(none)'} set in __init__", b.copies(ORIGINAL))


PACKAGE_IMPORTS = {  # how main.py imports the helper, and how it then calls it
    "relative": ("from .helpers import {name}", "{name}"),
    "relative as": ("from .helpers import {name} as moved_{name}", "moved_{name}"),
    "relative module": ("from . import helpers", "helpers.{name}"),
    "absolute": ("from pkg.helpers import {name}", "{name}"),
}


def rewrite_package(lay: Layout, c: Choices) -> Rewritten:
    run = choose_run(lay, c)
    as_module = c.pick(["function", "module"]) == "module"
    how = c.pick(list(PACKAGE_IMPORTS))
    name = "Block" if as_module else "part"
    imp, callee = (s.format(name=name) for s in PACKAGE_IMPORTS[how])
    helpers = Builder()
    helpers.copy(lay, 1, 1)  # the mesh header
    for first, last in lay.imports:
        helpers.copy(lay, first, last)
    top: list[str] = []
    if as_module:
        helpers.add(c.pick(["from torch import nn", "import torch.nn as nn"]), None)
    helpers.add("", None)
    helpers.add("", None)
    if as_module:
        made = module_def(helpers, lay, run, name, c)
        top, call = module_call(lay, run, callee, made, c)
    else:
        helper_def(helpers, lay, run, name, c)
        call = function_call(run, callee, c)
    main = Builder()
    _with_import(main, lay, imp)
    step_with_call(main, lay, run, call, top)
    init = c.pick(["", '"""A generated package."""\n'])
    files = {"pkg/__init__.py": init, "pkg/main.py": main.text(), "pkg/helpers.py": helpers.text()}
    line_map = {**main.line_map("pkg/main.py"), **helpers.line_map("pkg/helpers.py")}
    # the header's mesh line and imports are copied into both files: the program's lines stay in main.py
    copies = {**helpers.copies("pkg/helpers.py"), **main.copies("pkg/main.py")}
    return Rewritten("package", files, line_map,
                     f"{_describe(lay, run)} moved into {'class' if as_module else 'function'} `{name}` of "
                     f"pkg/helpers.py, imported as `{imp}`", copies)


def rewrite_tuple(lay: Layout, c: Choices) -> Rewritten:
    """Pass live values through a tuple (or list) at a point of step, and use the unpacked names after it."""
    n = len(lay.statements)
    k = c.integer(0, n - 1)  # before statement k (the return at the latest)
    defined = set(lay.params)
    for s in lay.statements[:k]:
        defined.update(s.stores)
    later: list[str] = []
    for s in lay.statements[k:]:
        later += s.loads + s.stores
    live = [v for v in dict.fromkeys(later) if v in defined and v not in lay.module_names]
    count = c.integer(1, min(3, len(live)))
    chosen: list[str] = []
    for _ in range(count):
        chosen.append(c.pick([v for v in live if v not in chosen]))
    new = {v: f"{v}_t" for v in chosen}
    form = c.pick(["unpack", "index", "list", "helper"])
    packed = ", ".join(chosen) + ("," if len(chosen) == 1 else "")
    unpacked = ", ".join(new[v] for v in chosen) + ("," if len(chosen) == 1 else "")
    b = Builder()
    b.copy(lay, 1, lay.step_line - 1)
    if form == "helper":
        how = c.pick(["parameters", "star", "star tuple"])
        if how == "parameters":
            b.add(f"def pack({', '.join(chosen)}):", None)
            b.add(f"    return {packed}", None)
        else:
            b.add("def pack(*values):", None)
            b.add("    return values" if how == "star" else "    return tuple(values)", None)
        b.add("", None)
        b.add("", None)
    b.copy(lay, lay.step_line, lay.statements[0].first - 1)
    for i, s in enumerate(lay.statements):
        if i == k:
            if form == "helper":
                b.add(f"    {unpacked} = pack({', '.join(chosen)})", None)
            else:
                b.add(f"    packed = [{', '.join(chosen)}]" if form == "list" else f"    packed = ({packed})", None)
                if form == "index":
                    for j, v in enumerate(chosen):
                        b.add(f"    {new[v]} = packed[{j}]", None)
                else:
                    b.add(f"    {unpacked} = packed", None)
        if i < k:
            b.copy(lay, s.first, s.last)
        else:
            def edit(text: str) -> str:
                for v in chosen:
                    text = rename(text, v, new[v])
                return text
            b.copy(lay, s.first, s.last, edit)
    return Rewritten("tuple", {ORIGINAL: b.text()}, b.line_map(ORIGINAL),
                     f"{', '.join(chosen)} passed through a {form} before line {lay.statements[k].first}",
                     b.copies(ORIGINAL))


REWRITES = {"helper": rewrite_helper, "module": rewrite_module, "package": rewrite_package, "tuple": rewrite_tuple}


def rewrite(program: Program, kind: str, c: Choices) -> Rewritten:
    return REWRITES[kind](layout(program), c)


# --------------------------------------------------------------------------- the property
Finding = tuple[str, "int | str"]  # (code, the program's line; or "path:line (new)" for an unmapped line)


def root_of(program: Program) -> str:
    return f"{ROOT}/{hashlib.sha1(program.source.encode()).hexdigest()[:12]}"


def diagnose(files: dict[str, str], root: str, mesh: tuple[str, ...], registry=None) -> dict[str, list]:  # noqa: ANN001
    """spmdcheck's diagnostics of files checked as one program (``api.check_sources``), by relative path."""
    from spmdcheck.api import Settings, check_sources

    got = check_sources({f"{root}/{p}": t for p, t in files.items()}, Settings(mesh=mesh), registry)
    return {p[len(root) + 1:]: ds for p, ds in got.items()}


def original_findings(program: Program, registry=None) -> Counter:  # noqa: ANN001
    diags = diagnose({ORIGINAL: program.source}, root_of(program), program.mesh, registry)[ORIGINAL]
    return Counter((d.code, d.line) for d in diags)


def mapped_findings(rw: Rewritten, program: Program, registry=None) -> tuple[Counter, dict[str, list]]:  # noqa: ANN001
    by_path = diagnose(rw.files, root_of(program) + "-" + rw.kind, program.mesh, registry)
    found: Counter = Counter()
    for path, diags in by_path.items():
        for d in diags:
            found[(d.code, rw.line_map.get((path, d.line), f"{path}:{d.line} (new)"))] += 1
    return found, by_path


@dataclass
class Comparison:
    program: Program
    rewritten: Rewritten
    before: Counter
    after: Counter
    after_diagnostics: dict[str, list] = field(default_factory=dict)

    @property
    def same(self) -> bool:
        return self.before == self.after

    @property
    def missing(self) -> Counter:
        return self.before - self.after

    @property
    def extra(self) -> Counter:
        return self.after - self.before

    def report(self) -> str:
        def fmt(c: Counter) -> str:
            return ", ".join(f"{code}@{line}" + (f" x{k}" if k > 1 else "")
                             for (code, line), k in sorted(c.items(), key=str)) or "none"

        lines = [
            f"program ({', '.join(self.program.mutations) or 'correct by construction'}): {fmt(self.before)}",
            f"rewrite ({self.rewritten.kind}), lines mapped back: {fmt(self.after)}",
            f"  missing after the rewrite: {fmt(self.missing)}",
            f"  new after the rewrite: {fmt(self.extra)}",
        ]
        for path, diags in self.after_diagnostics.items():
            for d in diags:
                lines.append(f"    {path}:{d.line}: {d.code} {d.message}")
        numbered = "\n".join(f"{i:3} {ln}" for i, ln in enumerate(self.program.source.splitlines(), 1))
        return "\n".join(lines) + f"\n--- the program\n{numbered}\n{self.rewritten.show()}"


def compare(program: Program, rw: Rewritten, registry=None, before: Counter | None = None) -> Comparison:  # noqa: ANN001
    before = original_findings(program, registry) if before is None else before
    after, by_path = mapped_findings(rw, program, registry)
    return Comparison(program, rw, before, after, by_path)


@dataclass
class Case:
    program: Program
    rewritten: Rewritten

    def __repr__(self) -> str:  # hypothesis prints this for a falsifying example: the assertion says the rest
        return f"Case({self.rewritten.kind}: {self.rewritten.note}; {self.program!r})"


@st.composite
def cases(draw, kind: str, branches: bool = True) -> Case:  # noqa: ANN001
    """A generated program (with branch and in-place steps) and one rewrite of ``kind`` of it."""
    program = draw(programs(branches=branches))
    return Case(program, rewrite(program, kind, DrawChoices(draw)))


class RandomChoices:
    """Choices from a seeded ``random.Random`` (the survey: every program gets every rewrite, reproducibly)."""

    def __init__(self, key: str) -> None:
        import random

        self.rng = random.Random(key)

    def pick(self, options):  # noqa: ANN001, ANN201
        return self.rng.choice(list(options))

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


# --------------------------------------------------------------------------- the search
@dataclass
class Survey:
    """Every rewrite kind applied to each of the same generated programs."""

    programs: list[Program] = field(default_factory=list)
    results: dict[str, list[Comparison]] = field(default_factory=lambda: {k: [] for k in KINDS})
    seconds: float = 0.0

    def __repr__(self) -> str:  # pytest shows the fixture's value beside a failure: the numbers, not the programs
        return f"Survey({len(self.programs)} programs, {sum(len(v) for v in self.results.values())} rewrites)"

    def failures(self, kind: str) -> list[Comparison]:
        return [c for c in self.results[kind] if not c.same]

    def summary(self) -> str:
        lines = [f"programs: {len(self.programs)} ({sum(p.mutated for p in self.programs)} mutated; "
                 f"{sum(any(':branch' in t or ':inplace' in t for _, t in p.body) for p in self.programs)} with "
                 f"branch or in-place steps), {self.seconds:.1f}s"]
        for kind in KINDS:
            fails = self.failures(kind)
            flagged = sum(bool(c.before) for c in self.results[kind])
            lines.append(f"  {kind}: {len(self.results[kind])} rewritten ({flagged} of them with findings), "
                         f"{len(fails)} change the diagnostics")
            for c in sorted(fails, key=lambda c: len(c.program.source))[:1]:
                lines.append(f"    e.g. {c.rewritten.note}: missing {dict(c.missing)}, new {dict(c.extra)}")
        return "\n".join(lines)


def each_distinct_program(examples: int, seed_value: int, branches: bool, visit: Callable[[Program], None]) -> None:
    """Call `visit` on ``examples`` distinct generated programs (hypothesis, seeded from `seed_value` on: a
    seed that draws repeats gives way to the next, five at most)."""
    from hypothesis import HealthCheck, given, seed, settings

    seen: set[str] = set()
    for k in range(5):
        if len(seen) >= examples:
            break

        @seed(seed_value + k)
        @settings(max_examples=int((examples - len(seen)) * 1.3) + 1, database=None, deadline=None,
                  derandomize=False, print_blob=False, suppress_health_check=list(HealthCheck))
        @given(programs(branches=branches))
        def run(program: Program) -> None:
            if program.source in seen or len(seen) >= examples:
                return
            seen.add(program.source)
            visit(program)

        run()


def survey(examples: int, seed_value: int, registry=None, kinds: tuple[str, ...] = KINDS,  # noqa: ANN001
           branches: bool = True, progress=None) -> Survey:  # noqa: ANN001
    """``examples`` distinct generated programs (hypothesis, seeded), each checked once and after one rewrite of
    every kind (choices seeded by the program's text and the kind)."""
    import time

    out = Survey()
    t0 = time.perf_counter()

    def check(program: Program) -> None:
        out.programs.append(program)
        before = original_findings(program, registry)
        for kind in kinds:
            rw = rewrite(program, kind, RandomChoices(f"{kind}:{program.source}"))
            out.results[kind].append(compare(program, rw, registry, before))
        if progress is not None:
            progress(out)

    each_distinct_program(examples, seed_value, branches, check)
    out.seconds = time.perf_counter() - t0
    return out


class MetamorphicFailure(AssertionError):
    def __init__(self, comparison: Comparison) -> None:
        self.comparison = comparison
        super().__init__(f"the `{comparison.rewritten.kind}` rewrite changes spmdcheck's diagnostics\n"
                         f"{comparison.report()}")


def shrink(kind: str, seed_value: int, registry=None, budget_seconds: float = 10.0,  # noqa: ANN001
           examples: int = 300, branches: bool = True) -> Comparison | None:
    """The first program whose ``kind`` rewrite changes the diagnostics, shrunk by hypothesis (program and rewrite
    choices together) for at most ``budget_seconds``; None if the search finds none. Past the budget, only cases
    already judged are judged again (the same way), so hypothesis ends its shrinking with a stable example."""
    import time

    from hypothesis import HealthCheck, given, seed, settings

    judged: dict[tuple, Comparison] = {}
    best: list[Comparison] = []
    t0 = time.perf_counter()

    @seed(seed_value)
    @settings(max_examples=examples, database=None, deadline=None, derandomize=False, print_blob=False,
              report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
    @given(cases(kind, branches))
    def run(case: Case) -> None:
        key = (case.program.source, tuple(sorted(case.rewritten.files.items())))
        cmp = judged.get(key)
        if cmp is None:
            if best and time.perf_counter() - t0 > budget_seconds:
                return
            cmp = judged[key] = compare(case.program, case.rewritten, registry)
        if not cmp.same:
            if not best or _size(cmp) < _size(best[-1]):
                best.append(cmp)
            raise MetamorphicFailure(cmp)

    try:
        run()
    except MetamorphicFailure as exc:
        return exc.comparison
    except Exception:  # noqa: BLE001 - e.g. hypothesis' Flaky: report the smallest failure seen
        pass
    return best[-1] if best else None


def _size(c: Comparison) -> tuple[int, int]:
    return (c.program.statements, sum(len(t) for t in c.rewritten.files.values()))

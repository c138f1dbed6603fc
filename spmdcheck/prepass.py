"""The pre-pass: which files, and which function bodies, can produce a finding.

libcst (positions, fixes) costs about ten times CPython's `ast`, and most code in a
real tree never meets a type: unannotated code is silent (gradual typing). So every
file is first read with `ast` (which is also its syntax check), cut into *units* (a
module-level statement, function, class header or method), and each unit's identifiers
are collected from its text without comments and prose strings. A file with a unit that
may make a type is checked; the checked files it imports come along as libraries; the
bodies of the functions and methods that cannot matter are blanked line for line
(positions do not move) before libcst parses anything.

Why nothing dropped can hold a finding: a type (or a rank value, a mesh, a collective
whose ranks may diverge) can only enter a program through
- a rule that creates one from untyped operands (a collective, a Megatron mapping or
  model, a rank query, the spmd_types API, a mesh; with a mesh configured, any rule at
  all), which the code names by the last part of its name (`dist.all_reduce`,
  `from torch.distributed import all_reduce as ar`); `seed_words` reads them from the
  rules, and a rule of a kind it does not know is a seed;
- an annotation or a file setting, whose spellings all contain `spmd` or `Annotated`
  (`spmd_types`, `spmdcheck.annotations.Local`, `# spmdcheck:`, `typing.Annotated`);
and a suppression comment names its code (`# noqa: SPMD101`). A file whose code names
`Annotated`, that imports `spmd_types` or `spmdcheck`, or whose comments hold a setting or a
code is analysed whole (`_whole`; prose about SPMD and names like `spmd_mesh` do not count).
Elsewhere a unit naming a seed is a *source*, and `spread` propagates to a fixed point:
- a unit naming what a source binds, in its own file or a checked module it imports
  (it may call it or read its value), is a source; a class with a source method is a
  source, and so is a method reading `self.<attr>` of a source method of its class or
  of a base class;
- a unit a source or exposed unit names is *exposed* (it may be called with typed
  arguments): a module-level function or class named from a file that imports it, a
  method whose name any unit that matters mentions (objects travel anywhere), and the
  dunder methods and `forward` of a class that matters (construction and calls run them).
Names are compared as words, so the relation only over-approximates what the analysis
can follow. SPMDCHECK_NO_PREPASS=1 turns all of this off (every file checked whole), and
tests compare the two.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import io
import itertools
import json
import os
import re
import tokenize
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spmdcheck.frontend import guard
from spmdcheck.rules.model import OpRule

if TYPE_CHECKING:
    from spmdcheck.rules.stubs import Registry

# A file naming one of these may be analysed whole: annotations, the spmd_types API, file settings, and
# suppression comments naming a code (an unused one is reported). Which it is, `_whole` decides.
WHOLE_FILE_MARKERS = (b"spmd", b"Annotated", b"SPMD")
_SETTING_OR_CODE = re.compile(rb"spmdcheck|SPMD\d")  # a file setting (spmdcheck: mesh = [...]) or a code (SPMD101)
_ANNOTATED = re.compile(r"\bAnnotated\b")
_MARKER_WORD = re.compile(r"spmd|Annotated", re.IGNORECASE)


def _names_marker(words: frozenset[str]) -> bool:
    return any("spmd" in word.lower() or word == "Annotated" for word in words)

# OpRule fields an op may set and still be unable to type an untyped operand. A rule setting any
# other field (a collective, a mapping, a mesh, the spmd_types API, whatever a later rule kind adds)
# is a seed; so is an spmd_types API call outside `_INERT_SPMD_API`, and a `mesh` context.
_INERT_FIELDS = frozenset(
    {
        "qualname",
        "params",
        "returns",
        "linearity",
        "divisors",
        "contraction",
        "bias",
        "affine_bias",
        "factory",
        "factory_size",
        "factory_rank",
        "passthrough",
        "opaque",
        "grad",
        "dims",
        "inplace_param",
        "is_property",
        "process_group_axis",
        "mesh_group_param",
        "const_type",
        "alias_of",
        "source",
        "spmd_api",
        "context",
        "assumed",  # a constant the checker assumes (get_spmd_backend()): it makes no type
        "instance_test",  # isinstance(t, DTensor) of a typed tensor: it makes no type
        # values, not types: a container of the modules it is given, a string constant (an axis name),
        # the stub module of a model (its code is judged in `seed_words`), a tensor's number of dims
        # (x.dim()). A class typed by a contract another file sets on it is found by `spread`.
        "container_param",
        "rank_of",
        "sequential_param",
        "const_str",
        "model_module",
        "model_path",
        # sizes are numbers (`x.shape`, `x.size(d)`), and a parameter of untyped data has no type either
        "shape_of",
        "untyped_is_unknown",
    }
)
# spmd_types API handlers that only read a type that is already there (backward checks the loss).
_INERT_SPMD_API = frozenset({"backward", "ignore", "local_map"})
_INERT_CONTEXTS = frozenset({"no_grad", "enable_grad", "no_typecheck"})

_DISABLE_ENV = "SPMDCHECK_NO_PREPASS"  # hidden switch: analyse every file whole (tests compare both ways)

_WORD = re.compile(r"\w+")
# Strings and comments, as CPython's tokenizer reads them (the file already parsed). Comments,
# docstrings and messages hold prose, not names, and are dropped (newlines kept); f-strings hold
# expressions, and a string that reads like a type expression may be a forward reference: both stay.
_STRING_OR_COMMENT = re.compile(
    r"""(?=[rRbBuUfF'"#])"""  # where no match can start, fail at once (a third of the scan's time)
    r"""(?P<prefix>[rRbBuUfF]{0,3})(?P<string>'''(?:[^\\]|\\.)*?'''|\"\"\"(?:[^\\]|\\.)*?\"\"\""""
    r"""|'(?:[^'\\\r\n]|\\(?:\r\n|.))*'|"(?:[^"\\\r\n]|\\(?:\r\n|.))*")|\#[^\r\n]*""",
    re.S,
)
_SELF_ATTRIBUTE = re.compile(r"\bself\s*\.\s*(\w+)")
_TYPE_LIKE = re.compile(r"\s*[\w.]*(?:\s*[\[\],|]\s*[\w.]*)*\s*")  # names joined by brackets, commas, pipes
_NEWLINE = re.compile(r"\r\n|\r|\n")


def enabled() -> bool:
    return os.environ.get(_DISABLE_ENV, "") in ("", "0")


def _creates_types(rule: OpRule) -> bool:
    for f in dataclasses.fields(rule):
        if f.name in _INERT_FIELDS:
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        if getattr(rule, f.name) != default:
            return True
    if rule.spmd_api is not None and rule.spmd_api not in _INERT_SPMD_API:
        return True
    return rule.context is not None and rule.context not in _INERT_CONTEXTS


def seed_words(registry: Registry, mesh_configured: bool) -> frozenset[str]:
    """Identifiers through which a program can meet a type, from the rules themselves.

    A rule is reached by a name whose last part is its key's last part (`dist.all_reduce`,
    `from torch.distributed import all_reduce`); re-exports between checked files are followed
    by the taint. With a mesh configured every factory types its result, so the first part of
    every rule's key (`torch`, which every such name is imported through) is a seed as well.
    """
    words: set[str] = set()
    models: dict[str, str] = {}  # a @model rule's name -> its stub file, judged by what its code names
    for key in registry.rules:
        rule = registry.lookup(key)
        root = key.split(".", 1)[0]
        if rule is None or any(marker.decode() in root for marker in WHOLE_FILE_MARKERS):
            continue  # reached only through a name holding `spmd`: such files are analysed whole
        if mesh_configured:
            words.add(root)
        if _creates_types(rule):
            words.add(key.rpartition(".")[2])
        elif rule.model_path is not None:
            models[key.rpartition(".")[2]] = rule.model_path
    # A model's code runs as the checked code would: it can make a type only by naming a seed (or the
    # spmd_types API); one that only stores its arguments makes values, like a literal does.
    model_words = {name: _model_words(path) for name, path in models.items()}
    changed = True
    while changed:
        changed = False
        for name, named in model_words.items():
            if name not in words and (named is None or not named.isdisjoint(words)):
                words.add(name)
                changed = True
    return frozenset(words)


def _model_words(path: str) -> frozenset[str] | None:
    """The identifiers a model stub's code names outside its import statements; None when it cannot be
    read (then it is a seed) or when it names a marker (`spmd`, `Annotated`)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        text = data.decode("utf-8")
        tree = guard.quiet_ast_parse(data)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None
    lines = _NEWLINE.split(code_only(text))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for n in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                lines[n - 1] = ""
    rest = "\n".join(lines)
    if any(marker.decode() in rest for marker in WHOLE_FILE_MARKERS):
        return None
    return _words(rest)


@dataclass
class Unit:
    """A module-level statement, function or class: what it binds and which identifiers it names."""

    binds: frozenset[str]
    words: frozenset[str]
    bodies: tuple[tuple[int, int], ...] = ()  # 1-based line spans of function bodies to blank when inert
    source: bool = False  # may make a type or issue a collective
    exposed: bool = False  # may receive a typed value
    method: str | None = None  # a method's name: called through any object, so named from any file
    attrs: frozenset[str] = frozenset()  # a method's `self.<attr>` names
    writes: frozenset[str] = frozenset()  # names whose attribute or item a module-level statement assigns
    members: list[Unit] = field(default_factory=list)  # a class's methods (the class unit is its header)

    @property
    def matters(self) -> bool:
        return self.source or self.exposed


@dataclass
class FileScan:
    """What the pre-pass knows about one file. `whole`: analyse it all; else decided by its units."""

    path: str
    whole: bool = False
    units: list[Unit] = field(default_factory=list)
    module: str = ""  # dotted module name (from the package folders)
    imports: frozenset[str] = frozenset()  # module names its imports may refer to
    star: frozenset[str] = frozenset()  # modules it imports `*` from
    # (line, column) where a comment no analysis can read starts (see `comment_cuts`); None: unknown
    cuts: tuple[tuple[int, int], ...] | None = None
    shallow: bool = False  # CPython parsed it and no expression can be too deep for libcst (guard.shallow)
    has_units: bool = True  # False when read from the cache without its units
    # its module-level statements: (first line, last line, names bound, pure) (see `statements`); None: unknown
    statements: tuple[tuple[int, int, tuple[str, ...], bool], ...] | None = None

    def spans(self) -> tuple[tuple[int, int], ...] | None:
        """Every function body's line span, in source order (None: the units were not read)."""
        return tuple(sorted(span for u in self.units for span in u.bodies)) if self.has_units else None

    @property
    def relevant(self) -> bool:
        """Holds a unit that may make a type by itself: checked on its own."""
        return any(u.source for u in self.units)


def _drop_prose(match: re.Match[str]) -> str:
    string = match.group("string")
    if string is None:  # a comment
        return ""
    if "f" in match.group("prefix").lower():
        return match.group(0)  # an f-string: its expressions are code
    if string[:3] in ("'''", '"""'):
        return "\n" * string.count("\n") + "\r" * (string.count("\r") - string.count("\r\n"))
    if _TYPE_LIKE.fullmatch(string, 1, len(string) - 1):
        return match.group(0)  # a forward reference `"Config"`, `"Optional[Block]"`: names
    return ""


def code_only(text: str) -> str:
    """`text` without comments and docstrings, every line where it was."""
    return _STRING_OR_COMMENT.sub(_drop_prose, text)


def _words(text: str) -> frozenset[str]:
    found = set(_WORD.findall(text))
    if not text.isascii():  # CPython reads identifiers NFKC-normalised; name both spellings
        found.update(unicodedata.normalize("NFKC", w) for w in list(found) if not w.isascii())
    return frozenset(found)


def scan(path: str, data: bytes, seeds: frozenset[str], exists=os.path.exists, for_cache: bool = True) -> FileScan:  # noqa: ANN001
    """Cut a file into units, taint those naming a seed, and list what it imports. `for_cache`: also what only
    the result cache reads (the comment cuts its keys leave out, the module-level statements its record names).

    A file holding a marker is analysed whole (all its units are sources). A file `ast` cannot
    read is handed to libcst whole (it reports the syntax error, or checks what CPython's parser
    limits refuse); every identifier in it then counts as bound by it.
    """
    from spmdcheck.frontend.guard import quiet_ast_parse
    from spmdcheck.program.graph import module_name_for

    module = module_name_for(path, exists)
    whole = any(marker in data for marker in WHOLE_FILE_MARKERS)
    try:
        text = data.decode("utf-8")
        tree = quiet_ast_parse(data)
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        words = _words(data.decode("utf-8", errors="replace"))
        return FileScan(path, whole=True, units=[Unit(words, words, source=True)], module=module.name)
    code = code_only(text)
    marked = whole and _MARKER_WORD.search(code) is not None  # a marker in code, not only in prose
    whole = whole and _whole(data, tree, code, marked)
    lines = _NEWLINE.split(code)
    units: list[Unit] = []
    _collect(tree.body, lines, units)
    for unit in units:
        # in a file not analysed whole, a unit naming a marker is a source: `spmd.reinterpret(...)` through a
        # module that re-exports spmd_types under another name
        unit.source = whole or not seeds.isdisjoint(unit.words) or (marked and _names_marker(unit.words))
    imports, star = _imports(tree.body, module)
    cuts = comment_cuts(tree, text) if for_cache else None
    shallow = guard.shallow(tree, data)
    table = statements(tree.body, module) if for_cache else None
    return FileScan(path, whole, units, module.name, imports, star, cuts=cuts, shallow=shallow, statements=table)


def _whole(data: bytes, tree: ast.Module, code: str, in_code: bool) -> bool:
    """Whether a file holding a marker is analysed whole (every unit a source): a comment holds a file setting
    or names a code, its code (not its prose) names `Annotated`, or it imports the spmd_types API or
    spmdcheck's annotations (a module or name `spmd_types...` or `spmdcheck`), whose names the seeds leave
    out. Prose about SPMD and names that only hold the word (`spmd_mesh`, `torch_xla.distributed.spmd`) are
    not markers: the taint decides such a file. `in_code`: a marker is in its code, not only in comments and
    docstrings."""
    if _SETTING_OR_CODE.search(data):
        return True
    if not in_code:
        return False
    if _ANNOTATED.search(code):
        return True
    for node in _import_statements(tree.body):
        paths = [alias.name for alias in node.names]
        if isinstance(node, ast.ImportFrom) and node.module:
            paths.append(node.module)
        for path in paths:
            if any(part.startswith("spmd_types") or part == "spmdcheck" for part in path.split(".")):
                return True
    return False


def _import_statements(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, walking statements only: expressions cannot hold one."""
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                todo.extend(block)
        for handler in getattr(node, "handlers", ()):
            todo.extend(handler.body)
        for case in getattr(node, "cases", ()):
            todo.extend(case.body)
_SUPPRESSION_OR_SETTING = re.compile(r"noqa|spmd", re.IGNORECASE)  # comments the checker reads
_OPENING, _CLOSING = frozenset("([{"), frozenset(")]}")


def comment_cuts(tree: ast.Module, text: str) -> tuple[tuple[int, int], ...]:
    """Where each comment that cannot reach the analysis starts: (1-based line, 0-based column).

    Such a comment is outside every bracket (so no expression's source text, which messages and
    fixes quote, holds it) and is not a suppression or a file setting (`noqa`, `spmdcheck:`).
    Comments are only looked for on lines that belong to a construct of one line; a line of a
    statement or header spanning several lines is kept whole (it may be inside brackets), and so
    is a line the tokenizer cannot read on its own. The result cache keys a file on its text
    without these comments (`analysed_digest`), so editing one re-uses the program's results.
    """
    lines = _NEWLINE.split(text)
    commented = [number for number, line in enumerate(lines, 1) if "#" in line]
    if not commented:
        return ()
    # how many constructs of several lines cover each line, as a difference array (summed once below)
    change = [0] * (len(lines) + 2)

    def span(first: int, last: int) -> None:
        if last > first:
            change[first] += 1
            change[last + 1] -= 1

    todo: list = list(tree.body)
    while todo:  # statements, handlers and match cases only: an expression holds none
        node = todo.pop()
        body = getattr(node, "body", None)
        if not isinstance(body, list):  # a simple statement
            if node.end_lineno and node.end_lineno > node.lineno:
                span(node.lineno, node.end_lineno)
            continue
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                todo.extend(block)
        for decorator in getattr(node, "decorator_list", ()):
            span(decorator.lineno, decorator.end_lineno or decorator.lineno)
        if body:
            first = getattr(node, "lineno", None) or getattr(getattr(node, "pattern", None), "lineno", 0)
            span(first, max(first, body[0].lineno - 1))  # a header: from its keyword to its body
    covered = list(itertools.accumulate(change))
    cuts: list[tuple[int, int]] = []
    for number in commented:
        if covered[number]:
            continue
        line = lines[number - 1]
        stripped = line.lstrip(" \t\f")
        if stripped.startswith("#"):
            column = len(line) - len(stripped)
            if not _SUPPRESSION_OR_SETTING.search(line, column):
                cuts.append((number, column))
            continue
        column = _depth_zero_comment(line)
        if column is not None and not _SUPPRESSION_OR_SETTING.search(line, column):
            cuts.append((number, column))
    return tuple(cuts)


def _depth_zero_comment(line: str) -> int | None:
    """The column of a comment outside brackets on a line read on its own; None when there is none
    or the line is not whole by itself."""
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.type == tokenize.OP:
                if token.string in _OPENING:
                    depth += 1
                elif token.string in _CLOSING:
                    depth -= 1
            elif token.type == tokenize.COMMENT:
                return token.start[1] if depth == 0 else None
            elif token.type == tokenize.ERRORTOKEN:
                return None
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return None


def analysed_digest(
    text: str, blanked: str | None, cuts: Iterable[tuple[int, int]], blank: Iterable[tuple[int, int]]
) -> str:
    """A hash of what the analysis of a file reads: the text libcst parses (`blanked` when given)
    without the comments of `cuts` (outside the blanked spans `blank`), and the axis names the
    file's text mentions. Two texts with one digest get the same diagnostics, anywhere."""
    from spmdcheck.frontend.source import mesh_names_in

    pieces = re.split(r"(\r\n|\r|\n)", blanked if blanked is not None else text)
    emptied = set()
    for start, end in blank:
        emptied.update(range(start, end + 1))
    for line, column in cuts:
        index = 2 * (line - 1)
        if line not in emptied and index < len(pieces):
            pieces[index] = pieces[index][:column].rstrip(" \t\f")  # outside brackets: spaces reach nothing
    h = hashlib.blake2b(digest_size=16)
    # what follows the last code (blank lines, comments cut above) reaches no position and no expression
    h.update("".join(pieces).rstrip().encode("utf-8", "surrogatepass"))
    h.update(("\0" + ",".join(sorted(mesh_names_in(text)))).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _imports(body: list[ast.stmt], module: object) -> tuple[frozenset[str], frozenset[str]]:
    """What `program.graph.imported_names` finds (every import statement, at any depth)."""
    from spmdcheck.program.graph import resolve_import

    out: set[str] = set()
    star: set[str] = set()
    for node in _import_statements(body):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
            continue
        target = resolve_import(module, node.module, node.level)  # type: ignore[arg-type]
        if target is None:
            continue
        out.add(target)
        for alias in node.names:
            if alias.name == "*":
                star.add(target)
            else:
                out.add(f"{target}.{alias.name}")
    return frozenset(out), frozenset(star)


def _segment(lines: list[str], start: int, end: int) -> str:
    return "\n".join(lines[start - 1 : end])


# What a selective run may assume of a module-level statement it sees changed (incremental.py): a *pure* one
# only binds its names (it calls nothing, writes no attribute or item, runs no decorator but these), so what
# it changes reaches only the code that reads those names.
_PURE_DECORATORS = frozenset({"property", "staticmethod", "classmethod", "abstractmethod", "dataclass"})
_IMPURE_EXPRESSIONS = (
    ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr,
    ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
)


def statements(body: list[ast.stmt], module: object = None) -> tuple[tuple[int, int, tuple[str, ...], bool], ...]:
    """Each module-level statement: its first line (decorators included), last line, the names it binds
    and whether it is pure (see above). `module`: the file's `ModuleFile` (to resolve relative imports)."""
    out = []
    for node in body:
        names: set[str] = set()
        pure = _pure_statement(node, names) and not _spells_names(node, module)
        out.append((_start(node), node.end_lineno or node.lineno, tuple(sorted(names)), pure))
    return tuple(out)


def _pure_statement(node: ast.stmt, names: set[str]) -> bool:
    """Whether `node` is pure; `names` gains what it binds (nested blocks of if/try included)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names.update(_bound_names(node))
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names.update(n for target in targets for n in _target_names(target))
        parts = [node.value, getattr(node, "annotation", None)]
        return all(_plain_target(target) for target in targets) and all(_pure_expression(e) for e in parts)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        names.add(node.name)
        args = node.args
        parts = [*args.defaults, *args.kw_defaults, node.returns]
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            parts.append(getattr(arg, "annotation", None))
        return _pure_decorators(node) and all(_pure_expression(e) for e in parts)
    if isinstance(node, ast.ClassDef):
        names.add(node.name)
        inner: set[str] = set()  # the class's own namespace: not the module's
        parts = [*node.bases, *(k.value for k in node.keywords)]
        return (
            _pure_decorators(node)
            and all(_pure_expression(e) for e in parts)
            and all(_pure_statement(s, inner) for s in node.body)
        )
    if isinstance(node, ast.If):
        blocks = [node.body, node.orelse]
        return _pure_expression(node.test) & all(_pure_statement(s, names) for b in blocks for s in b)
    if isinstance(node, ast.Try):
        blocks = [node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)]
        names.update(h.name for h in node.handlers if h.name)
        heads = all(_pure_expression(h.type) for h in node.handlers)
        return heads & all(_pure_statement(s, names) for b in blocks for s in b)
    if isinstance(node, ast.Expr):
        return _pure_expression(node.value)
    return isinstance(node, ast.Pass)


def _spells_names(node: ast.stmt, module: object) -> bool:
    """Whether an import may change how the file spells spmd_types or Megatron (the checker's messages and fixes
    quote those spellings) or what `__future__` asks of it."""
    from spmdcheck.program.graph import resolve_import

    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        target = resolve_import(module, node.module, node.level) if module is not None else node.module
        if target is None:
            return True  # a relative import it cannot place: it may be one
        targets = [target]
    else:
        return False
    return any(t.split(".")[0] in _SPELLED for t in targets)


_SPELLED = frozenset({"spmd_types", "megatron", "__future__"})


def _plain_target(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return True
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_plain_target(t) for t in target.elts)
    return isinstance(target, ast.Starred) and _plain_target(target.value)


def _pure_decorators(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    return all(
        isinstance(d, (ast.Name, ast.Attribute)) and (d.id if isinstance(d, ast.Name) else d.attr) in _PURE_DECORATORS
        for d in node.decorator_list
    )


def _pure_expression(node: ast.AST | None) -> bool:
    return node is None or not any(isinstance(sub, _IMPURE_EXPRESSIONS) for sub in ast.walk(node))


def _start(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None)
    return min([node.lineno, *(d.lineno for d in decorators)]) if decorators else node.lineno


def _collect(body: list[ast.stmt], lines: list[str], out: list[Unit]) -> None:
    """Units of a module-level block; compound statements (if/try/with/for) are opened, not units."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            span = _body_span(node, lines)
            out.append(
                Unit(
                    frozenset({node.name}),
                    _words(_segment(lines, _start(node), node.end_lineno or node.lineno)),
                    (span,) if span else (),
                )
            )
        elif isinstance(node, ast.ClassDef):
            first, last = _start(node), node.end_lineno or node.lineno
            header = Unit(frozenset({node.name}), frozenset())
            out.append(header)
            own = set(range(first, last + 1))
            for item in node.body:
                span = _body_span(item, lines) if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
                if span is None:
                    continue  # a one-line method stays with the class header
                start, end = _start(item), item.end_lineno or item.lineno
                own.difference_update(range(start, end + 1))
                text = _segment(lines, start, end)
                name = item.name  # type: ignore[union-attr]
                attrs = frozenset(_SELF_ATTRIBUTE.findall(text))
                # A method binds no name of the module: what it makes reaches others through `self`
                # (the class's other methods), its class (a source itself then), or its callers.
                member = Unit(frozenset(), _words(text), (span,), method=name, attrs=attrs | {name})
                header.members.append(member)
                out.append(member)
            header.words = _words("\n".join(lines[n - 1] for n in sorted(own) if n <= len(lines)))
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)) or (
            hasattr(ast, "TryStar") and isinstance(node, ast.TryStar)
        ):
            _compound(node, lines, out)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            # An import reads no name of this module: only what it imports (a module path is not read).
            imported = frozenset(a.name for a in node.names if isinstance(node, ast.ImportFrom))
            out.append(Unit(_bound_names(node), imported))
        else:
            text = _segment(lines, node.lineno, node.end_lineno or node.lineno)
            out.append(Unit(_bound_names(node, text), _words(text), writes=_written_bases(node)))


def _compound(node: ast.stmt, lines: list[str], out: list[Unit]) -> None:
    """A module-level compound statement: its header is a unit, its blocks are opened."""
    blocks: list[list[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if block:
            blocks.append(block)
    for handler in getattr(node, "handlers", ()):
        blocks.append(handler.body)
    header_words: set[str] = set()
    binds: set[str] = set()
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt):
            continue
        if isinstance(child, ast.ExceptHandler):
            if child.type is not None:
                header_words |= _words(ast.unparse(child.type))
            if child.name:
                binds.add(child.name)
            continue
        header_words |= _words(ast.unparse(child))
        if isinstance(child, ast.withitem) and child.optional_vars is not None:
            binds |= _target_names(child.optional_vars)
    if isinstance(node, (ast.For, ast.AsyncFor)):
        binds |= _target_names(node.target)
    out.append(Unit(frozenset(binds), frozenset(header_words)))
    for block in blocks:
        _collect(block, lines, out)


def _target_names(target: ast.AST) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(target):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
    return names


def _written_bases(node: ast.stmt) -> frozenset[str]:
    """The names whose attribute or item a simple statement assigns (`Linear._sharding_config = ...`)."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    else:
        return frozenset()
    names: set[str] = set()
    todo = list(targets)
    while todo:
        target = todo.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            todo.extend(target.elts)
        elif isinstance(target, ast.Starred):
            todo.append(target.value)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            base = target.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name):
                names.add(base.id)
    return frozenset(names)


def _bound_names(node: ast.stmt, text: str = "") -> frozenset[str]:
    """Names a simple module-level statement binds (an attribute or item target binds its base name)."""
    names: set[str] = set()
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            names.add(alias.asname or alias.name.split(".")[0])
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            names |= _target_names(target)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        names |= _target_names(node.target)
    if ":=" in text or (hasattr(ast, "Match") and isinstance(node, ast.Match)):
        for sub in ast.walk(node):  # walrus and match-capture targets anywhere in the statement
            if isinstance(sub, ast.NamedExpr):
                names |= _target_names(sub.target)
            elif isinstance(sub, (ast.MatchAs, ast.MatchStar)) and sub.name:
                names.add(sub.name)
            elif isinstance(sub, ast.MatchMapping) and sub.rest:
                names.add(sub.rest)
    return frozenset(names)


def _body_span(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> tuple[int, int] | None:
    """The lines of a function's body when it is an indented block on lines of its own, else None."""
    first = node.body[0]
    decorators = getattr(first, "decorator_list", None) or []
    lead = min([first, *decorators], key=lambda n: (n.lineno, n.col_offset))
    start = lead.lineno
    if start <= node.lineno or start > len(lines):
        return None
    before = lines[start - 1].encode("utf-8")[: lead.col_offset]
    if before.strip(b" \t\f@"):  # `def f(\n): return x`: the body shares the header's last line
        return None
    return start, node.body[-1].end_lineno or start


def spread(scans: list[FileScan]) -> None:
    """Taint to a fixed point over the units of a run (see the module docstring).

    Two ways to matter: a *source* may make a type or issue a collective (it names a seed, or
    reads a name a source binds: it may call it or read its value), so whatever reads it is a
    source too; an *exposed* unit may receive a typed value (a source or exposed unit names what
    it binds: it may be called with typed arguments), and so may whatever it names in turn.
    A name resolves in its own file and in the checked modules that file imports (and, through
    `import *`, the modules those re-export), never anywhere else.
    """
    by_name: dict[str, FileScan] = {}
    for s in scans:
        by_name.setdefault(s.module, s)
    index = {id(s): i for i, s in enumerate(scans)}

    def star_closure(start: FileScan) -> list[int]:
        seen, todo = {index[id(start)]}, [start]
        while todo:
            for name in todo.pop().star:
                other = by_name.get(name)
                if other is not None and index[id(other)] not in seen:
                    seen.add(index[id(other)])
                    todo.append(other)
        return sorted(seen)

    stars = [star_closure(s) for s in scans]
    # The files each file's names can come from: itself, what it imports, what those re-export.
    reach: list[list[int]] = []
    for i, s in enumerate(scans):
        out = set(stars[i])
        for name in s.imports:
            other = by_name.get(name)
            if other is not None:
                out.update(stars[index[id(other)]])
        reach.append(sorted(out))
    bound: list[set[str]] = [set() for _ in scans]  # names each file's sources bind
    named: list[set[str]] = [set() for _ in scans]  # words each file's units that matter mention
    anywhere: set[str] = set()  # words of every unit that matters: methods are called through objects
    classes = [(i, u) for i, s in enumerate(scans) for u in s.units if u.members]
    class_names_units: list[dict[str, list[Unit]]] = [{} for _ in scans]
    for i, u in classes:
        for name in u.binds:
            class_names_units[i].setdefault(name, []).append(u)
    class_names = [set(d) for d in class_names_units]
    writers = [(i, u) for i, s in enumerate(scans) for u in s.units if u.writes]

    def matter(i: int, u: Unit, source: bool) -> None:
        if source:
            u.source = True
            bound[i] |= u.binds
        else:
            u.exposed = True
        named[i] |= u.words
        anywhere.update(u.words)

    for i, s in enumerate(scans):
        for u in s.units:
            if u.source:
                matter(i, u, True)
    changed = True
    while changed:
        changed = False
        for i, s in enumerate(scans):
            visible: set[str] = set()
            for j in reach[i]:
                visible |= bound[j]
            for u in s.units:
                if not u.source and not u.words.isdisjoint(visible):
                    matter(i, u, True)
                    visible |= u.binds
                    changed = True
        for i, u in classes:
            if not u.source and any(m.source for m in u.members):
                matter(i, u, True)  # its name now leads to a source
                changed = True
        # `self.<attr>` set or read by a source method may hold a type in every method of the class and
        # of its subclasses (every method is checked on an object its `__init__` built); `self.<method>`
        # and `super().<method>` of a source method is a source.
        for i, u in classes:
            typed = set().union(*(m.attrs for m in u.members if m.source))
            for j in reach[i]:
                for name in u.words & class_names[j]:
                    for base in class_names_units[j][name]:
                        if base is not u:
                            typed.update(*(m.attrs for m in base.members if m.source))
            if typed:
                for m in u.members:
                    if not m.source and not m.words.isdisjoint(typed):
                        matter(i, m, True)
                        changed = True
        for i in range(len(scans)):
            if not named[i]:
                continue
            for j in reach[i]:
                for u in scans[j].units:
                    if not u.matters and u.method is None and not u.binds.isdisjoint(named[i]):
                        matter(j, u, False)
                        changed = True
        # A source assigning an attribute of a class (`RowLinear._sharding_config = ShardingConfig(...)`, from
        # any file) may give its methods types (a contract types `forward`): the class is a source.
        for i, u in writers:
            if u.source:
                for j in reach[i]:
                    for name in u.writes & class_names[j]:
                        for cls in class_names_units[j][name]:
                            if not cls.source:
                                matter(j, cls, True)
                                changed = True
        for i, s in enumerate(scans):
            for u in s.units:
                if not u.matters and u.method is not None and u.method in anywhere:
                    matter(i, u, False)
                    changed = True
        for i, u in classes:
            if u.matters or any(m.matters for m in u.members):
                # Building an object runs `__init__`; calling it, `forward`; operators, the other dunders.
                for m in u.members:
                    if not m.matters and (m.method == "forward" or (m.method or "").startswith("__")):
                        matter(i, m, False)
                        changed = True


@dataclass(frozen=True)
class Plan:
    """What to hand to libcst: nothing (`skip`), or the text with `blank` line spans emptied."""

    skip: bool
    blank: tuple[tuple[int, int], ...] = ()


def plan(s: FileScan) -> Plan:
    """`skip` when nothing in the file matters (it may still run as an import of another file)."""
    if s.whole:
        return Plan(False)
    blank = tuple(span for u in s.units if not u.matters for span in u.bodies)
    return Plan(not any(u.matters for u in s.units), blank)


def blank_spans(s: FileScan, matters: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """`plan(s).blank` from the indices of the units that matter (the taint of an earlier run)."""
    if s.whole:
        return ()
    keep = set(matters)
    return tuple(span for i, u in enumerate(s.units) if i not in keep for span in u.bodies)


def blank_bodies(text: str, spans: Iterable[tuple[int, int]], filler: str = "pass", enclose: bool = False) -> str:
    """Empty the given 1-based line spans, the first line of each becoming `filler` at its indentation.

    Lines keep their endings, so every position outside the spans is unchanged. `enclose`: the filler is
    a string literal (`filler` its text) whose quotes enclose the span's emptied lines: one token for
    libcst where blank lines would be one node each (a quarter of the parse of a file mostly left out).
    """
    spans = sorted(spans)
    if not spans:
        return text
    pieces = re.split(r"(\r\n|\r|\n)", text)  # [line, ending, line, ending, ..., last line]
    for start, end in spans:
        first = 2 * (start - 1)
        if first >= len(pieces):
            continue
        line = pieces[first]
        indent = line[: len(line) - len(line.lstrip(" \t\f"))]
        last = min(2 * (end - 1), len(pieces) - 1)
        if not enclose:
            pieces[first] = indent + filler
        elif last > first:
            pieces[first] = f'{indent}"""{filler}'
        else:
            pieces[first] = f'{indent}"{filler}"'
        for idx in range(first + 2, last + 1, 2):
            pieces[idx] = ""
        if enclose and last > first:
            pieces[last] = '"""'
    return "".join(pieces)


def scan_to_plain(s: FileScan) -> tuple[list, list]:
    """A scan (its taint before `spread`) as plain data for the result cache: its small part (module,
    imports, cuts) and its units (every field of every unit, a class's methods by their index)."""
    index = {id(u): i for i, u in enumerate(s.units)}
    small = [
        s.module,
        s.whole,
        sorted(s.imports),
        sorted(s.star),
        None if s.cuts is None else [list(c) for c in s.cuts],
        s.shallow,
        None if s.statements is None else [[a, b, list(names), pure] for a, b, names, pure in s.statements],
    ]
    units = [
        [
            sorted(u.binds),
            sorted(u.words),
            [list(b) for b in u.bodies],
            u.source,
            u.method,
            sorted(u.attrs),
            [index[id(m)] for m in u.members],
            sorted(u.writes),
        ]
        for u in s.units
    ]
    return small, units


def scan_hash(small: list, units: list) -> str:
    """A hash of what `spread` reads of a scan: all but the comment cuts and the bodies' line spans (so an
    edit inside a body that keeps its words keeps the taint; the spans to blank are made again)."""
    data = json.dumps([small[:4], [u[:2] + u[3:] for u in units]], separators=(",", ":"))
    return hashlib.blake2b(data.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def scan_from_plain(path: str, small: object, units: object = None) -> FileScan | None:
    """The inverse of `scan_to_plain` (without units when `units` is None: enough to plan a file whose
    taint is known); None when the data does not have that shape."""
    try:
        module, whole, imports, star, cuts, shallow, table = small  # type: ignore[misc]
        out = FileScan(path, bool(whole), [], str(module), frozenset(map(str, imports)), frozenset(map(str, star)))
        out.shallow = shallow is True
        if table is not None:
            out.statements = tuple((int(a), int(b), tuple(map(str, n)), pure is True) for a, b, n, pure in table)
        out.cuts = None if cuts is None else tuple((int(a), int(b)) for a, b in cuts)
        out.has_units = units is not None
        members: list[list[int]] = []
        for binds, words, bodies, source, method, attrs, member_indices, writes in units or ():  # type: ignore[attr-defined]
            spans = tuple((int(a), int(b)) for a, b in bodies)
            unit = Unit(frozenset(map(str, binds)), frozenset(map(str, words)), spans, bool(source))
            unit.method = None if method is None else str(method)
            unit.attrs = frozenset(map(str, attrs))
            unit.writes = frozenset(map(str, writes))
            out.units.append(unit)
            members.append([int(i) for i in member_indices])
        for unit, indices in zip(out.units, members):
            unit.members = [out.units[i] for i in indices]
        return out
    except (TypeError, ValueError, IndexError):
        return None

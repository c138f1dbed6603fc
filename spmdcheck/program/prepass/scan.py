"""A file's scan: read with `ast`, cut into units (module-level statements, functions, class headers, methods),
each with the words it names and binds; and the scan as plain data for the result cache."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field

from spmdcheck.frontend import guard
from spmdcheck.program.prepass.digest import comment_cuts
from spmdcheck.program.prepass.purity import statements
from spmdcheck.program.prepass.syntax import NEWLINE, bound_names, statement_start, target_names

# A file naming one of these may be analysed whole: annotations, the spmd_types API, file settings, and
# suppression comments naming a code (an unused one is reported). Which it is, `_whole` decides.
WHOLE_FILE_MARKERS = (b"spmd", b"Annotated", b"SPMD")


_SETTING_OR_CODE = re.compile(rb"spmdcheck|SPMD\d")  # a file setting (spmdcheck: mesh = [...]) or a code (SPMD101)


_ANNOTATED = re.compile(r"\bAnnotated\b")


_MARKER_WORD = re.compile(r"spmd|Annotated", re.IGNORECASE)


def _names_marker(words: frozenset[str]) -> bool:
    return any("spmd" in word.lower() or word == "Annotated" for word in words)


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

# What a function's code may change of module state: an item or attribute it assigns (`REG[name] = cls`,
# `Config.default = c`), a container it fills (`HOOKS.append(fn)`). Read from the text: an over-approximation.
# (`\w++` never gives a word back: a shorter part of a word is followed by a word character, which neither
# pattern accepts next, so the matches are those of `\w+`, found without retrying every prefix of every word)
_ITEM_OR_ATTRIBUTE_WRITE = re.compile(r"\b(\w++)\s*(?:\[[^\n]*?\]|\.\s*\w+)\s*(?:[-+*/@%&|^]|//|<<|>>|\*\*)?=(?!=)")
_CONTAINER_FILL = re.compile(r"\b(\w++)\s*\.\s*(?:append|extend|insert|update|setdefault|add|__setitem__)\s*\(")


_TYPE_LIKE = re.compile(r"\s*[\w.]*(?:\s*[\[\],|]\s*[\w.]*)*\s*")  # names joined by brackets, commas, pipes


@dataclass
class Unit:
    """A module-level statement, function or class: what it binds and which identifiers it names."""

    binds: frozenset[str]
    words: frozenset[str]
    bodies: tuple[tuple[int, int], ...] = ()  # 1-based line spans of function bodies to blank when inert
    source: bool = False  # may make a type or issue a collective
    layout: bool = False  # names a layout (seeds.layout_words): a source once it matters
    exposed: bool = False  # may receive a typed value
    method: str | None = None  # a method's name: called through any object, so named from any file
    attrs: frozenset[str] = frozenset()  # a method's `self.<attr>` names
    writes: frozenset[str] = frozenset()  # names whose attribute or item a module-level statement assigns
    members: list[Unit] = field(default_factory=list)  # a class's methods (the class unit is its header)
    # the names a module-level function or class is decorated with (`@register("row")`: `register`;
    # `@registry.add`: `registry`): called with it when its module runs
    decorators: frozenset[str] = frozenset()
    imports_only: bool = False  # an import statement: it binds what it names and runs nothing of it

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
        return _fstring_fields(string)  # an f-string: its replacement fields are code, its text prose
    if string[:3] in ("'''", '"""'):
        return "\n" * string.count("\n") + "\r" * (string.count("\r") - string.count("\r\n"))
    if _TYPE_LIKE.fullmatch(string, 1, len(string) - 1):
        return match.group(0)  # a forward reference `"Config"`, `"Optional[Block]"`: names
    return ""


def _fstring_fields(string: str) -> str:
    """An f-string's replacement fields (`{...}`, nested ones and format specs with them), its literal text
    dropped (line breaks kept): "Please redistribute the tensor" names nothing, `{x.to_local()}` does."""
    out: list[str] = []
    depth = 0
    i, n = 0, len(string)
    while i < n:
        ch = string[i]
        if depth == 0 and ch in "{}" and string[i : i + 2] in ("{{", "}}"):
            i += 2  # an escaped brace: literal text
            continue
        if ch == "{":
            depth += 1
            out.append(" " if depth == 1 else ch)
        elif ch == "}" and depth:
            depth -= 1
            out.append(" " if depth == 0 else ch)
        elif depth or ch in "\r\n":
            out.append(ch)
        i += 1
    return "".join(out)


def code_only(text: str) -> str:
    """`text` without comments and docstrings, every line where it was."""
    return _STRING_OR_COMMENT.sub(_drop_prose, text)


def identifier_words(text: str) -> frozenset[str]:
    found = set(_WORD.findall(text))
    if not text.isascii():  # CPython reads identifiers NFKC-normalised; name both spellings
        found.update(unicodedata.normalize("NFKC", w) for w in list(found) if not w.isascii())
    return frozenset(found)


def scan(  # noqa: ANN201
    path: str,
    data: bytes,
    seeds: frozenset[str],
    exists=os.path.exists,  # noqa: ANN001
    for_cache: bool = True,
    layout: frozenset[str] = frozenset(),
) -> FileScan:
    """Cut a file into units, taint those naming a seed, mark those naming a layout word, and list what it
    imports. `for_cache`: also what only the result cache reads (the comment cuts its keys leave out, the
    module-level statements its record names).

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
        words = identifier_words(data.decode("utf-8", errors="replace"))
        return FileScan(path, whole=True, units=[Unit(words, words, source=True)], module=module.name)
    code = code_only(text)
    marked = whole and _MARKER_WORD.search(code) is not None  # a marker in code, not only in prose
    whole = whole and _whole(data, tree, code, marked)
    lines = NEWLINE.split(code)
    units: list[Unit] = []
    _collect(tree.body, lines, units)
    for unit in units:
        # in a file not analysed whole, a unit naming a marker is a source: `spmd.reinterpret(...)` through a
        # module that re-exports spmd_types under another name
        unit.source = whole or not seeds.isdisjoint(unit.words) or (marked and _names_marker(unit.words))
        # an import binds a placement class and makes no placement: the units calling it are the layouts
        unit.layout = not unit.source and not unit.imports_only and not layout.isdisjoint(unit.words)
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


def _collect(body: list[ast.stmt], lines: list[str], out: list[Unit]) -> None:
    """Units of a module-level block; compound statements (if/try/with/for) are opened, not units."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            span = _body_span(node, lines)
            text = _segment(lines, statement_start(node), node.end_lineno or node.lineno)
            writes = _ITEM_OR_ATTRIBUTE_WRITE.findall(text) + _CONTAINER_FILL.findall(text)
            out.append(
                Unit(
                    frozenset({node.name}),
                    identifier_words(text),
                    (span,) if span else (),
                    writes=frozenset(writes),
                    decorators=_decorator_names(node),
                )
            )
        elif isinstance(node, ast.ClassDef):
            first, last = statement_start(node), node.end_lineno or node.lineno
            header = Unit(frozenset({node.name}), frozenset(), decorators=_decorator_names(node))
            out.append(header)
            own = set(range(first, last + 1))
            for item in node.body:
                span = _body_span(item, lines) if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
                if span is None:
                    continue  # a one-line method stays with the class header
                start, end = statement_start(item), item.end_lineno or item.lineno
                own.difference_update(range(start, end + 1))
                text = _segment(lines, start, end)
                name = item.name  # type: ignore[union-attr]
                attrs = frozenset(_SELF_ATTRIBUTE.findall(text))
                # A method binds no name of the module: what it makes reaches others through `self`
                # (the class's other methods), its class (a source itself then), or its callers.
                member = Unit(frozenset(), identifier_words(text), (span,), method=name, attrs=attrs | {name})
                header.members.append(member)
                out.append(member)
            header.words = identifier_words("\n".join(lines[n - 1] for n in sorted(own) if n <= len(lines)))
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)) or (
            hasattr(ast, "TryStar") and isinstance(node, ast.TryStar)
        ):
            _compound(node, lines, out)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            # An import reads no name of this module: only what it imports (a module path is not read).
            imported = frozenset(a.name for a in node.names if isinstance(node, ast.ImportFrom))
            out.append(Unit(bound_names(node), imported, imports_only=True))
        else:
            text = _segment(lines, node.lineno, node.end_lineno or node.lineno)
            out.append(Unit(bound_names(node, text), identifier_words(text), writes=_written_bases(node)))


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> frozenset[str]:
    names: set[str] = set()
    for decorator in node.decorator_list:
        base = decorator
        while isinstance(base, (ast.Call, ast.Attribute, ast.Subscript)):
            base = base.func if isinstance(base, ast.Call) else base.value
        if isinstance(base, ast.Name):
            names.add(base.id)
    return frozenset(names)


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
                header_words |= identifier_words(ast.unparse(child.type))
            if child.name:
                binds.add(child.name)
            continue
        header_words |= identifier_words(ast.unparse(child))
        if isinstance(child, ast.withitem) and child.optional_vars is not None:
            binds |= target_names(child.optional_vars)
    if isinstance(node, (ast.For, ast.AsyncFor)):
        binds |= target_names(node.target)
    out.append(Unit(frozenset(binds), frozenset(header_words)))
    for block in blocks:
        _collect(block, lines, out)


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
            u.layout,
            sorted(u.decorators),
            u.imports_only,
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
        for fields in units or ():  # type: ignore[attr-defined]
            binds, words, bodies, source, method, attrs, member_indices, writes, layout, decorators, imported = fields
            spans = tuple((int(a), int(b)) for a, b in bodies)
            unit = Unit(frozenset(map(str, binds)), frozenset(map(str, words)), spans, bool(source), layout is True)
            unit.method = None if method is None else str(method)
            unit.attrs = frozenset(map(str, attrs))
            unit.writes = frozenset(map(str, writes))
            unit.decorators = frozenset(map(str, decorators))
            unit.imports_only = imported is True
            out.units.append(unit)
            members.append([int(i) for i in member_indices])
        for unit, indices in zip(out.units, members):
            unit.members = [out.units[i] for i in indices]
        return out
    except (TypeError, ValueError, IndexError):
        return None

"""Edits of Python source that keep every line of the original where a line map can find it (issue 20, item 5).

The idiom rewrites (tests/fuzz/idioms.py) work on any module, a generated program's or a fixture's: they read
it with ``ast`` and change it by text edits at the nodes' positions -- an expression replaced or wrapped on its
own line, whole lines inserted (a config class after the imports, a decorator above a ``def``) or appended at
the end. :class:`FileEdit` collects the edits and applies them at once; the result carries the map new line ->
old line (None for an inserted line), so a finding on an edited line maps back to the line it was on.

Positions: ``ast`` gives columns in UTF-8 bytes; the edits take them as ``ast`` gives them and convert.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field


def char_col(line: str, byte_col: int) -> int:
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


@dataclass
class FileEdit:
    text: str
    _spans: list[tuple[int, int, int, int, str]] = field(default_factory=list)  # (line, start, end, order, text)
    _lines: dict[int, list[str]] = field(default_factory=dict)  # before old line n (n = len + 1: at the end)

    def __post_init__(self) -> None:
        self.lines = self.text.split("\n")
        if self.lines and self.lines[-1] == "":
            self.lines.pop()

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""

    def replace(self, line: int, col: int, end_col: int, text: str) -> None:
        """Replace bytes [col, end_col) of a line (ast positions) with text (no newline)."""
        src = self.lines[line - 1]
        self._spans.append((line, char_col(src, col), char_col(src, end_col), len(self._spans), text))

    def insert(self, line: int, col: int, text: str) -> None:
        self.replace(line, col, col, text)

    def replace_node(self, node: ast.AST, text: str) -> None:
        assert node.lineno == node.end_lineno, "only a node on one line is replaced"
        self.replace(node.lineno, node.col_offset, node.end_col_offset, text)

    def wrap(self, node: ast.AST, before: str, after: str) -> None:
        """Text around a node (which may span lines): its lines stay where they are."""
        self.insert(node.lineno, node.col_offset, before)
        self.insert(node.end_lineno, node.end_col_offset, after)

    def add_lines(self, before: int, texts: list[str]) -> None:
        self._lines.setdefault(before, []).extend(texts)

    def append(self, texts: list[str]) -> None:
        self.add_lines(len(self.lines) + 1, texts)

    def indent_of(self, line: int) -> str:
        src = self.lines[line - 1]
        return src[:len(src) - len(src.lstrip())]

    def apply(self) -> tuple[str, dict[int, int | None]]:
        """(the new text, new line -> old line or None)."""
        lines = list(self.lines)
        by_line: dict[int, list[tuple[int, int, int, str]]] = {}
        for line, start, end, order, text in self._spans:
            by_line.setdefault(line, []).append((start, end, order, text))
        for line, spans in by_line.items():
            s = lines[line - 1]
            last = len(s) + 1
            for start, end, _, text in sorted(spans, key=lambda t: (t[0], t[2]), reverse=True):
                assert end <= last or start == end, f"overlapping edits on line {line}"
                s = s[:start] + text + s[end:]
                last = start
            lines[line - 1] = s
        out: list[str] = []
        old_of: dict[int, int | None] = {}
        for n in range(1, len(lines) + 2):
            for text in self._lines.get(n, []):
                out.append(text)
                old_of[len(out)] = None
            if n <= len(lines):
                out.append(lines[n - 1])
                old_of[len(out)] = n
        return "\n".join(out) + "\n", old_of


# --------------------------------------------------------------------------- reading a module
@dataclass
class CodeNode:
    node: ast.AST
    func: ast.FunctionDef | ast.AsyncFunctionDef | None  # the innermost function whose body holds it
    cls: ast.ClassDef | None  # the class whose method that function is (or whose body holds the node)
    in_fstring: bool
    in_lambda: bool  # inside a lambda or a comprehension (evaluated later, or in a scope of its own)


def code_nodes(tree: ast.Module) -> Iterator[CodeNode]:
    """Every node of executable code (not annotations, decorators, parameter defaults or a def's header), with
    the function and class it is in."""
    def visit(node: ast.AST, func, cls, fstr: bool, lam: bool) -> Iterator[CodeNode]:  # noqa: ANN001
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for stmt in node.body:
                yield from visit(stmt, node, cls if func is None else None, False, False)
            return
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                yield from visit(stmt, None, node, False, False)
            return
        if isinstance(node, ast.AnnAssign):
            for child in (node.target, node.value):
                if child is not None:
                    yield from visit(child, func, cls, fstr, lam)
            return
        yield CodeNode(node, func, cls, fstr, lam)
        inner_fstr = fstr or isinstance(node, ast.JoinedStr)
        inner_lam = lam or isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp))
        if isinstance(node, ast.Lambda):
            yield from visit(node.body, func, cls, inner_fstr, True)
            return
        for child in ast.iter_child_nodes(node):
            yield from visit(child, func, cls, inner_fstr, inner_lam)

    for stmt in tree.body:
        yield from visit(stmt, None, None, False, False)


def function_locals(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The parameters and the names a function binds (nested scopes included: an approximation that only ever
    adds names of values)."""
    a = func.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    names |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    declared: set[str] = set()
    for n in ast.walk(func):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            declared.update(n.names)
    return names - declared


def module_names(tree: ast.Module) -> set[str]:
    """Every name bound at module level, and every name used anywhere (a new name must be neither)."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))} | {
        (a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names}


def fresh(taken: set[str], base: str) -> str:
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    taken.add(name)
    return name


def after_imports(tree: ast.Module, text: str) -> int:
    """The line before which module-level definitions go: after the last top-level import (or the docstring, or
    the leading comments: a header such as ``# spmdcheck: mesh = [...]`` stays first)."""
    last = 0
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        last += 1
    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            last = stmt.end_lineno
        elif i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            last = max(last, stmt.end_lineno)
    return last + 1


def statement_of(tree: ast.Module, node: ast.AST) -> ast.stmt:
    """The innermost statement holding a node."""
    best = None
    for n in ast.walk(tree):
        if isinstance(n, ast.stmt) and n.lineno <= node.lineno and node.end_lineno <= n.end_lineno and (
                n.lineno, n.col_offset) <= (node.lineno, node.col_offset):
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While,
                                  ast.With, ast.Try)) or n is node:
                if best is None or (n.end_lineno - n.lineno) <= (best.end_lineno - best.lineno):
                    best = n
    return best

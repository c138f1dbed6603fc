"""Protect the parser and the analysis from pathological input.

libcst's native parser recurses on the machine stack: an expression nested
about 1,200 brackets deep overflows it and kills the process (a segfault, not
an exception), and a chain of a few thousand binary operators takes minutes
(its time grows faster than the square of the chain). CPython's own parser is
fast and fails cleanly on such input (`SyntaxError: too many nested
parentheses` past 200 brackets, `RecursionError` past a few thousand levels).
So every text goes through `screen` first: CPython parses it and measures
how deep each outermost expression is; an expression deeper than
`MAX_EXPRESSION_DEPTH` is replaced by `...` (which the analysis reads as an
unknown value) with the same line count, and reported; the rest of the file is
still checked. Then `call_with_deep_stack` runs the libcst parse and the
analysis on a thread with a large stack and a high recursion limit, so that
anything within the limits (a 400-term sum, a 500-branch if/elif chain) is
analysed rather than refused.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import threading
import tokenize
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from spmdcheck.frontend.lines import physical_lines

# Syntax-tree levels inside one expression (a chain of n binary operators counts n, as Python's grammar
# nests them). 1,000 keeps libcst's parse of the worst shape, a flat chain, near one second.
MAX_EXPRESSION_DEPTH = 1000
# CPython refuses more nested brackets than this (its tokenizer's MAXLEVEL); libcst would crash instead.
MAX_BRACKET_DEPTH = 200
# The analysis thread: room for deep (but accepted) syntax trees in libcst's native parser and code
# generator and in the interpreter. Reserved address space only: pages are touched as the stack grows.
DEEP_STACK_BYTES = 512 * 1024 * 1024
DEEP_RECURSION_LIMIT = 60_000


@dataclass
class DeepExpression:
    line: int
    column: int
    depth: int


@dataclass
class Screened:
    text: str  # the text to give libcst: too-deep expressions replaced by `...`
    deep: list[DeepExpression] = field(default_factory=list)
    # set when the whole file cannot be parsed safely: (message, line, column)
    failure: tuple[str, int, int] | None = None


def null_byte_failure(text: str) -> tuple[str, int, int]:
    """A text with a NUL character (a binary file, or one saved in UTF-16), which Python refuses to compile:
    one message at the first NUL (message, line, column), not the bytes."""
    at = text.index("\0")
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    return "the file contains a null byte (a binary file, or not UTF-8 text?)", line, column


def screen(text: str) -> Screened:
    """Check with CPython's parser that libcst can be given `text` (see the module docstring)."""
    try:
        tree = quiet_ast_parse(text)
    except SyntaxError as exc:
        # Perhaps syntax newer than this Python: let libcst judge, unless the brackets alone would crash it.
        depth, line = _bracket_depth(text)
        if depth > MAX_BRACKET_DEPTH:
            message = f"brackets nested {depth} deep (Python allows {MAX_BRACKET_DEPTH})"
            return Screened(text, failure=(message, line, 1))
        if "nested" in (exc.msg or ""):
            return Screened(text, failure=(exc.msg, exc.lineno or 1, exc.offset or 1))
        return Screened(text)
    except (RecursionError, MemoryError):
        _, line = _bracket_depth(text)
        return Screened(text, failure=("the file is nested too deeply for Python's own parser", line, 1))
    except ValueError as exc:  # null bytes
        return Screened(text, failure=null_byte_failure(text) if "\0" in text else (str(exc), 1, 1))
    deep = _too_deep(tree)
    if not deep:
        return Screened(text)
    return _blank(text, deep)


def shallow(tree: ast.Module, data: bytes) -> bool:
    """True when no expression of `tree` (parsed from `data`) is deeper than the limit (`screen` has
    nothing to do then). A short expression is not walked: every level of an expression's tree but a
    few (an f-string's parts, a name's context) holds a token of its own, so an expression of n bytes
    is at most n + 16 levels deep; one of more than half the limit in bytes is measured."""
    limit = (MAX_EXPRESSION_DEPTH - 16) // 2
    lengths: list[int] = []

    def size(node: ast.stmt | ast.expr) -> int:
        first, last = node.lineno, node.end_lineno or node.lineno
        if first == last:
            return (node.end_col_offset or 0) - node.col_offset
        if not lengths:
            lengths.extend(len(line) + 2 for line in _BYTE_LINES.split(data))
        return sum(lengths[first - 1 : last])

    def short_header(node: ast.stmt, body: list) -> bool:
        """Whether a compound statement's header (decorators to the first line of its body) is short."""
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        if not lengths:
            lengths.extend(len(line) + 2 for line in _BYTE_LINES.split(data))
        return sum(lengths[first - 1 : max(first, body[0].lineno)]) <= limit

    long_roots: list[ast.expr] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            body = getattr(node, "body", None)
            if not isinstance(body, list):
                if size(node) <= limit:
                    continue  # a short simple statement: no expression in it is longer
            elif body and short_header(node, body):
                for name in _BLOCKS:  # no expression of the header is longer: only its blocks are looked at
                    block = getattr(node, name, None)
                    if isinstance(block, list):
                        stack.extend(block)
                continue
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.expr):
                stack.append(child)
            elif size(child) > limit:
                long_roots.append(child)
    return all(_depth(root) <= MAX_EXPRESSION_DEPTH for root in long_roots)  # measured: a long call is flat


_BYTE_LINES = re.compile(rb"\r\n|\r|\n")
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")  # the fields of a statement holding statements


def quiet_ast_parse(source: str | bytes) -> ast.Module:
    """`ast.parse` without its SyntaxWarnings (`1()`, `x is 1`): the checked code is not ours to lint."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source)


def string_value(node: object) -> object:
    """A libcst string's value (`evaluated_value`, which runs `ast.literal_eval`) without the warnings
    CPython gives on the checked code (`"\\d"`); None where it cannot be evaluated."""
    text = getattr(node, "value", None)
    if type(text) is str and "\\" not in text and "\r" not in text:  # no escape, no newline to translate:
        quote = text.lstrip("rRuU")  # a plain str literal is its text between the quotes
        if len(text) - len(quote) <= 1 and quote[:1] in ("'", '"'):
            width = 3 if quote[:3] in ("'''", '"""') and len(quote) >= 6 else 1
            return quote[width:-width]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return node.evaluated_value  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - a string libcst cannot evaluate is just unknown
            return None


def _too_deep(tree: ast.AST) -> list[tuple[ast.expr, int]]:
    """The outermost expressions deeper than the limit, with their depth (iterative: no recursion)."""
    found: list[tuple[ast.expr, int]] = []
    roots: list[ast.expr] = []
    stack: list[ast.AST] = [tree]
    while stack:  # statements and other non-expression nodes: collect the expressions directly under them
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            (roots if isinstance(child, ast.expr) else stack).append(child)
    for root in roots:
        depth = _depth(root)
        if depth > MAX_EXPRESSION_DEPTH:
            found.append((root, depth))
    return found


def _depth(root: ast.AST) -> int:
    best = 0
    stack = [(root, 1)]
    while stack:
        node, level = stack.pop()
        best = max(best, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return best


def _blank(text: str, deep: list[tuple[ast.expr, int]]) -> Screened:
    """Replace each too-deep expression by `(...)` spanning the same lines, so later positions do not move."""
    lines = physical_lines(text, keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    edits = []
    notes = []
    for node, depth in deep:
        notes.append(DeepExpression(node.lineno, node.col_offset + 1, depth))
        if isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)) or node.end_lineno is None:
            return Screened(
                text,
                notes,
                failure=(f"an assignment target nested {depth} deep (limit {MAX_EXPRESSION_DEPTH})", node.lineno, 1),
            )
        # ast columns are UTF-8 byte offsets
        begin = starts[node.lineno - 1] + _char_offset(lines[node.lineno - 1], node.col_offset)
        end = starts[node.end_lineno - 1] + _char_offset(lines[node.end_lineno - 1], node.end_col_offset or 0)
        edits.append((begin, end, "(..." + "\n" * (node.end_lineno - node.lineno) + ")"))
    for begin, end, replacement in sorted(edits, reverse=True):
        text = text[:begin] + replacement + text[end:]
    return Screened(text, notes)


def _char_offset(line: str, byte_offset: int) -> int:
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def _bracket_depth(text: str) -> tuple[int, int]:
    """The deepest bracket nesting outside strings and comments, and its line (for text CPython rejected)."""
    depth = best = 0
    line = 1
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
                if depth > best:
                    best, line = depth, tok.start[0]
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth = max(0, depth - 1)
    except (tokenize.TokenError, SyntaxError, RecursionError, MemoryError):
        pass
    return best, line


_T = TypeVar("_T")
_deep_lock = threading.Lock()
_deep_active = 0
_saved_limit = 0


def call_with_deep_stack(fn: Callable[[], _T]) -> _T:
    """`fn()` on a thread with a large stack and a high recursion limit; its exception is re-raised here."""
    global _deep_active, _saved_limit
    outcome: list = []

    def target() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome.append((False, exc))

    with _deep_lock:
        if _deep_active == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, DEEP_RECURSION_LIMIT))
        _deep_active += 1
        previous = threading.stack_size()
        try:
            threading.stack_size(DEEP_STACK_BYTES)
            worker = threading.Thread(target=target, name="spmdcheck-analysis", daemon=True)
            worker.start()
        except (ValueError, RuntimeError, MemoryError):
            worker = None
        finally:
            threading.stack_size(previous)
    try:
        if worker is None:  # no big thread on this platform: run here, within the normal limits
            with _deep_lock:
                sys.setrecursionlimit(_saved_limit)
            target()
        else:
            worker.join()
    finally:
        with _deep_lock:
            _deep_active -= 1
            if _deep_active == 0:
                sys.setrecursionlimit(_saved_limit)
    ok, value = outcome[0]
    if ok:
        return value
    raise value

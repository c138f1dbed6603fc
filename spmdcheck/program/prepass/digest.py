"""What the analysis of a file reads, as a digest: the comments it never reads are cut (an edit of them keeps
the result cache's key)."""

from __future__ import annotations

import ast
import hashlib
import io
import itertools
import re
import tokenize
from collections.abc import Iterable

from spmdcheck.program.prepass.syntax import NEWLINE

_OPENING, _CLOSING = frozenset("([{"), frozenset(")]}")

_SUPPRESSION_OR_SETTING = re.compile(r"noqa|spmd", re.IGNORECASE)  # comments the checker reads


def comment_cuts(tree: ast.Module, text: str) -> tuple[tuple[int, int], ...]:
    """Where each comment that cannot reach the analysis starts: (1-based line, 0-based column).

    Such a comment is outside every bracket (so no expression's source text, which messages and
    fixes quote, holds it) and is not a suppression or a file setting (`noqa`, `spmdcheck:`).
    Comments are only looked for on lines that belong to a construct of one line; a line of a
    statement or header spanning several lines is kept whole (it may be inside brackets), and so
    is a line the tokenizer cannot read on its own. The result cache keys a file on its text
    without these comments (`analysed_digest`), so editing one re-uses the program's results.
    """
    lines = NEWLINE.split(text)
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
    text: str,
    blanked: str | None,
    cuts: Iterable[tuple[int, int]],
    blank: Iterable[tuple[int, int]],
    axes: Iterable[str] | None = None,
) -> str:
    """A hash of what the analysis of a file reads: the text libcst parses (`blanked` when given)
    without the comments of `cuts` (outside the blanked spans `blank`), and the axis names the
    file's text mentions (`axes`, when the caller has them: SourceFile.mesh_names). Two texts with one digest
    get the same diagnostics, anywhere."""
    from spmdcheck.frontend.source_file import mesh_names_in

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
    names = mesh_names_in(text) if axes is None else axes
    h.update(("\0" + ",".join(sorted(names))).encode("utf-8", "surrogatepass"))
    return h.hexdigest()

"""Syntax helpers of the pre-pass: where a statement starts, the names it binds."""

from __future__ import annotations

import ast
import re

NEWLINE = re.compile(r"\r\n|\r|\n")


def statement_start(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None)
    return min([node.lineno, *(d.lineno for d in decorators)]) if decorators else node.lineno


def target_names(target: ast.AST) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(target):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
    return names


def bound_names(node: ast.stmt, text: str = "") -> frozenset[str]:
    """Names a simple module-level statement binds (an attribute or item target binds its base name)."""
    names: set[str] = set()
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            names.add(alias.asname or alias.name.split(".")[0])
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            names |= target_names(target)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        names |= target_names(node.target)
    if ":=" in text or (hasattr(ast, "Match") and isinstance(node, ast.Match)):
        for sub in ast.walk(node):  # walrus and match-capture targets anywhere in the statement
            if isinstance(sub, ast.NamedExpr):
                names |= target_names(sub.target)
            elif isinstance(sub, (ast.MatchAs, ast.MatchStar)) and sub.name:
                names.add(sub.name)
            elif isinstance(sub, ast.MatchMapping) and sub.rest:
                names.add(sub.rest)
    return frozenset(names)

"""Module-level statements and whether each is pure (only binds its names): what a selective run may assume of
one it sees changed (engine/incremental.py)."""

from __future__ import annotations

import ast

from spmdcheck.program.prepass.syntax import bound_names, statement_start, target_names

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
        out.append((statement_start(node), node.end_lineno or node.lineno, tuple(sorted(names)), pure))
    return tuple(out)


def _pure_statement(node: ast.stmt, names: set[str]) -> bool:
    """Whether `node` is pure; `names` gains what it binds (nested blocks of if/try included)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names.update(bound_names(node))
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names.update(n for target in targets for n in target_names(target))
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

"""Questions about the syntax tree the interpreter asks (no values): blocks, parameters, names a block writes
or reads, whether a block always leaves, the names a statement binds."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from spmdcheck.analysis.interp.loopreads import attr_path
from spmdcheck.frontend.guard import string_value


def is_main_guard(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if type(target.operator) is not cst.Equal:
        return False
    sides = (test.left, target.comparator)
    names = [side for side in sides if type(side) is cst.Name and side.value == "__name__"]
    texts = [side for side in sides if type(side) is cst.SimpleString and string_value(side) == "__main__"]
    return len(names) == 1 and len(texts) == 1


def block_body(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    body = getattr(node, "body", None)
    if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        return body.body
    if isinstance(body, (list, tuple)):
        return body
    return ()


def param_name(fn: cst.FunctionDef, name: str) -> cst.CSTNode:
    params = fn.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    every += [p for p in (params.star_arg, params.star_kwarg) if type(p) is cst.Param]
    return next((p.name for p in every if p.name.value == name), fn.name)


def walk_statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for stmt in block_body(node):
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from stmt.body
        else:
            yield from walk_statements(stmt)


def names_written(statements: Sequence[cst.CSTNode]) -> set[str]:
    """Names a block assigns, augments or changes in place (`x.mul_(...)`)."""
    names: set[str] = set()

    class _Collect(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, cst.Name):
                names.add(node.target.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name):
                names.add(node.target.value)

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
                if func.attr.value.endswith("_") and not func.attr.value.startswith("_"):
                    names.add(func.value.value)

    for stmt in statements:
        stmt.visit(_Collect())
    return names


def names_used(statements: Sequence[cst.CSTNode]) -> set[str]:
    names: set[str] = set()

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.add(node.value)

    for stmt in statements:
        stmt.visit(_Collect())
    return names


def always_exits(block: cst.CSTNode, skips_only: bool = False) -> bool:
    """The block ends in return/raise/continue/break on every path (`skips_only`: not counting raise)."""
    body = block_body(block)
    if not body:
        return False
    last = body[-1]
    kinds = (cst.Return, cst.Continue, cst.Break) if skips_only else (cst.Return, cst.Raise, cst.Continue, cst.Break)
    if isinstance(last, cst.SimpleStatementLine):
        return any(isinstance(s, kinds) for s in last.body)
    if isinstance(last, cst.If):
        return last.orelse is not None and always_exits(last.body, skips_only) and always_exits(last.orelse, skips_only)
    return False


def is_param(fn: cst.FunctionDef | None, name: str) -> bool:
    if fn is None:
        return False
    params = fn.params
    return any(p.name.value == name for p in (*params.posonly_params, *params.params, *params.kwonly_params))


def target_key(node: cst.CSTNode | None) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return attr_path(node)
    return None


def bound_names(stmt: cst.CSTNode) -> set[str]:
    """The names a statement may bind in the scope it runs in (not those of the functions and classes it
    defines, only their own names)."""
    out: set[str] = set()
    todo: list[cst.CSTNode] = [stmt]
    while todo:
        node = todo.pop()
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef:
            out.add(node.name.value)  # type: ignore[attr-defined]
            continue
        if kind is cst.Lambda:
            continue
        if kind is cst.Name:
            out.add(node.value)  # type: ignore[attr-defined]
            continue  # every name written or read: a superset of the targets (reads are harmless here)
        if kind is cst.ImportAlias:
            alias = node.asname.name if node.asname is not None else node.name  # type: ignore[attr-defined]
            dotted = alias.value if isinstance(alias, cst.Name) else cst.Module([]).code_for_node(alias)
            out.add(dotted.split(".")[0])
            continue
        todo.extend(node.children)
    return out

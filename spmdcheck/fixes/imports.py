"""The imports a fix needs, added where isort (and ruff's `I` rules) would place them.

A suggestion's replacement may name what the file does not bind: `spmd_types.convert(...)` in a file
that imports only `from spmd_types import I, R`, or `copy_to_tensor_model_parallel_region(x)` in a file
that imports only its sibling `reduce_from_tensor_model_parallel_region`. Applying it must add the import,
or the fixed code fails with a NameError.

Placement follows isort's default profile, which ruff's `I001` checks: sections (future, standard library,
third party, first party) are blocks separated by blank lines; inside a block, `import x` statements come
before `from x import y` ones, each sorted by module name ignoring case; the names of a `from` import are
sorted constants first, then classes, then the rest. A name whose module the file already imports from is
added to that statement (isort merges them); a statement too long for a line becomes a parenthesised one
with a trailing comma, which isort keeps as written. The file's other lines stay byte-for-byte.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spmdcheck.frontend.guard import quiet_ast_parse
from spmdcheck.frontend.lines import physical_lines

if TYPE_CHECKING:
    from spmdcheck.rules.stubs import Registry

SPMD_TYPES = "spmd_types"
# isort's default line length (ruff's too): a longer merged `from` import is wrapped in parentheses
LINE_LENGTH = 88


@dataclass(frozen=True)
class NeededImport:
    module: str
    name: str | None = None  # None: `import module`

    def statement(self) -> str:
        return f"import {self.module}" if self.name is None else f"from {self.module} import {self.name}"


def module_bindings(module: ast.Module) -> set[str]:
    """The names a module binds at its top level (imports, definitions, assignments), and the builtins."""
    bound = set(dir(__builtins__)) if not isinstance(__builtins__, dict) else set(__builtins__)
    for stmt in module.body:
        if isinstance(stmt, ast.Import):
            bound.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        elif isinstance(stmt, ast.ImportFrom):
            bound.update(a.asname or a.name for a in stmt.names)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                bound.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return bound


def needed_imports(module: ast.Module, replacements: Iterable[str], registry: Registry | None) -> list[NeededImport]:
    """What the replacements name that the module does not bind: the `spmd_types` module, and functions
    the stubs know as collectives or mappings (Megatron's), imported from the module the file already
    imports a sibling from when that module re-exports it."""
    bound = module_bindings(module)
    out: list[NeededImport] = []
    for replacement in replacements:
        try:
            tree = ast.parse(replacement.strip(), mode="eval")
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            need = None
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == SPMD_TYPES:
                need = NeededImport(SPMD_TYPES) if SPMD_TYPES not in bound else None
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in bound:
                need = _function_import(module, node.func.id, registry)
            if need is not None and need not in out:
                out.append(need)
    return out


def _function_import(module: ast.Module, name: str, registry: Registry | None) -> NeededImport | None:
    if registry is None:
        from spmdcheck.rules.registry import load_registry

        registry = load_registry(())
    known = [q for q, rule in registry.rules.items() if q.rsplit(".", 1)[-1] == name and rule.mappings]
    if not known:
        return None
    for stmt in module.body:  # a module the file imports from, which re-exports the function
        if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            if registry.resolve_alias(f"{stmt.module}.{name}") in known:
                return NeededImport(stmt.module, name)
    return NeededImport(known[0].rsplit(".", 1)[0], name)


def add_imports(text: str, needed: list[NeededImport], newline: str = "\n") -> str:
    """`text` with each needed import added (merged into a `from` import of its module when there is one)."""
    for need in needed:
        try:
            module = quiet_ast_parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return text
        if not module.body:
            return text
        text = _add_import(text, module, need, newline)
    return text


def _section(module: str) -> int:
    top = module.split(".")[0]
    if top == "__future__":
        return 0
    return 1 if top in sys.stdlib_module_names else 2


def _statement_key(stmt: ast.Import | ast.ImportFrom) -> tuple[int, str]:
    if isinstance(stmt, ast.Import):
        return 0, stmt.names[0].name.lower()
    return 1, ("." * stmt.level + (stmt.module or "")).lower()


def _member_key(name: str) -> tuple[int, str, str]:
    """isort's `order-by-type`: CONSTANTS, then Classes, then the rest; case ignored, then case."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name.lower(), name


def _import_block(module: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The top-level imports at the head of the module (after its docstring), in order."""
    block: list[ast.Import | ast.ImportFrom] = []
    for i, stmt in enumerate(module.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            block.append(stmt)
        elif i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        else:
            break
    return block


def _add_import(text: str, module: ast.Module, need: NeededImport, newline: str) -> str:
    lines = physical_lines(text, keepends=True)
    block = _import_block(module)
    if need.name is not None:
        for stmt in block:
            if (
                isinstance(stmt, ast.ImportFrom)
                and stmt.module == need.module
                and not stmt.level
                and not any(a.name == "*" for a in stmt.names)
            ):
                return _merge_from(lines, stmt, need.name, newline)
    statement = need.statement() + newline
    key = (0 if need.name is None else 1, need.module.lower())
    section = _section(need.module)
    top = need.module.split(".")[0]
    groups = _groups(block, lines)
    target = next((g for g in groups if any(_top(s) == top for s in g)), None)
    if target is None:
        target = next((g for g in groups if section < 2 and all(_stmt_section(s) == section for s in g)), None)
    if target is None and section == 2:  # third party: the first block past the standard library's
        target = next((g for g in groups if all(2 <= _stmt_section(s) < 4 for s in g)), None)
    if target is not None:
        after = next((s for s in target if _statement_key(s) > key), None)
        if after is not None:
            return _insert(lines, after.lineno - 1, [statement], newline)
        return _insert(lines, target[-1].end_lineno or target[-1].lineno, [statement], newline)
    # a block of its own, after the blocks of the sections before it (or before the first one after it)
    later = next((g for g in groups if min(_stmt_section(s) for s in g) > section), None)
    if later is not None:
        return _insert(lines, later[0].lineno - 1, [statement, newline], newline)
    if groups:
        end = groups[-1][-1].end_lineno or groups[-1][-1].lineno
        return _insert(lines, end, [newline, statement], newline)
    first = module.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):  # after the docstring
        return _insert(lines, first.end_lineno or first.lineno, [newline, statement], newline)
    return _insert(lines, _first_line(first) - 1, [statement, newline], newline)


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", [])
    return min([stmt.lineno] + [d.lineno - 1 for d in decorators]) if decorators else stmt.lineno


def _name(stmt: ast.Import | ast.ImportFrom) -> str:
    return stmt.names[0].name if isinstance(stmt, ast.Import) else stmt.module or ""


def _stmt_section(stmt: ast.Import | ast.ImportFrom) -> int:
    """As `_section`; a relative import is in the last section (local folder)."""
    return 4 if isinstance(stmt, ast.ImportFrom) and stmt.level else _section(_name(stmt))


def _top(stmt: ast.Import | ast.ImportFrom) -> str:
    return "" if isinstance(stmt, ast.ImportFrom) and stmt.level else _name(stmt).split(".")[0]


def _groups(block: list[ast.Import | ast.ImportFrom], lines: list[str]) -> list[list[ast.Import | ast.ImportFrom]]:
    """The import block split where a blank line separates two statements (isort's sections)."""
    groups: list[list[ast.Import | ast.ImportFrom]] = []
    for stmt in block:
        if groups:
            previous_end = groups[-1][-1].end_lineno or groups[-1][-1].lineno
            between = lines[previous_end : stmt.lineno - 1]
            if any(not line.strip() for line in between):
                groups.append([stmt])
                continue
            groups[-1].append(stmt)
        else:
            groups.append([stmt])
    return groups


def _insert(lines: list[str], index: int, new: list[str], newline: str) -> str:
    if index > 0 and index <= len(lines) and not lines[index - 1].endswith(("\n", "\r")):
        lines[index - 1] += newline  # the import goes after the file's last line
    lines[index:index] = new
    return "".join(lines)


def _merge_from(lines: list[str], stmt: ast.ImportFrom, name: str, newline: str) -> str:
    """`from M import a` + `b` -> `from M import a, b` (sorted), parenthesised when it no longer fits."""
    first, last = stmt.lineno - 1, (stmt.end_lineno or stmt.lineno) - 1
    if last > first and _one_name_a_line(lines, stmt):
        return _insert_member(lines, stmt, name, newline)  # keeps the comments of its lines
    original = "".join(lines[first : last + 1])
    names = [a.name if a.asname is None else f"{a.name} as {a.asname}" for a in stmt.names]
    names = sorted(names + [name], key=lambda n: _member_key(n.split(" ")[0]))
    head = f"from {stmt.module} import "
    single = head + ", ".join(names)
    comment = "  #" + original.split("#", 1)[1].rstrip("\r\n") if last == first and "#" in original else ""
    if last == first and len(single) + len(comment) <= LINE_LENGTH:
        new = [single + comment + newline]
    else:
        new = [head + "(" + newline] + [f"    {n},{newline}" for n in names] + [")" + newline]
    lines[first : last + 1] = new
    return "".join(lines)


def _one_name_a_line(lines: list[str], stmt: ast.ImportFrom) -> bool:
    """A parenthesised import written one name a line, the parentheses on lines of their own."""
    end = stmt.end_lineno or stmt.lineno
    rows = {a.lineno for a in stmt.names}
    return (
        len(rows) == len(stmt.names)
        and stmt.lineno not in rows
        and end not in rows
        and lines[stmt.lineno - 1].rstrip().endswith("(")
        and lines[end - 1].strip().startswith(")")
    )


def _insert_member(lines: list[str], stmt: ast.ImportFrom, name: str, newline: str) -> str:
    """A name line added to a one-name-a-line `from` import, before the first name that sorts after it."""
    later = [a for a in stmt.names if _member_key(a.name) > _member_key(name)]
    last = stmt.names[-1]
    indent = lines[last.lineno - 1][: len(lines[last.lineno - 1]) - len(lines[last.lineno - 1].lstrip())]
    if later:
        lines.insert(later[0].lineno - 1, f"{indent}{name},{newline}")
        return "".join(lines)
    row = lines[last.lineno - 1]
    code, hash_, comment = row.partition("#")
    if not code.rstrip().endswith(","):  # the last name had no trailing comma: it is no longer the last
        ending = row[len(row.rstrip("\r\n")) :]
        code = code.rstrip() + ","
        lines[last.lineno - 1] = (code + (" " * 2 + hash_ + comment.rstrip("\r\n") if hash_ else "")) + ending
    lines.insert(last.lineno, f"{indent}{name},{newline}")
    return "".join(lines)

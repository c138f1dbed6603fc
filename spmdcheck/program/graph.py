"""The module graph of the checked files: module names from paths, import edges, SCC order.

Pure of libcst: names come from the file system layout (packages are folders with an
`__init__.py`) and edges from CPython's `ast`, which is cheap enough to run on every file
before deciding which ones the analysis needs. Import resolution is shared with the
analysis (`resolve_import`) so both agree on what `from ..layers import X` names.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModuleFile:
    name: str  # dotted module name, e.g. "gpt.layers"; a package's own name for its __init__.py
    path: str
    is_package: bool  # the file is a package's __init__.py (relative imports start at itself)


def module_name_for(path: str, exists=os.path.exists) -> ModuleFile:  # noqa: ANN001 - injectable for tests
    """Name a file by walking up the folders that are packages (hold an `__init__.py`)."""
    norm = os.path.normpath(path)
    folder, filename = os.path.split(norm)
    stem = filename[:-3] if filename.endswith(".py") else filename
    is_package = stem == "__init__"
    parts: list[str] = [] if is_package else [stem]
    while folder and exists(os.path.join(folder, "__init__.py")):
        folder, package = os.path.split(folder)
        if not package:
            break
        parts.insert(0, package)
    name = ".".join(parts) if parts else stem
    return ModuleFile(name, path, is_package)


def import_root(path: str, exists=os.path.exists) -> str:  # noqa: ANN001 - injectable for tests
    """The folder `path`'s absolute imports start from: the one above its outermost package, or its
    own folder when it is in no package (where Python puts a script's folder on `sys.path`)."""
    folder = os.path.dirname(os.path.abspath(path))
    while exists(os.path.join(folder, "__init__.py")):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


def package_of(module: ModuleFile) -> str:
    """The package a module's relative imports start from."""
    if module.is_package:
        return module.name
    return module.name.rpartition(".")[0]


def resolve_import(importer: ModuleFile, module: str | None, level: int) -> str | None:
    """The absolute name `from <level dots><module> import ...` refers to, or None past the top."""
    if level == 0:
        return module
    base = package_of(importer).split(".") if package_of(importer) else []
    if level - 1 > len(base):
        return None
    base = base[: len(base) - (level - 1)]
    if module:
        base = [*base, *module.split(".")]
    return ".".join(base) if base else None


def imported_names(tree: ast.Module, importer: ModuleFile) -> set[str]:
    """Every module name an import statement could refer to (submodule candidates included)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            target = resolve_import(importer, node.module, node.level)
            if target is None:
                continue
            out.add(target)
            for alias in node.names:
                if alias.name != "*":
                    out.add(f"{target}.{alias.name}")
    return out


_IMPORT = re.compile(r"(?:^|;)[ \t]*import[ \t]+([\w. \t,]+)", re.MULTILINE)
_FROM = re.compile(r"(?:^|;)[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)", re.MULTILINE)


def imported_names_in_text(text: str, importer: ModuleFile) -> set[str]:
    """`imported_names` from the text alone: a scan for import statements, no parse.

    It may see an import inside a string or a docstring too: an extra edge only costs a little
    work, while a missed one would lose a finding. Ten times faster than `ast.parse`.
    """
    out: set[str] = set()
    for m in _IMPORT.finditer(text):
        for part in m.group(1).split(","):
            name = part.split(" as ")[0].strip()
            if name:
                out.add(name)
    for m in _FROM.finditer(text):
        target = resolve_import(importer, m.group(2) or None, len(m.group(1)))
        if target is None:
            continue
        out.add(target)
        for part in m.group(3).strip("() \t\\").replace("\\\n", " ").split(","):
            name = part.split(" as ")[0].strip()
            if name and name != "*" and name.isidentifier():
                out.add(f"{target}.{name}")
    return out


@dataclass
class ModuleGraph:
    modules: dict[str, ModuleFile] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)  # importer -> imported modules (checked ones only)

    def by_path(self) -> dict[str, ModuleFile]:
        return {m.path: m for m in self.modules.values()}

    def sccs(self) -> list[list[str]]:
        """Strongly connected components, each after the components it imports (Tarjan, iterative)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        on_stack: set[str] = set()
        stack: list[str] = []
        out: list[list[str]] = []
        counter = 0
        for root in sorted(self.modules):
            if root in index:
                continue
            work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(self.edges.get(root, ()))))]
            index[root] = low[root] = counter
            counter += 1
            stack.append(root)
            on_stack.add(root)
            while work:
                node, children = work[-1]
                advanced = False
                for child in children:
                    if child not in index:
                        index[child] = low[child] = counter
                        counter += 1
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(sorted(self.edges.get(child, ())))))
                        advanced = True
                        break
                    if child in on_stack:
                        low[node] = min(low[node], index[child])
                if advanced:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    out.append(sorted(component))
        return out

    def importers_closure(self, changed: Iterable[str]) -> set[str]:
        """Modules whose analysis may change when `changed` change: they and everything importing them."""
        reverse: dict[str, set[str]] = {}
        for importer, targets in self.edges.items():
            for target in targets:
                reverse.setdefault(target, set()).add(importer)
        seen = set(changed)
        todo = list(seen)
        while todo:
            for importer in reverse.get(todo.pop(), ()):
                if importer not in seen:
                    seen.add(importer)
                    todo.append(importer)
        return seen

    def imports_closure(self, name: str) -> set[str]:
        """Every checked module `name` depends on, itself excluded."""
        seen: set[str] = set()
        todo = [name]
        while todo:
            for target in self.edges.get(todo.pop(), ()):
                if target not in seen and target != name:
                    seen.add(target)
                    todo.append(target)
        return seen


def build_graph(sources: Mapping[str, str | bytes], exists=os.path.exists, exact: bool = False) -> ModuleGraph:  # noqa: ANN001
    """The graph of `sources` (path -> text). With `exact`, edges come from `ast` (a file it cannot parse
    has none); otherwise from the import scan, which may add edges but never misses one."""
    graph = ModuleGraph()
    files = [module_name_for(path, exists) for path in sources]
    for module in files:
        graph.modules.setdefault(module.name, module)
    for module in files:
        if graph.modules.get(module.name) is not module:
            continue  # two files with one name (scripts in different folders): the first wins
        source = sources[module.path]
        if exact:
            try:
                names = imported_names(ast.parse(source), module)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                names = set()
        else:
            text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
            names = imported_names_in_text(text, module)
        graph.edges[module.name] = {name for name in names if name in graph.modules and name != module.name}
    return graph

"""The module graph: names from package folders, relative imports, SCC order."""

from __future__ import annotations

from spmdcheck.program.graph import ModuleFile, build_graph, module_name_for, resolve_import


def _exists_in(files: set[str]):
    return lambda p: p in files


def test_module_names_follow_package_folders() -> None:
    files = {"src/gpt/__init__.py", "src/gpt/layers/__init__.py", "src/gpt/layers/mlp.py", "src/train.py"}
    exists = _exists_in(files)
    assert module_name_for("src/gpt/layers/mlp.py", exists) == ModuleFile(
        "gpt.layers.mlp", "src/gpt/layers/mlp.py", False
    )
    assert module_name_for("src/gpt/layers/__init__.py", exists).name == "gpt.layers"
    assert module_name_for("src/gpt/layers/__init__.py", exists).is_package
    assert module_name_for("src/train.py", exists).name == "train"


def test_relative_imports_resolve_from_the_package() -> None:
    mlp = ModuleFile("gpt.layers.mlp", "x", False)
    init = ModuleFile("gpt.layers", "y", True)
    assert resolve_import(mlp, "utils", 1) == "gpt.layers.utils"
    assert resolve_import(mlp, None, 1) == "gpt.layers"
    assert resolve_import(mlp, "model", 2) == "gpt.model"
    assert resolve_import(init, "mlp", 1) == "gpt.layers.mlp"
    assert resolve_import(init, "model", 2) == "gpt.model"
    assert resolve_import(mlp, "x", 4) is None  # beyond the top-level package
    assert resolve_import(mlp, "torch.nn", 0) == "torch.nn"


def test_edges_and_scc_order() -> None:
    sources = {
        "p/__init__.py": "",
        "p/a.py": "from .b import f\nimport torch\n",
        "p/b.py": "from . import c\n",
        "p/c.py": "from p.b import g\n",  # b <-> c: one component
        "p/d.py": "from .a import f as h\n",
    }
    graph = build_graph(sources, exists=_exists_in(set(sources)))
    assert graph.edges["p.a"] == {"p.b"}
    assert graph.edges["p.b"] == {"p", "p.c"}
    assert graph.edges["p.c"] == {"p.b"}
    order = graph.sccs()
    position = {name: i for i, comp in enumerate(order) for name in comp}
    assert ["p.b", "p.c"] in order
    assert position["p.b"] < position["p.a"] < position["p.d"]
    assert graph.importers_closure({"p.c"}) == {"p.c", "p.b", "p.a", "p.d"}
    assert graph.imports_closure("p.d") == {"p.a", "p.b", "p.c", "p"}


def test_unparsable_file_has_no_edges() -> None:
    sources = {"m.py": "def (:\n", "n.py": "import m\n"}
    graph = build_graph(sources, exists=lambda p: False)
    assert graph.edges == {"m": set(), "n": {"m"}}


def test_import_scan_sees_what_ast_sees() -> None:
    from spmdcheck.program.graph import imported_names, imported_names_in_text

    text = (
        "import os, sys as s\n"
        "from . import c, d as e\n"
        "from ..x import (\n    f,\n    g as h,\n)\n"
        "from .y import *  # comment\n"
        "if True:\n    from z.w import q; import r\n"
        "x = 1; from .t import u\n"
    )
    module = ModuleFile("p.a.b", "p/a/b.py", False)
    import ast

    assert imported_names(ast.parse(text), module) <= imported_names_in_text(text, module)

"""Selective re-analysis after edits inside function bodies (spmdcheck/engine/incremental.py), through the real
command line: after every edit the warm run prints the same bytes as a `--no-cache` run, and the
trace (`SPMDCHECK_TRACE=1`) shows which way each program was answered, so a test of the fast path
cannot pass by running everything."""

from __future__ import annotations

import ast
import json
import pathlib
import random
import shutil
import subprocess
import textwrap
from collections.abc import Iterator

import pytest
from cli_helpers import REDUCING_LAYERS, run
from deferral_check import deferred_runs_that_differ

from spmdcheck.api import Settings

ROOT = pathlib.Path(__file__).resolve().parent.parent
TRACE = {"SPMDCHECK_TRACE": "1"}


def check(cwd: pathlib.Path, *extra: str) -> subprocess.CompletedProcess:
    return run(["check", ".", "--output-format", "json", *extra], cwd, env=TRACE)


def same_as_fresh(cwd: pathlib.Path) -> str:
    """The warm run's trace, after asserting its output equals a cold run's."""
    warm = check(cwd)
    cold = check(cwd, "--no-cache")
    assert "Traceback" not in warm.stderr + cold.stderr
    assert warm.returncode == cold.returncode
    assert warm.stdout == cold.stdout, (warm.stdout, cold.stdout)
    return warm.stderr


def write(root: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


LAYERS = (
    REDUCING_LAYERS
    + """

def sync(t):
    dist.all_reduce(t, group=GROUP)
    return t


def scale(t):
    return t * 2
"""
)

MODEL = """\
    import torch
    import torch.distributed as dist

    from pkg.layers import GROUP, reduce_loss, scale


    def train():
        y = torch.ones(3)
        dist.all_reduce(y, group=GROUP)
        return reduce_loss(y)


    def other():
        z = torch.ones(3)
        dist.all_reduce(z, group=GROUP)
        return scale(z)
"""


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    write(tmp_path, {"pkg/__init__.py": "", "pkg/layers.py": LAYERS, "pkg/model.py": MODEL})
    first = check(tmp_path)
    assert "whole program" in first.stderr
    return tmp_path


def edit(path: pathlib.Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def edited(root: pathlib.Path, name: str, old: str, new: str) -> str:
    """`edit` the file `name` of the project at `root`, then the warm run's trace (its output a cold run's)."""
    edit(root / name, old, new)
    return same_as_fresh(root)


def test_an_edit_inside_a_body_runs_only_the_roots_that_reach_it(project: pathlib.Path) -> None:
    # `scale` is reached only from `other`: `train` and the top level are not run again
    edit(project / "pkg/layers.py", "    return t * 2", "    t = t + 1\n    return t * 2")
    trace = same_as_fresh(project)
    assert "selective" in trace
    ran = int(trace.split("selective: ")[1].split(" of ")[0])
    assert 1 <= ran < 5
    # and a second edit of the same body, from the record the selective run left (undoing the first edit
    # instead would be answered by the cached results of the first state)
    edit(project / "pkg/layers.py", "    t = t + 1\n", "    t = t - 1\n")
    assert "selective" in same_as_fresh(project)


def test_an_edit_that_changes_a_finding_elsewhere(project: pathlib.Path) -> None:
    # `reduce_loss` no longer reduces: the double all-reduce found in layers.py through model.py goes away
    before = json.loads(check(project).stdout)
    edit(project / "pkg/layers.py", "    dist.all_reduce(loss, group=GROUP)\n", "    loss = loss + 0\n")
    trace = same_as_fresh(project)
    assert "selective" in trace
    after = json.loads(check(project).stdout)
    assert before != after


def test_a_call_into_a_body_left_out_falls_back_to_the_whole_program(project: pathlib.Path) -> None:
    # `other` now calls `sync`, whose body no recorded root of `other` needed (it was left out)
    edit(project / "pkg/model.py", "    return scale(z)", "    from pkg.layers import sync\n    return sync(scale(z))")
    trace = same_as_fresh(project)
    assert "abandoned" in trace and "whole program" in trace


def test_an_edit_outside_bodies_runs_the_roots_that_read_the_module(project: pathlib.Path) -> None:
    # a new module-level name in layers.py: what runs code of layers.py or of a file importing it runs again
    edit(project / "pkg/layers.py", 'GROUP = mesh.get_group("tp")', 'GROUP = mesh.get_group("tp")\nEXTRA = 1')
    assert "selective" in same_as_fresh(project)
    # a module-level value every reduction reads changes: the findings of both files change with it
    before = json.loads(check(project).stdout)
    edit(project / "pkg/layers.py", 'GROUP = mesh.get_group("tp")', "GROUP = None")
    assert "selective" in same_as_fresh(project)
    assert json.loads(check(project).stdout) != before


def test_functions_added_and_removed_run_selectively(project: pathlib.Path) -> None:
    # the record is renamed for the new bodies (incremental.rekey): a new function's root runs, and the roots
    # that read its name; a removed function's roots are gone, and the roots that ran it run again
    layers = project / "pkg/layers.py"
    edit(layers, "def scale(t):", "def extra(t):\n    dist.all_reduce(t)\n    return t\n\n\ndef scale(t):")
    trace = same_as_fresh(project)
    assert "selective" in trace
    edit(project / "pkg/model.py", "    return scale(z)", "    from pkg.layers import extra\n\n    return extra(z)")
    same_as_fresh(project)
    edit(layers, "def extra(t):\n    dist.all_reduce(t)\n    return t\n\n\n", "")
    trace = same_as_fresh(project)
    assert "selective" in trace
    # a method added to a class of the file, before its others
    edit(layers, "def sync(t):", "class Holder:\n    def keep(self, t):\n        return t\n\n\ndef sync(t):")
    assert "selective" in same_as_fresh(project)
    edit(layers, "class Holder:\n", "class Holder:\n    def first(self, t):\n        return self.keep(t)\n\n")
    assert "selective" in same_as_fresh(project)


def test_a_function_added_beside_a_one_line_function_is_placed_by_a_checked_guess(project: pathlib.Path) -> None:
    # a one-line function is queued too, but has no body of its own: a new function is placed before the next
    # kept body, after the one-line function; the run checks the guess, and the whole program runs when it fails
    edit(project / "pkg/layers.py", "def scale(t):", "def short(t): return t\n\n\ndef scale(t):")
    same_as_fresh(project)
    trace = edited(project, "pkg/layers.py", "def scale(t):", "def extra(t):\n    return t\n\n\ndef scale(t):")
    assert "selective" in trace
    trace = edited(project, "pkg/layers.py", "def short(t):", "def early(t):\n    return t\n\n\ndef short(t):")
    assert "whole program" in trace and "selective:" not in trace


TOP_WRITER = {
    "pkg/__init__.py": "",
    "pkg/state.py": """\
        import torch


        class Box:
            def __init__(self):
                self.t = torch.ones(2)


        BOX = Box()
    """,
    "pkg/setup.py": """\
        import torch.distributed as dist

        from pkg import state

        GROUP = dist.new_group([0, 1])
        state.BOX.t = dist.all_reduce  # the top level writes to an object another module's top level made
    """,
    "pkg/use.py": """\
        import torch.distributed as dist

        from pkg.setup import GROUP
        from pkg.state import BOX


        def use():
            dist.all_reduce(BOX.t, group=GROUP)
            return BOX.t
    """,
}


def test_a_top_level_writing_to_another_module_keeps_edits_outside_bodies_whole(tmp_path: pathlib.Path) -> None:
    write(tmp_path, TOP_WRITER)
    check(tmp_path)
    edit(tmp_path / "pkg/setup.py", "GROUP = dist.new_group([0, 1])", "GROUP = dist.new_group([0, 1, 2])")
    trace = same_as_fresh(tmp_path)
    assert "whole program" in trace and "selective" not in trace


# The same write, made by a script's `__main__` block: it runs when the file is the script, never when another
# module imports it, so it is a root of its own (interp/branches.py `_defer_main`), not a top-level writer.
MAIN_WRITER = {
    **TOP_WRITER,
    "pkg/setup.py": """\
        import torch
        import torch.distributed as dist

        from pkg import state

        GROUP = dist.new_group([0, 1])


        def main():
            state.BOX.t = dist.all_reduce
            y = torch.ones(2)
            if dist.get_rank() == 0:
                dist.all_reduce(y)  # error: SPMD501


        if __name__ == "__main__":
            main()
            z = torch.ones(2)
            if dist.get_rank() == 0:
                dist.broadcast(z, src=0)  # error: SPMD501
    """,
}


def test_a_main_block_is_a_root_of_its_own(tmp_path: pathlib.Path) -> None:
    write(tmp_path, MAIN_WRITER)
    out = json.loads(check(tmp_path, "--no-cache").stdout)
    found = {(d["path"], d["line"], d["code"]) for d in out["diagnostics"]}
    assert found == {("pkg/setup.py", 13, "SPMD501"), ("pkg/setup.py", 20, "SPMD501")}
    check(tmp_path)
    edit(tmp_path / "pkg/state.py", "BOX = Box()", "BOX = Box()\nOTHER = 1")
    trace = same_as_fresh(tmp_path)
    assert "selective" in trace and "whole program" not in trace, trace


# An import cycle (a.py and b.py: which one's names the other sees partly run depends on which started
# first), c.py, which a.py imports (one program) but whose names nothing reads, and d.py, which imports a.py
# (nothing imports d.py).
CYCLE = {
    "pkg/__init__.py": "",
    "pkg/a.py": """\
        import torch.distributed as dist

        from pkg.b import helper
        from pkg.c import other

        GROUP = dist.new_group([0, 1])
        __all__ = ["other"]


        def train(t):
            dist.all_reduce(t, group=GROUP)
            return helper(t)
    """,
    "pkg/b.py": """\
        import torch.distributed as dist

        from pkg.a import GROUP


        def helper(t):
            dist.all_reduce(t, group=GROUP)
            return t * 2
    """,
    "pkg/c.py": """\
        import torch
        import torch.distributed as dist


        def other():
            z = torch.ones(3)
            dist.all_reduce(z)
            dist.all_reduce(z)
            return z
    """,
    "pkg/d.py": """\
        import torch
        import torch.distributed as dist

        from pkg.a import GROUP


        def evaluate():
            y = torch.ones(2)
            dist.all_reduce(y, group=GROUP)
            return y
    """,
}


def _top_levels(trace: str) -> tuple[int, int]:
    """(files whose top levels ran, files) from a selective run's trace."""
    ran, of = trace.split("top levels of ")[1].split(" files")[0].split(" of ")
    return int(ran), int(of)


def test_a_selective_run_runs_only_the_top_levels_its_roots_read(tmp_path: pathlib.Path) -> None:
    write(tmp_path, CYCLE)
    check(tmp_path)
    trace = edited(tmp_path, "pkg/c.py", "    return z", "    z = z + 1\n    return z")
    assert "selective" in trace and _top_levels(trace) == (1, 4)  # c.py alone: it imports no other file
    # a body in the cycle: both of its files run (in the order they ran before: the same names partly run);
    # a.py's import of c.py waits for a read of `other` that never comes
    trace = edited(tmp_path, "pkg/b.py", "    return t * 2", "    t = t + 1\n    return t * 2")
    assert "selective" in trace and _top_levels(trace) == (2, 4)
    trace = edited(tmp_path, "pkg/a.py", "    return helper(t)", "    t = t - 1\n    return helper(t)")
    assert "selective" in trace and _top_levels(trace) == (2, 4)
    # `evaluate` reads GROUP: a.py runs then, and with it b.py, the member of its cycle that it imports
    trace = edited(tmp_path, "pkg/d.py", "    return y", "    y = y * 2\n    return y")
    assert "selective" in trace and _top_levels(trace) == (3, 4)


def test_an_edit_outside_bodies_runs_the_top_levels_of_its_readers_only(tmp_path: pathlib.Path) -> None:
    write(tmp_path, CYCLE)
    check(tmp_path)
    # a pure statement binding a name no code reads: d.py's top level runs (nothing imports d.py), no root
    trace = edited(tmp_path, "pkg/d.py", "from pkg.a import GROUP\n", "from pkg.a import GROUP\n\nSCALE = 2\n")
    assert "selective: 0 of" in trace and _top_levels(trace) == (1, 4)
    # once `evaluate` reads SCALE, a new value runs it again, and a.py's top level (with b.py, its cycle) when
    # it reads GROUP
    edited(tmp_path, "pkg/d.py", "    return y", "    return y * SCALE")
    trace = edited(tmp_path, "pkg/d.py", "SCALE = 2\n", "SCALE = 3\n")
    assert "selective: 1 of" in trace and _top_levels(trace) == (3, 4)
    # a statement that calls something may change whatever it reaches: every root that ran code of d.py
    trace = edited(tmp_path, "pkg/d.py", "SCALE = 3\n", "SCALE = int(3)\n")
    assert "selective: 1 of" in trace and _top_levels(trace) == (3, 4)
    # a pure edit of a name a top level reads (b.py's and d.py's `from pkg.a import GROUP`): as for a call, the
    # roots that ran code of a.py or of a file importing it (not c.py's `other`)
    trace = edited(tmp_path, "pkg/a.py", "__all__ = [\"other\"]", "__all__ = [\"other\"]\nGROUP = GROUP")
    assert "selective: 3 of 5" in trace and _top_levels(trace) == (3, 4)
    # a new import may change which module of a cycle starts first: every top level runs
    trace = edited(tmp_path, "pkg/d.py", "SCALE = int(3)\n", "SCALE = int(3)\nimport pkg.c\n")
    assert "top levels of all files" in trace or "whole program" in trace


def test_deferred_imports_give_the_whole_runs_findings_on_every_fixture() -> None:
    # every root of every fixture program run again, the imported modules run only when a name is read
    compared, differ = deferred_runs_that_differ(ROOT / "fixtures", Settings())
    assert compared > 100 and differ == []


def test_a_damaged_record_is_ignored(project: pathlib.Path) -> None:
    records = list((project / ".spmdcheck_cache").glob("records-*/*.json"))
    assert records
    for record in records:
        record.write_text('{"version": 5, "key": "x", "record": [1, 2')
    edit(project / "pkg/layers.py", "    return t * 2", "    return t * 3")
    trace = same_as_fresh(project)
    assert "whole program" in trace


SHARED = """\
    import torch
    import torch.distributed as dist

    GROUP = dist.new_group([0, 1])


    class Holder:
        def __init__(self):
            self.t = torch.ones(2)


    HOLDER = Holder()


    def setup():
        HOLDER.t = torch.zeros(2)  # a write to an object the top level made: undone when this check ends
        dist.all_reduce(HOLDER.t, group=GROUP)


    def use():
        dist.all_reduce(HOLDER.t, group=GROUP)
        return HOLDER.t + 1
"""


def test_writes_to_objects_other_checks_see_are_undone(tmp_path: pathlib.Path) -> None:
    write(tmp_path, {"w.py": SHARED})
    check(tmp_path)
    edit(tmp_path / "w.py", "    return HOLDER.t + 1", "    return HOLDER.t + 2")
    assert "selective" in same_as_fresh(tmp_path)


def test_a_program_whose_checks_attach_contracts_reruns_its_writers(tmp_path: pathlib.Path) -> None:
    # torchtitan's config fields: a function's check attaches a module contract every later check sees (a
    # writer). An edit elsewhere runs the writers again with the affected roots, in queue order; an edit of a
    # writer's own body has the whole program run.
    fixture = ROOT / "fixtures" / "torchtitan_style" / "config_fields_ok.py"
    (tmp_path / "m.py").write_text(fixture.read_text())
    assert "whole program" in check(tmp_path).stderr
    outcomes = []
    for name in ("set_dense_ffn_sharding", "set_layer_sharding", "forward"):
        text = (tmp_path / "m.py").read_text()
        tree = ast.parse(text)
        fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
        lines = text.splitlines(keepends=True)
        at = fn.body[-1].lineno - 1
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        (tmp_path / "m.py").write_text("".join([*lines[:at], indent + f"_edited_{name} = 0\n", *lines[at:]]))
        outcomes.append("selective" in same_as_fresh(tmp_path))
    assert any(outcomes), outcomes


def test_an_edit_reaching_a_writer_stands_when_the_writer_writes_as_before(tmp_path: pathlib.Path) -> None:
    """A writer's body edited: the selective run re-runs it and keeps its result when it attached the same
    contracts (analysis/writes.py); one that attaches another contract ends it, and the whole program runs."""
    fixture = ROOT / "fixtures" / "torchtitan_style" / "config_fields_ok.py"
    (tmp_path / "m.py").write_text(fixture.read_text())
    check(tmp_path)
    writer_line = "    feed_forward_cfg.w2.sharding_config = rowwise_config()\n"
    trace = edited(tmp_path, "m.py", writer_line, writer_line + "    _unrelated = 1\n")
    assert "selective: " in trace and "abandoned" not in trace, trace
    trace = edited(
        tmp_path,
        "m.py",
        "    feed_forward_cfg.w1.sharding_config = colwise_config()",
        "    feed_forward_cfg.w1.sharding_config = rowwise_config()",
    )
    assert "selective run abandoned (a writer)" in trace and "whole program" in trace, trace


def _random_files(root: pathlib.Path, rng: random.Random) -> Iterator[tuple[pathlib.Path, str, ast.Module]]:
    """Python files of `root` drawn at random, without end, with their text and syntax tree (those that parse)."""
    files = sorted(p for p in root.rglob("*.py") if ".spmdcheck_cache" not in p.parts)
    while True:
        path = rng.choice(files)
        text = path.read_text()
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        yield path, text, tree


def _body_edits(root: pathlib.Path, count: int, seed: int) -> list[tuple[pathlib.Path, str]]:
    """Deterministic edits inside function bodies: a statement inserted, duplicated or replaced."""
    rng = random.Random(seed)
    edits = []
    for path, text, tree in _random_files(root, rng):
        if len(edits) == count:
            break
        defs = [
            d
            for d in ast.walk(tree)
            if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.body[0].lineno > d.lineno
        ]
        if not defs:
            continue
        fn = rng.choice(defs)
        stmt = rng.choice(fn.body)
        lines = text.splitlines(keepends=True)
        line = lines[stmt.lineno - 1]
        indent = line[: len(line) - len(line.lstrip())]
        kind = rng.choice(["insert", "duplicate", "replace"])
        one_line = stmt.end_lineno == stmt.lineno
        if kind == "duplicate" and one_line and not isinstance(stmt, (ast.Return, ast.Raise)):
            lines.insert(stmt.lineno - 1, line)
        elif kind == "replace" and one_line and len(fn.body) > 1:
            lines[stmt.lineno - 1] = indent + "pass\n"
        else:
            lines.insert(stmt.lineno - 1, indent + "_edited = 0\n")
        edits.append((path, "".join(lines)))
    return edits


def _module_level_edits(root: pathlib.Path, count: int, seed: int) -> list[tuple[pathlib.Path, str]]:
    """Deterministic edits outside bodies, pure and not: a new name bound, a name bound again to another value (a
    function's name to None), a statement emptied, a class attribute added, a parameter added to a function's
    header, a statement that calls something."""
    rng = random.Random(seed)
    edits: list[tuple[pathlib.Path, str]] = []
    for path, text, tree in _random_files(root, rng):
        if len(edits) == count:
            break
        if not tree.body:
            continue
        lines = text.splitlines(keepends=True)
        kind = rng.choice(["new", "rebind", "empty", "attribute", "header", "call", "shadow", "shadow"])
        n = len(edits)
        if kind == "shadow":  # a function's name bound again at the end (to None, or to what returns its argument)
            found = [s.name for s in tree.body if isinstance(s, ast.FunctionDef)]
            found += [a.asname or a.name for s in tree.body if isinstance(s, ast.ImportFrom) for a in s.names]
            if not found:
                continue
            value = rng.choice(["None", "lambda x, *args, **kwargs: x"])
            lines.append(f"\n{rng.choice(found)} = {value}\n")
        elif kind in ("new", "call"):
            stmt = rng.choice(tree.body)
            first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
            value = f"int({n})" if kind == "call" else str(n)
            lines.insert(first - 1, f"_edited_{n} = {value}\n")
        elif kind == "rebind":
            found = [
                s
                for s in tree.body
                if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name) and s.lineno == s.end_lineno
            ]
            if not found:
                continue
            stmt = rng.choice(found)
            lines[stmt.lineno - 1] = f"{stmt.targets[0].id} = None\n"  # type: ignore[attr-defined]
        elif kind == "empty":
            found = [s for s in tree.body if s.lineno == s.end_lineno and not hasattr(s, "body")]
            if not found:
                continue
            lines[rng.choice(found).lineno - 1] = "pass\n"
        elif kind == "attribute":
            found = [s for s in tree.body if isinstance(s, ast.ClassDef) and s.body[0].lineno > s.lineno]
            if not found:
                continue
            first = rng.choice(found).body[0]
            at = min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", [])])
            indent = lines[at - 1][: len(lines[at - 1]) - len(lines[at - 1].lstrip())]
            lines.insert(at - 1, f"{indent}_edited_{n} = {n}\n")
        else:
            found = [
                s
                for s in ast.walk(tree)
                if isinstance(s, ast.FunctionDef)
                and s.body[0].lineno > s.lineno
                and lines[s.lineno - 1].rstrip().endswith("):")
                and s.args.kwarg is None
                and s.args.vararg is None
            ]
            if not found:
                continue
            stmt = rng.choice(found)
            head = lines[stmt.lineno - 1].rstrip()[:-2]
            lines[stmt.lineno - 1] = head + ("" if head.endswith("(") else ", ") + f"_edited_{n}=None):\n"
        edits.append((path, "".join(lines)))
    return edits


@pytest.mark.parametrize(("edits", "seed"), [("bodies", 5), ("module_level", 8)])
def test_random_edits_of_the_fixtures_match_fresh_runs(tmp_path: pathlib.Path, edits: str, seed: int) -> None:
    """The differential test: edit the fixture programs one after another, inside bodies or outside them (a pure
    statement runs the roots that read its names, another the roots that ran code of its file or of an
    importer); after each, the warm (mostly selective) run equals a cold one."""
    make = _body_edits if edits == "bodies" else _module_level_edits
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures")
    check(tmp_path)
    selective = 0
    for path, text in make(tmp_path / "fixtures", 12, seed=seed):
        path.write_text(text)
        selective += "selective" in same_as_fresh(tmp_path)
    assert selective >= 4, selective


def test_trace_is_silent_by_default(project: pathlib.Path) -> None:
    edit(project / "pkg/layers.py", "    return t * 2", "    return t * 4")
    result = run(["check", "."], project)
    assert "spmdcheck-trace" not in result.stderr


# ------------------------------------------------------------------ the plan, without the command line
def _outline(text: str):  # noqa: ANN202
    from spmdcheck.engine import incremental
    from spmdcheck.program import prepass

    scan = prepass.scan("m.py", text.encode(), frozenset())
    return incremental.outline(text, text, scan.spans() or ()), list(scan.spans() or ())


def _record(text: str, roots: list):  # noqa: ANN202
    from spmdcheck.engine import incremental

    outline, spans = _outline(text)
    return incremental.ProgramRecord(["m.py"], [outline], [spans], {"m.py": []}, roots)


SOURCE = "import x\n\n\ndef f():\n    return 1\n\n\nclass C:\n    def g(self):\n        return 2\n"


def test_outline_separates_bodies_from_the_rest() -> None:
    base, spans = _outline(SOURCE)
    assert spans == [(5, 5), (10, 10)]
    body, _ = _outline(SOURCE.replace("return 1", "return 3"))
    assert body.skeleton == base.skeleton and body.bodies[0] != base.bodies[0] and body.bodies[1] == base.bodies[1]
    outside, _ = _outline(SOURCE.replace("import x", "import y"))
    assert outside.skeleton != base.skeleton and outside.bodies == base.bodies
    # a form feed is no line end for CPython: the spans still name the bodies
    fed, fed_spans = _outline(SOURCE.replace("import x", "import x \x0c"))
    assert fed_spans == spans and fed.bodies == base.bodies


def test_plan_names_the_roots_that_ran_a_changed_body() -> None:
    from spmdcheck.engine import incremental

    roots = [((), [], [], []), ((0, 0), [(0, 0)], [], []), ((0, 1), [(0, 1)], [], []), ((0, 2), [(0, 1)], [(0, 0)], [])]
    record = _record(SOURCE, roots)
    edited = SOURCE.replace("return 1", "return 3")
    outline, _ = _outline(edited)
    plan = incremental.plan_selective(record, ["m.py"], [outline], [edited])
    assert plan is not None
    # (0, 2) reused a result (0, 0) computed: it runs again too
    assert plan.run_only == {(0, 0), (0, 2)} and plan.changed == {"m.py"}
    # the top level ran the changed body: the whole program answers
    record.roots[0] = ((), [(0, 0)], [], [])
    assert incremental.plan_selective(record, ["m.py"], [outline], [edited]) is None


def test_plan_leaves_out_the_bodies_of_the_edited_file_no_rerun_root_reads() -> None:
    from spmdcheck.analysis.roots import ELIDED
    from spmdcheck.engine import incremental

    roots = [((), [], [], []), ((0, 0), [(0, 0)], [], []), ((0, 1), [(0, 1)], [], [])]
    record = _record(SOURCE, roots)
    edited = SOURCE.replace("return 1", "return 3")
    outline, spans = _outline(edited)
    plan = incremental.plan_selective(record, ["m.py"], [outline], [edited], [spans])
    assert plan is not None and plan.run_only == {(0, 0)}
    text = plan.elided["m.py"]
    assert "return 3" in text and "return 2" not in text and ELIDED in text
    assert text.count("\n") == edited.count("\n")  # every line where it was: positions hold
    # without the edited file's spans now, its text stays whole
    plan = incremental.plan_selective(record, ["m.py"], [outline], [edited])
    assert plan is not None and "m.py" not in plan.elided


def test_plan_refuses_edited_writers_and_edits_outside_bodies_it_cannot_bound() -> None:
    from spmdcheck.engine import incremental

    roots = [((), [], [], []), ((0, 0), [(0, 0)], [], []), ((0, 1), [(0, 1)], [], [])]
    record = _record(SOURCE, roots)
    outside = SOURCE.replace("import x", "import y")
    assert incremental.plan_selective(record, ["m.py"], [_outline(outside)[0]], [outside]) is None  # no importers
    # a writer (a root that attached a contract) runs again with the affected roots, unless the edit reaches it
    record.writers = [(0, 1)]
    edited = SOURCE.replace("return 1", "return 3")
    plan = incremental.plan_selective(record, ["m.py"], [_outline(edited)[0]], [edited])
    assert plan is not None and plan.run_only == {(0, 0), (0, 1)} and plan.top_only is None
    edited = SOURCE.replace("return 2", "return 4")
    assert incremental.plan_selective(record, ["m.py"], [_outline(edited)[0]], [edited]) is None
    # ... or every write of the writer it reaches is described: the run then checks they are the same (analyse.py)
    record.writes = [[[0, 1], [["slot", "m.py:Block.Config.w1", "contract(...)"]]]]
    plan = incremental.plan_selective(record, ["m.py"], [_outline(edited)[0]], [edited])
    assert plan is not None and (0, 1) in plan.run_only
    record.writes = [[[0, 1], [["slot", None, "contract(...)"]]]]
    assert incremental.plan_selective(record, ["m.py"], [_outline(edited)[0]], [edited]) is None


def test_merge_keeps_the_first_report_in_queue_order() -> None:
    from spmdcheck.engine import incremental

    old = _record(SOURCE, [((), [], [], []), ((0, 0), [], [], [["m.py", "k", ["old-0"]]]), ((0, 1), [], [], [])])
    fresh = [((0, 1), [], [], [["m.py", "k", ["new-1"]], ["m.py", "j", ["new-1b"]]]), ((1, 1, 0), [], [], [])]
    merged = incremental.merge(old, fresh, {(0, 1), (1, 1, 0)})
    assert [r[0] for r in merged] == [(), (0, 0), (0, 1), (1, 1, 0)]
    assert incremental.merged_diagnostics(merged) == {"m.py": [["old-0"], ["new-1b"]]}


def test_a_record_that_does_not_have_the_shape_is_none() -> None:
    from spmdcheck.engine import incremental

    assert incremental.ProgramRecord.from_plain({"version": 1, "paths": 3}) is None
    assert incremental.ProgramRecord.from_plain([]) is None
    good = _record(SOURCE, [((), [], [], [])]).plain()
    assert incremental.ProgramRecord.from_plain(good) is not None


def test_a_file_named_alone_is_checked_selectively_too(project: pathlib.Path) -> None:
    # pre-commit names the changed files: their project context forms the same programs run after run
    def named() -> subprocess.CompletedProcess:
        return run(["check", "pkg/layers.py", "--output-format", "json"], project, env=TRACE)

    named()
    edit(project / "pkg/layers.py", "    return t * 2", "    return t * 5")
    warm = named()
    cold = run(["check", "pkg/layers.py", "--output-format", "json", "--no-cache"], project)
    assert "selective" in warm.stderr
    assert warm.stdout == cold.stdout and warm.returncode == cold.returncode


def test_a_series_of_edits_keeps_the_blanked_spans_right(project: pathlib.Path) -> None:
    # the pre-pass's taint is kept across edits that keep what it reads; the bodies to blank move with the
    # lines, and a later run that scans only another file must blank the moved bodies where they are now
    edit(project / "pkg/layers.py", "    return t * 2", "    fresh_name = t\n\n    return fresh_name * 2")
    same_as_fresh(project)
    edit(project / "pkg/model.py", "def other():", "# a comment\ndef other():")
    same_as_fresh(project)
    edit(project / "pkg/model.py", "    return scale(z)", "    another_name = scale(z)\n    return another_name")
    same_as_fresh(project)
    edit(project / "pkg/layers.py", "def sync(t):", "def sync(t):\n    '''Doc.'''\n")
    same_as_fresh(project)


def test_a_function_checked_again_names_the_functions_it_queues() -> None:
    # a forward checked again once a contract reached it (`("again", n)`) may define nested functions
    from spmdcheck.analysis.roots import RootLog

    log = RootLog()
    log.enter(("again", 7))
    assert [log.queue_key(object()), log.queue_key(object())] == [("in", "again", 7, 0), ("in", "again", 7, 1)]
    log.enter((0, 3))
    assert log.queue_key(object()) == (1, 3, 0)


def test_top_levels_queuing_in_another_order_end_a_selective_run() -> None:
    # an import moved can make one module's top level run before another's: the keys (queue places) of the
    # recorded run would then name other functions, so the whole program answers
    from spmdcheck.analysis.roots import TOP, ElidedBody, RootLog

    first, second = object(), object()
    log = RootLog({id(first): (0, 0), id(second): (1, 0)}, run_only=set(), known={(0, 0), (0, 1)})
    log.recorded_top_files = [0, 1]
    assert log.current == TOP and log.queue_key(first) == (0, 0) and log.queue_key(second) == (0, 1)
    log = RootLog({id(first): (0, 0), id(second): (1, 0)}, run_only=set(), known={(0, 0), (0, 1)})
    log.recorded_top_files = [0, 1]
    with pytest.raises(ElidedBody):
        log.queue_key(second)


def test_a_setting_written_in_the_header_runs_the_files_roots_again(project: pathlib.Path) -> None:
    # the opening comments hold the file's settings: no statement changed, yet every check of its code may
    path = project / "pkg/model.py"
    path.write_text("# spmdcheck: strict\n" + path.read_text())
    trace = same_as_fresh(project)
    assert "selective: 0 of" not in trace


NAMED = {
    "pkg/__init__.py": "",
    "pkg/ops.py": """\
        import torch.distributed as dist


        def finish(t):
            return t


        def total(t):
            dist.all_reduce(t)
            return t
    """,
    "pkg/train.py": """\
        import torch
        import torch.distributed as dist


        def step():
            from pkg.ops import finish

            y = torch.ones(3)
            if dist.get_rank() == 0:
                y = finish(y)
            return y


        def other():
            z = torch.ones(2)
            dist.all_reduce(z)
            return z
    """,
}


def test_a_pure_statement_runs_again_the_roots_that_read_its_name(tmp_path: pathlib.Path) -> None:
    # `finish` bound again at the end of ops.py (a pure statement): `step` reads the name and now issues a
    # collective under a rank condition (a finding in train.py, a file the edit did not move); `other` and the
    # functions of ops.py do not read it and keep their recorded results
    write(tmp_path, NAMED)
    assert "SPMD501" not in check(tmp_path).stdout
    path = tmp_path / "pkg/ops.py"
    path.write_text(path.read_text() + "\nfinish = dist.all_reduce\n")
    trace = same_as_fresh(tmp_path)
    assert "selective: 1 of" in trace
    assert "SPMD501" in check(tmp_path).stdout


def test_rekey_renames_the_record_for_an_added_and_a_removed_function() -> None:
    from spmdcheck.engine import incremental

    roots = [
        ((), [], [], []),
        ((0, 0), [(0, 0)], [], []),
        ((0, 1), [(0, 1), (0, 0)], [], []),
        ((1, 1, 0), [(0, 1)], [(0, 0)], []),
    ]
    record = _record(SOURCE, roots)
    record.top_files, record.top_units = [0, 0], [(0, 0), (0, 1)]
    old_outline = record.outlines[0]
    added = SOURCE.replace("def f():", "def e():\n    return 0\n\n\ndef f():")
    outline, spans = _outline(added)
    renamed, changed = incremental.rekey(record, 0, old_outline, outline)
    assert [r[0] for r in renamed.roots] == [(), (0, 1), (0, 2), (1, 2, 0)]
    assert renamed.roots[2][1] == [(0, 2), (0, 1)] and renamed.roots[3][2] == [(0, 1)]
    assert renamed.top_files == [0, 0, 0] and renamed.top_units == [(0, 0), (0, 1), (0, 2)]
    assert changed == {(0, 0), (0, incremental.GONE)}
    # f removed: its root goes, the roots that ran it or reused its result hold the removed body's unit
    removed = SOURCE.replace("def f():\n    return 1\n\n\n", "")
    outline, spans = _outline(removed)
    renamed, changed = incremental.rekey(record, 0, old_outline, outline)
    assert [r[0] for r in renamed.roots] == [(), (0, 0), (1, 0, 0)]
    assert renamed.roots[1][1] == [(0, 0), (0, incremental.GONE)]
    assert (0, incremental.GONE) in renamed.roots[2][1]  # its provider was removed
    assert renamed.top_units == [(0, 0)]
    # a plan over the renamed record: the new function is a new root; what ran the removed body runs again
    plan = incremental.plan_selective(record, ["m.py"], [outline], [removed], [spans], importers={})
    assert plan is not None and (0, 0) in plan.run_only and (1, 0, 0) in plan.run_only

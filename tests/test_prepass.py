"""The pre-pass never drops a finding: the real command line prints the same bytes with it on and
forced off (SPMDCHECK_NO_PREPASS=1), and it does skip and blank what cannot matter."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

import pytest
from cli_helpers import assert_ran
from conftest import FIXTURES, ROOT

from spmdcheck.program import prepass

# Findings with no annotation at all: raw collectives typed by a mesh group, a seedless helper that
# only reports when called with a typed value (SPMD404 inside `loss_backward`), an alias of a
# collective imported under another name, a rank branch around a helper that issues the collective.
TRAINER = '''\
import torch
import torch.distributed as dist
from torch.distributed import all_reduce as ar
from torch.distributed.device_mesh import init_device_mesh

mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
GROUP = mesh.get_group("tp")


def loss_backward(loss):
    loss.backward()


def reduce_again(t):
    dist.all_reduce(t, group=GROUP)
    return t


def scale(t):
    return t * 2


def train():
    y = torch.ones(3, requires_grad=True).sum()
    dist.all_reduce(y, group=GROUP)
    loss_backward(y)
    w = scale(y)
    return reduce_again(w)


def do_reduce(x):
    ar(x)


def ranky(x):
    if dist.get_rank() == 0:
        do_reduce(x)
    return x


class Trainer:
    def step(self):
        y = torch.ones(3)
        dist.all_reduce(y, group=GROUP)
        dist.all_reduce(y, group=GROUP)
        return y


class Inert:
    """Mentions all_reduce and broadcast in prose only."""

    def forward(self, x):
        # all_reduce(x) would be wrong here
        return x + 1


def inert_helper(x):
    return torch.relu(x)
'''

ALIASES = '''\
import torch
import torch.distributed as dist
from torch.distributed import broadcast as bc

bcast = bc


def leaf():
    w = torch.randn(3, requires_grad=True)
    bcast(w, 0)
    return w


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def sync(self):
        t = torch.randn(3, requires_grad=True)
        dist.all_reduce(t)

    def forward(self, x): return x * 2
'''

# A collective reached only through lambdas: a module-level registry of them, and one bound in the function
# whose rank branch calls it (the pre-pass must keep what the lambdas name).
LAMBDAS = '''\
import torch
import torch.distributed as dist


def sync(t):
    dist.all_reduce(t)
    return t


HOOKS = {"sync": lambda t: sync(t)}


def rank_zero(x):
    run = lambda: HOOKS["sync"](x)
    if dist.get_rank() == 0:
        run()
    return x


def inert(x):
    act = lambda t: torch.relu(t)
    return act(x)
'''

NOTHING = '''\
import torch


def add(a, b):
    return torch.add(a, b)
'''


def _run(args: list[str], cwd, prepass_on: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ, SPMDCHECK_NO_PREPASS="0" if prepass_on else "1")
    full = ["check", *args, "--output-format", "json", "--no-cache"]
    proc = subprocess.run(
        [sys.executable, "-m", "spmdcheck", *full], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert_ran(full, proc)
    return proc


def _same_both_ways(args: list[str], cwd) -> str:
    on, off = _run(args, cwd, True), _run(args, cwd, False)
    assert "Traceback" not in on.stderr + off.stderr, on.stderr + off.stderr
    assert (on.returncode, on.stdout) == (off.returncode, off.stdout)
    return on.stdout


@pytest.fixture
def tree(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "trainer.py").write_text(TRAINER)
    (pkg / "aliases.py").write_text(ALIASES)
    (pkg / "nothing.py").write_text(NOTHING)
    (pkg / "lambdas.py").write_text(LAMBDAS)
    (pkg / "broken.py").write_text("def f(:\n    pass\n")
    (pkg / "crlf.py").write_bytes(ALIASES.replace("\n", "\r\n").encode())
    return tmp_path


@pytest.mark.parametrize("extra", [[], ["-j", "1"], ["--mesh", "tp"], ["--strict"]])
def test_same_findings_with_and_without_prepass(tree, extra):
    out = _same_both_ways(["pkg", *extra], tree)
    assert "SPMD404" in out and "SPMD302" in out and "SPMD306" in out and "SPMD501" in out
    assert "SPMD001" in out  # the broken file is still reported
    assert "lambdas.py" in out  # the collective reached through lambdas (SPMD501)


def test_fixtures_same_with_and_without_prepass():
    _same_both_ways(["fixtures"], ROOT)
    _same_both_ways([str(FIXTURES), "--mesh", "dp,tp", "--strict", "-j", "1"], ROOT)


def test_torch_distributed_same_with_and_without_prepass(tmp_path):
    """Real code with a mesh configured (every factory typed): two packages of torch/distributed, whose
    checked files import each other, give the same output with the pre-pass on and off."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed")
    root = os.path.join(os.path.dirname(spec.origin), "distributed")
    trees = [os.path.join(root, "algorithms"), os.path.join(root, "_composable")]
    _same_both_ways([*trees, "--no-respect-gitignore", "--mesh", "dp,tp"], tmp_path)


def _plan(text: str, mesh: bool = False) -> prepass.Plan:
    from spmdcheck.api import load_registry

    seeds = prepass.seed_words(load_registry(()), mesh)
    scan = prepass.scan("m.py", text.encode(), seeds)
    prepass.spread([scan])
    return prepass.plan(scan)


def test_a_file_without_seeds_is_skipped_and_with_a_mesh_it_is_not():
    assert _plan(NOTHING).skip
    assert not _plan(NOTHING, mesh=True).skip


def test_inert_bodies_are_blanked_and_the_rest_kept():
    plan = _plan(TRAINER)
    lines = TRAINER.splitlines()
    blanked = {n for start, end in plan.blank for n in range(start, end + 1)}
    assert lines.index("        return x + 1") + 1 in blanked  # Inert.forward: prose only
    assert lines.index("    return torch.relu(x)") + 1 in blanked  # inert_helper
    assert lines.index("    loss.backward()") + 1 not in blanked  # called by train with a typed loss
    assert lines.index("        do_reduce(x)") + 1 not in blanked


def test_marker_files_are_analysed_whole():
    assert _plan("import spmd_types\n\ndef f(x):\n    return x\n") == prepass.Plan(False)
    assert _plan("from typing import Annotated\n\ndef f(x):\n    return x\n") == prepass.Plan(False)
    lazy_import = "def f(x):\n    from torchtitan.distributed import spmd_types as st\n    return x\n"
    assert _plan(lazy_import) == prepass.Plan(False)
    assert _plan("# spmdcheck: mesh = ['tp']\ndef f(x):\n    return x\n") == prepass.Plan(False)
    assert _plan("def f(x):\n    return x  # noqa: SPMD101\n") == prepass.Plan(False)


@pytest.mark.parametrize(
    "text",
    [
        '"""Annotated modules are wrapped; SPMD is a style."""\ndef f(x):\n    return x\n',
        "# the spmd mesh, Annotated\ndef f(x):\n    return x\n",
    ],
)
def test_prose_holding_a_marker_is_no_marker(text: str) -> None:
    assert _plan(text).skip


@pytest.mark.parametrize(
    "named",
    ["return state.spmd_mesh", "from torch_xla.distributed.spmd import mark\n    return mark(state)"],
)
def test_a_name_holding_a_marker_makes_its_unit_a_source_not_its_file_whole(named: str) -> None:
    """(`spmd.reinterpret(...)` through a module re-exporting spmd_types under another name is such a unit.)"""
    text = f"def f(state):\n    {named}\n\n\ndef g(x):\n    return x + 1\n"
    plan = _plan(text)
    assert not plan.skip and plan != prepass.Plan(False)  # checked, but not whole
    lines = text.splitlines()
    blanked = {n for start, end in plan.blank for n in range(start, end + 1)}
    assert lines.index("    return x + 1") + 1 in blanked


def test_blanking_keeps_every_line_and_ending():
    text = (
        "class A:\r\n    @dec\r\n    def f(self,\r\n          x):\r\n"
        "        a = '''\r\n        b'''\r\n        return x\r\n    def g(self): return 1\r\n"
    )
    from spmdcheck.program.prepass.scan import _body_span
    from spmdcheck.program.prepass.syntax import NEWLINE

    tree = ast.parse(text)
    method = tree.body[0].body[0]
    span = _body_span(method, NEWLINE.split(text))
    assert span == (5, 7)
    out = prepass.blank_bodies(text, [span])
    assert out.count("\r\n") == text.count("\r\n") and "\n" not in out.replace("\r\n", "")
    assert out.splitlines()[4] == "        pass" and out.splitlines()[7] == text.splitlines()[7]
    ast.parse(out)
    same_line = ast.parse("def f(a\n): return a\n").body[0]
    assert _body_span(same_line, ["def f(a", "): return a", ""]) is None


def test_prose_is_dropped_and_code_kept():
    src = textwrap.dedent(
        '''\
        x = "#"; all_reduce(y)  # all_gather in a comment
        def f():
            """docs name broadcast"""
            s = f"{reduce_scatter(x)}" + "Config" + "all reduce please"
        '''
    )
    out = prepass.code_only(src)
    assert out.count("\n") == src.count("\n")
    from spmdcheck.program.prepass.scan import _WORD

    words = set(_WORD.findall(out))
    assert {"all_reduce", "reduce_scatter", "Config"} <= words
    assert not {"all_gather", "broadcast", "please"} & words


def test_an_f_strings_text_is_prose_and_its_fields_code():
    """`f"Please redistribute the tensor"` names nothing (DTensor's own messages made its sharding rules
    sources); a replacement field, nested fields of a format spec and a multi-line f-string's lines stay."""
    src = (
        'raise ValueError(f"Please redistribute {t.to_local()} first {{all_gather}} {x:>{width}}")\n'
        'msg = f"""from_local\n{dist.broadcast(y)} broadcast"""\n'
    )
    out = prepass.code_only(src)
    assert out.count("\n") == src.count("\n")
    from spmdcheck.program.prepass.scan import _WORD

    words = set(_WORD.findall(out))
    assert {"to_local", "x", "width", "dist", "broadcast", "y"} <= words
    assert not {"Please", "redistribute", "all_gather", "first", "from_local"} & words
    assert _plan('def f(t):\n    raise ValueError(f"redistribute {t} first")\n').skip


OBJECTS = """\
import torch.distributed as dist


class Unused:
    def update(self, x):
        return x + 1


class Used:
    def update(self, x):
        return x * 2


def step(x):
    d = {}
    d.update(a=1)
    dist.all_reduce(Used().update(x))
"""


def test_a_method_is_exposed_only_when_its_class_is_named_by_what_matters():
    """The analysis runs a method only on an object whose class it knows: a method of a class nothing that
    matters names is blanked though a source names a method of that name (`d.update`)."""
    plan = _plan(OBJECTS)
    lines = OBJECTS.splitlines()
    blanked = {n for start, end in plan.blank for n in range(start, end + 1)}
    assert lines.index("        return x + 1") + 1 in blanked
    assert lines.index("        return x * 2") + 1 not in blanked


def test_seed_words_come_from_the_rules():
    from spmdcheck.api import load_registry

    seeds = prepass.seed_words(load_registry(()), False)
    assert {"all_reduce", "broadcast", "copy_to_tensor_model_parallel_region", "init_device_mesh"} <= seeds
    assert not {"add", "relu", "matmul", "zeros", "torch"} & seeds
    assert "torch" in prepass.seed_words(load_registry(()), True)
    # a number of a mesh that is already there (`mesh.size("tp")`): the mesh's factory is the seed
    assert "size" not in seeds


def test_a_source_writing_a_class_attribute_in_another_file_makes_the_class_a_source():
    """`RowLinear._sharding_config = ShardingConfig(...)` types the class's forward: its file is checked."""
    from spmdcheck.api import load_registry

    seeds = prepass.seed_words(load_registry(()), False)
    assert "dim" not in seeds  # a number, not a type
    layers = "import torch\n\nclass RowLinear(torch.nn.Module):\n    def forward(self, h):\n        return h.dim()\n"
    plan = "from proj.layers import RowLinear\n\nRowLinear._sharding_config = make(all_reduce)\n"
    quiet = "from proj.layers import RowLinear\n\nRowLinear._sharding_config = make()\n"
    for writer, matters in ((plan, True), (quiet, False)):
        scans = [
            prepass.scan("proj/layers.py", layers.encode(), seeds, exists=lambda p: True),
            prepass.scan("proj/plan.py", writer.encode(), seeds, exists=lambda p: True),
        ]
        prepass.spread(scans)
        assert scans[0].relevant is matters
        assert not prepass.plan(scans[0]).blank if matters else prepass.plan(scans[0]).skip


def test_module_level_statements_say_what_they_bind_and_whether_they_only_bind() -> None:
    """A pure statement calls nothing, writes no attribute or item and runs no decorator (but property and
    its kind): what it changes reaches only the code reading its names (incremental.py)."""
    import ast

    from spmdcheck.program.graph import ModuleFile

    source = (
        '"""doc"""\n'
        "import os\n"
        "from pkg.x import (a,\n    b)\n"
        "X = 1\n"
        "Y: int = X + 2\n"
        "Z = f(1)\n"
        "obj.attr = 3\n"
        "@register\ndef g():\n    pass\n"
        "def h(a=1, *, b: 'T' = None) -> int:\n    return make(a)\n"
        "class C(Base):\n    x = 1\n\n    @property\n    def p(self):\n        return 1\n"
        "class D(Base):\n    def m(self, y=g()):\n        pass\n"
        "try:\n    import numpy as np\nexcept ImportError:\n    np = None\n"
        "for i in range(3):\n    pass\n"
        "K = [n for n in range(3)]\n"
        "import spmd_types as st\n"
        "from . import sibling\n"
    )
    table = prepass.statements(ast.parse(source).body, ModuleFile("pkg.m", "pkg/m.py", False))
    assert [(first, last, names, pure) for first, last, names, pure in table] == [
        (1, 1, (), True),
        (2, 2, ("os",), True),
        (3, 4, ("a", "b"), True),
        (5, 5, ("X",), True),
        (6, 6, ("Y",), True),
        (7, 7, ("Z",), False),  # a call
        (8, 8, ("obj",), False),  # an attribute written
        (9, 11, ("g",), False),  # a decorator that may register it
        (12, 13, ("h",), True),  # (its body is not the statement's)
        (14, 19, ("C",), True),
        (20, 22, ("D",), False),  # a default that calls
        (23, 26, ("np",), True),
        (27, 28, (), False),  # a loop (not pure: what it binds is not looked at)
        (29, 29, ("K",), False),  # a comprehension
        (30, 30, ("st",), False),  # how the file spells spmd_types (quoted by messages and fixes)
        (31, 31, ("sibling",), True),
    ]


LAYOUTS = """\
from torch.distributed.tensor import Partial, Replicate, Shard

REPLICATED = (Replicate(),)


def replicated():
    return [Replicate()]


class Layouts:
    def __init__(self):
        self.out = [Replicate()]


def unused():
    return [Shard(0), Partial()]
"""

LAYOUT_USERS = """\
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from pkg.layouts import REPLICATED, Layouts, replicated


def block(x, mesh):
    rank = mesh["tp"].get_local_rank()
    return x.chunk(mesh["tp"].size(), dim=1)[rank]


def by_function(x, mesh):
    return DTensor.from_local(block(x, mesh), mesh, replicated())


def by_constant(x, mesh):
    return DTensor.from_local(block(x, mesh), mesh, REPLICATED)


def by_object(x, mesh):
    return DTensor.from_local(block(x, mesh), mesh, Layouts().out)


def main(x):
    mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
    by_function(x, mesh), by_constant(x, mesh), by_object(x, mesh)
"""


def test_a_layout_made_in_another_file_reaches_its_boundary_with_the_prepass_on(tmp_path):
    """Placements are layout words, not seeds: a unit naming only them (`replicated()` in another file) is a
    source once a unit that matters names it, so the placements it makes reach `from_local` as with the
    pre-pass off; a module defining placements that nothing that matters uses is skipped."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "layouts.py").write_text(LAYOUTS)
    (pkg / "model.py").write_text(LAYOUT_USERS)
    out = _same_both_ways(["pkg"], tmp_path)
    assert out.count("SPMD401") == 3
    from spmdcheck.api import load_registry

    registry = load_registry(())
    seeds, layouts = prepass.seed_words(registry, False), prepass.layout_words(registry)
    assert {"Shard", "Replicate", "Partial", "placements"} <= layouts and not {"Shard", "placements"} & seeds
    alone = prepass.scan("layouts.py", LAYOUTS.encode(), seeds, layout=layouts)
    prepass.spread([alone])
    assert prepass.plan(alone).skip


def test_a_reader_of_a_layout_nothing_that_matters_names_is_left_out(tmp_path):
    """A layout is a type only at a boundary: a function reading a layout helper is kept when a boundary reaches
    it (through another function) and blanked when nothing that matters names it (it was a source)."""
    layouts = LAYOUTS + "\n\ndef via_helper():\n    return replicated()\n\n\ndef unread():\n    return replicated()\n"
    users = LAYOUT_USERS.replace("replicated()", "via_helper()").replace(
        "import REPLICATED, Layouts, replicated", "import REPLICATED, Layouts, via_helper"
    )
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "layouts.py").write_text(layouts)
    (pkg / "model.py").write_text(users)
    assert _same_both_ways(["pkg"], tmp_path).count("SPMD401") == 3
    from spmdcheck.api import load_registry

    registry = load_registry(())
    seeds, words = prepass.seed_words(registry, False), prepass.layout_words(registry)
    scans = [
        prepass.scan(str(pkg / "layouts.py"), layouts.encode(), seeds, layout=words),
        prepass.scan(str(pkg / "model.py"), users.encode(), seeds, layout=words),
    ]
    prepass.spread(scans)
    lines = layouts.splitlines()
    blanked = {n for start, end in prepass.plan(scans[0]).blank for n in range(start, end + 1)}
    unread = len(lines) - lines[::-1].index("    return replicated()")
    assert unread in blanked and lines.index("    return replicated()") + 1 not in blanked


REGISTERED = """\
import torch
from torch import nn

REGISTRY = {}


def register(name):
    def store(obj):
        REGISTRY[name] = obj
        return obj

    return store


@register("row")
class Row(nn.Module):
    def forward(self, x):
        return torch.relu(x)

    def project(self, x):
        return torch.tanh(x)


@register("gelu")
def gelu(x):
    return torch.sigmoid(x)


@torch.no_grad()
def untouched(x):
    return torch.exp(x)
"""

REGISTRY_USER = """\
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial

from pkg.layers import REGISTRY

mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))


def run(x):
    pending = DTensor.from_local(x, mesh, [Partial()]).to_local()
    layer = REGISTRY["row"]()
    return layer(pending), layer.project(pending), REGISTRY["gelu"](pending)
"""


def test_what_a_decorator_registers_where_code_that_matters_reads_is_kept(tmp_path):
    """A decorator storing what it decorates in a registry a unit that matters reads (`REGISTRY["row"]()`): the
    decorator is kept (it writes that state) and so is what it decorates, as with the pre-pass off; a unit only a
    library decorates (`@torch.no_grad()`) is not."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "layers.py").write_text(REGISTERED)
    (pkg / "model.py").write_text(REGISTRY_USER)
    assert _same_both_ways(["pkg"], tmp_path).count("SPMD101") == 3  # relu, tanh and sigmoid of a pending sum
    from spmdcheck.api import load_registry

    registry = load_registry(())
    seeds, layouts = prepass.seed_words(registry, False), prepass.layout_words(registry)
    scans = [
        prepass.scan(str(pkg / "layers.py"), REGISTERED.encode(), seeds, layout=layouts),
        prepass.scan(str(pkg / "model.py"), REGISTRY_USER.encode(), seeds, layout=layouts),
    ]
    prepass.spread(scans)
    lines = REGISTERED.splitlines()
    blanked = {n for start, end in prepass.plan(scans[0]).blank for n in range(start, end + 1)}
    assert lines.index("    return torch.exp(x)") + 1 in blanked
    for kept in ("        REGISTRY[name] = obj", "        return torch.relu(x)", "    return torch.sigmoid(x)"):
        assert lines.index(kept) + 1 not in blanked, kept

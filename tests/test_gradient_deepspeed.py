"""DeepSpeed's engine in the gradient walk (analysis/gradients/deepspeed.py), spelled the ways a program spells
it: the verdicts of the fixtures/programs/gradsync_deepspeed_* packages (confirmed on gloo ranks with
tests/ground_truth/fake_deepspeed) do not depend on how the engine is made or called.

Each rewrite is applied to the ok package and to a bug package: the ok one stays clean and the bug one keeps
its finding (without the rules the engine is a call the walk does not follow, and the bug goes silent)."""

from __future__ import annotations

import pathlib
import shutil

import pytest

from spmdcheck.api import Settings, check_files

PROGRAMS = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "programs"
ARGS = "model=mlp, model_parameters=mlp.parameters(), config=config"
UNPACKED = "    model, optimizer, _, _ = "
INIT = f"{UNPACKED}deepspeed.initialize({ARGS})\n"
BACKWARD = "    model.backward(loss)\n"
STEP = "    model.step()"  # (the bug's line goes on with its expectation)
LOSS = "    loss = F.mse_loss(model(inputs), targets)\n"
BEFORE_BUILD = "def build("
BEFORE_STEP = "def step("
BUGS = {"bug_loss_backward": "SPMD601", "bug_allreduce_after_engine": "SPMD602"}

# (spelling, bug package, [(old, new), ...]): each a meaning-preserving rewrite, applied to `ok` and to the bug
REWRITES = [
    ("as written", "bug_loss_backward", []),
    ("as written", "bug_allreduce_after_engine", []),
    ("from deepspeed import initialize", "bug_loss_backward", [
        ("import deepspeed\n", "from deepspeed import initialize\n"),
        (INIT, f"    model, optimizer, _, _ = initialize({ARGS})\n")]),
    ("an alias", "bug_loss_backward", [(INIT, f"    make = deepspeed.initialize\n{UNPACKED}make({ARGS})\n")]),
    ("a helper", "bug_loss_backward", [
        (INIT, "    model, optimizer, _, _ = _engine(mlp, config)\n"),
        (BEFORE_BUILD, "def _engine(module, config):\n"
                       "    return deepspeed.initialize(model=module, config=config)\n\n\n" + BEFORE_BUILD)]),
    ("a registry", "bug_loss_backward", [
        (INIT, f'    model, optimizer, _, _ = ENGINES["deepspeed"]({ARGS})\n'),
        (BEFORE_BUILD, 'ENGINES = {"deepspeed": deepspeed.initialize}\n\n\n' + BEFORE_BUILD)]),
    ("functools.partial", "bug_loss_backward", [
        (INIT, "    model, optimizer, _, _ = functools.partial(deepspeed.initialize, config=config)(model=mlp)\n"),
        ("import deepspeed\n", "import functools\n\nimport deepspeed\n")]),
    ("[0] and engine.optimizer", "bug_loss_backward", [
        (INIT, f"    model = deepspeed.initialize({ARGS})[0]\n    optimizer = model.optimizer\n")]),
    ("positional args, model", "bug_loss_backward", [
        (INIT, f"{UNPACKED}deepspeed.initialize(None, mlp, None, mlp.parameters(), config=config)\n")]),
    ("a client optimizer", "bug_loss_backward", [
        (INIT, "    sgd = torch.optim.SGD(mlp.parameters(), lr=0.5)\n"
               "    model, optimizer, _, _ = deepspeed.initialize(model=mlp, optimizer=sgd, config=config)\n")]),
    ("config_params", "bug_loss_backward", [(INIT, INIT.replace("config=config", "config_params=config"))]),
    ("the trainable parameters filtered by a lambda", "bug_loss_backward", [
        (INIT, INIT.replace("mlp.parameters()", "filter(lambda p: p.requires_grad, mlp.parameters())"))]),
    ("the parameters mapped through a lambda", "bug_allreduce_after_engine", [
        (INIT, INIT.replace("mlp.parameters()", "list(map(lambda p: p, mlp.parameters()))"))]),
    ("the returned optimizer steps", "bug_loss_backward", [(STEP, "    optimizer.step()")]),
    ("a step guarded by is_gradient_accumulation_boundary()", "bug_loss_backward", [
        (STEP, "    if model.is_gradient_accumulation_boundary():\n        model.step()")]),
    ("the forward of engine.module", "bug_allreduce_after_engine", [
        (LOSS, "    loss = F.mse_loss(model.module(inputs), targets)\n")]),
    ("getattr of backward", "bug_allreduce_after_engine", [(BACKWARD, '    getattr(model, "backward")(loss)\n')]),
    ("a backward helper", "bug_allreduce_after_engine", [
        (BACKWARD, "    _backward(model, loss)\n"),
        (BEFORE_STEP, "def _backward(engine, loss):\n    engine.backward(loss)\n\n\n" + BEFORE_STEP)]),
    ("a registry of backward", "bug_allreduce_after_engine", [
        (BACKWARD, '    BACKWARDS["engine"](model, loss)\n'),
        (BEFORE_STEP, "def _backward(engine, loss):\n    engine.backward(loss)\n\n\n"
                      'BACKWARDS = {"engine": _backward}\n\n\n' + BEFORE_STEP)]),
    ("functools.partial of backward", "bug_allreduce_after_engine", [
        (BACKWARD, "    functools.partial(model.backward)(loss)\n"),
        ("import deepspeed\n", "import functools\n\nimport deepspeed\n")]),
    ("torch.distributed for the ranks", "bug_allreduce_after_engine", [
        ("import deepspeed.comm as dist\n", "import torch.distributed as dist\n")]),
    ("the dp group of deepspeed.utils.groups", "bug_allreduce_after_engine", [
        ("dist.all_reduce(param.grad)", "dist.all_reduce(param.grad, group=groups._get_data_parallel_group())"),
        ("import deepspeed.comm as dist\n", "import deepspeed.comm as dist\nfrom deepspeed.utils import groups\n")]),
]


def _check(tmp_path: pathlib.Path, package: str, edits: list, label: str = "") -> list[str]:
    return sorted(d.code for d in _diagnostics(tmp_path, package, edits, label))


def _diagnostics(tmp_path: pathlib.Path, package: str, edits: list, label: str = "") -> list:
    copy = tmp_path / label / f"gradsync_deepspeed_{package}"
    shutil.copytree(PROGRAMS / copy.name, copy)
    train = copy / "train.py"
    text = train.read_text()
    for old, new in edits:
        if package == "ok" and old not in text:
            continue  # a rewrite of a line only the bug has (its all-reduce loop)
        assert old in text, (package, old)
        text = text.replace(old, new, 1)
    train.write_text(text)
    results = check_files(sorted(str(p) for p in copy.glob("*.py")), Settings(mesh=("dp",)))
    return [d for r in results for d in r.diagnostics]


@pytest.mark.parametrize(("spelling", "bug", "edits"), REWRITES, ids=[f"{b}: {s}" for s, b, _ in REWRITES])
def test_deepspeed_spellings_keep_the_verdict(tmp_path: pathlib.Path, spelling: str, bug: str, edits: list) -> None:
    assert _check(tmp_path, bug, edits, "bug") == [BUGS[bug]], spelling
    assert _check(tmp_path, "ok", edits, "ok") == [], spelling


def test_a_plain_backward_is_told_to_use_the_engines(tmp_path: pathlib.Path) -> None:
    """SPMD601 after `loss.backward()` names the engine's backward (message, fix title and advice)."""
    [finding] = _diagnostics(tmp_path, "bug_loss_backward", [])
    assert "only `engine.backward(loss)` reduces them" in finding.message
    assert [(s.message, s.replacement) for s in finding.suggestions] == [
        ("backpropagate with `engine.backward(loss)` instead of `loss.backward()`", "engine.backward(loss)")
    ]


def test_a_loss_divided_by_the_data_parallel_size_is_averaged_twice(tmp_path: pathlib.Path) -> None:
    """The engine averages over dp in its backward: dividing the loss by the dp size too (torch's, DeepSpeed's
    `deepspeed.comm`, or the `@group_size("dp")` stub of `deepspeed.utils.groups`) is SPMD606; by a number
    that is not the axis size, nothing."""
    for divisor, imports in [
        ("dist.get_world_size()", ""),
        ("groups._get_data_parallel_world_size()", "from deepspeed.utils import groups\n"),
    ]:
        edits = [(LOSS, LOSS.rstrip("\n") + f" / {divisor}\n"),
                 ("import deepspeed.comm as dist\n", "import deepspeed.comm as dist\n" + imports)]
        assert _check(tmp_path, "ok", edits, divisor[:6]) == ["SPMD606"], divisor
    assert _check(tmp_path, "ok", [(LOSS, LOSS.rstrip("\n") + " / 2\n")], "two") == []


MICRO_BATCHES = (
    "    for i, (x, y) in enumerate(zip(inputs.chunk(2), targets.chunk(2))):\n"
    "        model.set_gradient_accumulation_boundary(i == 1)\n"
    "        loss = F.mse_loss(model(x), y)\n"
    "        {backward}\n"
    "        model.step()\n"
)


@pytest.mark.parametrize(("backward", "expected"), [("model.backward(loss)", []), ("loss.backward()", ["SPMD601"])])
def test_the_boundary_the_program_sets(tmp_path: pathlib.Path, backward: str, expected: list) -> None:
    """`set_gradient_accumulation_boundary(i == 1)` in a micro-batch loop: the engine reduces and steps at the
    last micro-batch only; a plain backward() leaves the accumulated gradients unreduced there."""
    edits = [(LOSS + BACKWARD + STEP + "\n", MICRO_BATCHES.format(backward=backward))]
    assert _check(tmp_path, "ok", edits) == expected


def test_no_sync_leaves_the_gradients_unreduced(tmp_path: pathlib.Path) -> None:
    """Inside `model.no_sync()` the engine's backward reduces nothing: a step after it steps per-rank sums; a
    backward outside it before the step reduces the accumulated gradients."""
    inside = "    with model.no_sync():\n        model.backward(loss)\n"
    [finding] = _diagnostics(tmp_path, "ok", [(BACKWARD, inside)], "inside")
    assert finding.code == "SPMD601" and "plain backward()" not in finding.message  # it went through the engine
    again = inside + "    loss = F.mse_loss(model(inputs), targets)\n" + BACKWARD
    assert _check(tmp_path, "ok", [(BACKWARD, again)], "again") == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"gradient_accumulation_steps": 1,', '"gradient_accumulation_steps": 2,'),
        ('"gradient_accumulation_steps": 1,', '"train_batch_size": GLOBAL_BATCH,'),
        ('"zero_optimization": {"stage": 0},', '"zero_optimization": {"stage": 3},'),
    ],
    ids=["more accumulation steps", "steps derived from the world size", "ZeRO stage 3"],
)
def test_what_the_config_puts_out_of_reach_is_silent(tmp_path: pathlib.Path, old: str, new: str) -> None:
    """Boundaries the walk cannot tell (the engine reduces and steps at some micro-steps only) and ZeRO stage 3
    are not followed: nothing is reported, not even the plain backward()'s unreduced gradients (reported with
    the config as written)."""
    assert _check(tmp_path, "bug_loss_backward", [(old, new)], "changed") == []
    assert _check(tmp_path, "bug_loss_backward", [], "as written") == ["SPMD601"]

"""Megatron-core's gradient synchronisation in the gradient walk (analysis/gradients/megatron.py), spelled
the ways a program spells it: the verdict of the fixtures/programs/gradsync_megatron_* packages (confirmed on
gloo ranks with tests/ground_truth/fake_megatron) does not depend on how the call is written."""

from __future__ import annotations

import pathlib
import shutil

import pytest

from spmdcheck.api import Settings, check_files

PROGRAMS = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "programs"
FINALIZE = "    finalize_model_grads([model])\n"
FINISH = "    model.finish_grad_sync()\n"
UNSET = "    config = TransformerConfig(num_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=1)\n"
WRAP = "    model = DistributedDataParallel(config, DistributedDataParallelConfig(), Model(HIDDEN, FFN, LAYERS))\n"

# (name, package, [(old, new), ...]): each a meaning-preserving rewrite of the package's `step`
REWRITES = [
    ("as written", "ok", []),
    ("an alias", "ok", [(FINALIZE, "    sync = finalize_model_grads\n    sync([model])\n")]),
    ("a helper", "ok", [(FINALIZE, "    _sync([model])\n"),
                        ("def step(", "def _sync(chunks):\n    finalize_model_grads(chunks)\n\n\ndef step(")]),
    ("functools.partial", "ok", [(FINALIZE, "    functools.partial(finalize_model_grads, num_tokens=None)([model])\n"),
                                 ("import torch\n", "import functools\n\nimport torch\n")]),
    ("the chunks in a tuple", "ok", [(FINALIZE, "    chunks = (model,)\n    finalize_model_grads(list(chunks))\n")]),
    ("the chunks by keyword", "ok", [(FINALIZE, "    finalize_model_grads(model=[model])\n")]),
    ("as written", "bug_finish_only", []),
    ("getattr", "bug_finish_only", [(FINISH, '    getattr(model, "finish_grad_sync")()\n')]),
    ("a registry", "bug_finish_only", [(FINISH, '    SYNCS["dp"](model)\n'),
                                       ("def step(", 'def _finish(m):\n    m.finish_grad_sync()\n\n\n'
                                                     'SYNCS = {"dp": _finish}\n\n\ndef step(')]),
    ("finalize then finish again", "ok", [(FINALIZE, FINALIZE + FINISH)]),
    ("as written", "bug_loss_averaged_twice", []),
    ("as written", "bug_config_not_sequence_parallel", []),
    ("False said", "bug_config_not_sequence_parallel",
     [(UNSET, UNSET.replace("heads=1)", "heads=1, sequence_parallel=False)"))]),
    ("the fields in a dict", "bug_config_not_sequence_parallel",
     [(UNSET, "    fields = dict(num_layers=LAYERS, sequence_parallel=False)\n"
              "    config = TransformerConfig(**fields)\n")]),
    ("the config from a helper", "bug_config_not_sequence_parallel",
     [(UNSET, "    config = _config()\n"),
      ("def build(", "def _config():\n    return TransformerConfig(num_layers=LAYERS, hidden_size=HIDDEN)\n\n\n"
                     "def build(")]),
    ("the wrapper's arguments by keyword", "bug_config_not_sequence_parallel",
     [(WRAP, "    model = DistributedDataParallel(module=Model(HIDDEN, FFN, LAYERS), config=config, "
             "ddp_config=DistributedDataParallelConfig())\n")]),
    ("the dict says True", "bug_config_not_sequence_parallel",
     [(UNSET, "    fields = {'num_layers': LAYERS, 'sequence_parallel': True}\n"
              "    config = TransformerConfig(**fields)\n")]),
]
EXPECTED = {
    "ok": [],
    "bug_finish_only": ["SPMD601"],
    "bug_loss_averaged_twice": ["SPMD606"],
    "bug_config_not_sequence_parallel": ["SPMD601"],
}
# the rewrites that fix the bug they are applied to
FIXED = {("the dict says True", "bug_config_not_sequence_parallel")}


@pytest.mark.parametrize(("spelling", "package", "edits"), REWRITES, ids=[f"{p}: {s}" for s, p, _ in REWRITES])
def test_megatron_spellings_keep_the_verdict(tmp_path: pathlib.Path, spelling: str, package: str, edits: list) -> None:
    copy = tmp_path / f"gradsync_megatron_{package}"
    shutil.copytree(PROGRAMS / copy.name, copy)
    train = copy / "train.py"
    text = train.read_text()
    for old, new in edits:
        assert old in text, (spelling, old)
        text = text.replace(old, new, 1)
    train.write_text(text)
    results = check_files(sorted(str(p) for p in copy.glob("*.py")), Settings(mesh=("dp", "tp")))
    codes = sorted(d.code for r in results for d in r.diagnostics)
    assert codes == ([] if (spelling, package) in FIXED else EXPECTED[package]), spelling


def test_a_group_size_stub_divides_as_the_axis_size(tmp_path: pathlib.Path) -> None:
    """`@group_size("dp")` (stubs/megatron/core/parallel_state.pyi): dividing the loss by it is averaging over
    dp, so with Megatron's wrapper it averages twice; dividing by another number is not."""
    copy = tmp_path / "gradsync_megatron_bug_loss_averaged_twice"
    shutil.copytree(PROGRAMS / copy.name, copy)
    train = copy / "train.py"
    train.write_text(train.read_text().replace("parallel_state.get_data_parallel_world_size()  #", "2  #", 1))
    results = check_files(sorted(str(p) for p in copy.glob("*.py")), Settings(mesh=("dp", "tp")))
    assert [d.code for r in results for d in r.diagnostics] == []

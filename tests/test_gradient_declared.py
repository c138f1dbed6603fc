"""Parameters whose type the program declares with spmd_types (analysis/gradients/declared.py), spelled the
ways a program spells it: the verdict of the fixtures/programs/gradsync_spmd_types_* packages (confirmed on
gloo ranks) does not depend on how the declaration is written, and a declaration the walk cannot read says
nothing."""

from __future__ import annotations

import pathlib
import shutil

import pytest

from spmdcheck.api import Settings, check_files

PROGRAMS = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "programs"
BUG = "bug_norm_declared_replicate"
DECLARED_R = ("        self.weight = spmd.assert_type(weight, {tp: R})\n"
              "        self.bias = spmd.assert_type(bias, {tp: R})\n")
DECLARED_I = DECLARED_R.replace("R}", "I}")
IMPORTS = "from spmd_types import I, P, R, S\n"

# (name, package, [(old, new), ...], expected codes): meaning-preserving rewrites of layers.py keep the verdict
REWRITES = [
    ("as written", "ok", [], []),
    ("as written", BUG, [], ["SPMD601"]),
    ("axis names for groups", BUG, [("{tp: R}", '{"tp": R}'), ("{tp: R}", '{"tp": R}')], ["SPMD601"]),
    ("axis names for groups", "ok", [("{tp: I}", '{"tp": I}'), ("{tp: I}", '{"tp": I}')], []),
    ("a module constant", BUG,
     [(DECLARED_R, "        self.weight = spmd.assert_type(weight, NORM)\n"
                   "        self.bias = spmd.assert_type(bias, NORM)\n"),
      ("\n\ndef _block(", '\n\nNORM = {"tp": R}\n\n\ndef _block(')], ["SPMD601"]),
    ("assert_type imported by name", BUG,
     [(IMPORTS, "from spmd_types import I, P, R, S, assert_type\n"),
      (DECLARED_R, DECLARED_R.replace("spmd.assert_type", "assert_type"))],
     ["SPMD601"]),
    ("the long names", BUG,
     [(IMPORTS, "from spmd_types import I, P, R, Replicate, S\n"), ("{tp: R}", "{tp: Replicate}"),
      ("{tp: R}", "{tp: Replicate}")], ["SPMD601"]),
    ("mutated from I to R", BUG,
     [(DECLARED_R, DECLARED_I + "        spmd.mutate_type(self.weight, tp, src=I, dst=R)\n"
                                "        spmd.mutate_type(self.bias, tp, src=I, dst=R)\n")], ["SPMD601"]),
    ("declared in a helper", BUG,
     [(DECLARED_R, "        self.weight, self.bias = _replicated(weight, tp), _replicated(bias, tp)\n"),
      ("\n\ndef _block(", "\n\ndef _replicated(param, group):\n    return spmd.assert_type(param, {group: R})\n"
                         "\n\ndef _block(")], ["SPMD601"]),
    # a declaration the walk cannot read says nothing: the parameter escapes, as before the rules
    ("a type dict it cannot read", BUG,
     [(DECLARED_R, "        self.weight = spmd.assert_type(weight, _types())\n"
                   "        self.bias = spmd.assert_type(bias, _types())\n"),
      ("\n\ndef _block(", '\n\ndef _types():\n    return copy.deepcopy({"tp": R})\n\n\ndef _block('),
      ("import torch\n", "import copy\n\nimport torch\n")], []),
]


@pytest.mark.parametrize(("spelling", "package", "edits", "expected"), REWRITES,
                         ids=[f"{p}: {s}" for s, p, _, _ in REWRITES])
def test_declared_types_keep_the_verdict(
    tmp_path: pathlib.Path, spelling: str, package: str, edits: list, expected: list
) -> None:
    copy = tmp_path / f"gradsync_spmd_types_{package}"
    shutil.copytree(PROGRAMS / copy.name, copy)
    layers = copy / "layers.py"
    text = layers.read_text()
    for old, new in edits:
        assert old in text, (spelling, old)
        text = text.replace(old, new, 1)
    layers.write_text(text)
    results = check_files(sorted(str(p) for p in copy.glob("*.py")), Settings(mesh=("dp", "tp")))
    assert sorted(d.code for r in results for d in r.diagnostics) == expected, spelling


def test_a_type_declared_over_tp_says_nothing_of_dp(tmp_path: pathlib.Path) -> None:
    """The declarations name tp only: without the dp average every parameter's gradient is still a partial
    sum over dp (the data is split over it), and only that is reported."""
    copy = tmp_path / "gradsync_spmd_types_ok"
    shutil.copytree(PROGRAMS / copy.name, copy)
    train = copy / "train.py"
    text = train.read_text()
    loop = ("    for param in model.parameters():\n"
            "        dist.all_reduce(param.grad, op=dist.ReduceOp.AVG, group=dp)\n")
    assert loop in text
    train.write_text(text.replace(loop, ""))
    results = check_files(sorted(str(p) for p in copy.glob("*.py")), Settings(mesh=("dp", "tp")))
    missing = [d for r in results for d in r.diagnostics if d.code == "SPMD601"]
    assert len(missing) == 1 and "over axis 'dp'" in missing[0].message

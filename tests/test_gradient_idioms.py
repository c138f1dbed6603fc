"""Python spellings of a model and of its gradient synchronisation that the gradient walk follows as the
direct form (found by the dynattr, container and kwargs rewrite families of tests/fuzz/idioms.py on the
gradsync packages), each confirmed on gloo ranks as written: the model's spellings (and the step's) keep
every parameter in gradsync_microbatch_bug_sync_first_only's SPMD601 at the step (which names them); the
synchronisation's keep gradsync_ddp_bug_allreduce_after_ddp's SPMD602 at the manual all-reduce."""

from __future__ import annotations

import pathlib
import shutil

import pytest

from spmdcheck.api import Settings, check_files

PROGRAMS = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "programs"
DOUBLE = PROGRAMS / "gradsync_ddp_bug_allreduce_after_ddp"
MISSING = PROGRAMS / "gradsync_microbatch_bug_sync_first_only"
W1 = "        self.w1 = _seeded((hidden_size, in_features), 1)\n"
B1 = "        self.b1 = nn.Parameter(torch.zeros(hidden_size))\n"
W2 = "        self.w2 = _seeded((out_features, hidden_size), 2)\n"
USE = "F.linear(torch.tanh(F.linear(x, self.w1, self.b1)), self.w2)"
LOOP = "    for param in model.parameters():\n        dist.all_reduce(param.grad)  # error: SPMD602 col 9\n"

# (name, file, [(old, new), ...]): model.py's rewrites of MISSING, train.py's of DOUBLE
REWRITES = [
    ("as written", "model.py", []),
    ("setattr with f-string names", "model.py",
     [(W1, '        setattr(self, f"w{1}", _seeded((hidden_size, in_features), 1))\n'),
      (W2, '        setattr(self, f"w{2}", _seeded((out_features, hidden_size), 2))\n'),
      (USE, 'F.linear(torch.tanh(F.linear(x, getattr(self, f"w{1}"), self.b1)), getattr(self, f"w{2}"))')]),
    ("register_parameter", "model.py",
     [(B1, '        self.register_parameter("b1", nn.Parameter(torch.zeros(hidden_size)))\n')]),
    ("self._parameters", "model.py", [(B1, B1.replace("self.b1", 'self._parameters["b1"]'))]),
    ("implicitly concatenated names", "model.py",
     [(W1, '        setattr(self, "w" "1", _seeded((hidden_size, in_features), 1))\n')]),
    ("the step through getattr", "train.py", [("    optimizer.step()", '    getattr(optimizer, "step")()')]),
    ("the model through a dict comprehension", "train.py",
     [(LOOP, '    for param in {k: m for k, m in [("model", model)]}["model"].parameters():\n'
             '        dist.all_reduce(param.grad)  # error: SPMD602 col 9\n')]),
    ("the reduction through a forwarder", "train.py",
     [(LOOP, "    for param in model.parameters():\n"
             "        _call(dist.all_reduce, param.grad)  # error: SPMD602 col 9\n"),
      ("\n\ndef step(", "\n\ndef _call(fn, /, *args, **kwargs):\n    return fn(*args, **kwargs)\n\n\ndef step(")]),
]


@pytest.mark.parametrize(("spelling", "name", "edits"), REWRITES, ids=[s for s, _, _ in REWRITES])
def test_the_walk_follows_the_spelling(tmp_path: pathlib.Path, spelling: str, name: str, edits: list) -> None:
    package = MISSING if name == "model.py" or "getattr" in spelling else DOUBLE
    copy = tmp_path / package.name
    shutil.copytree(package, copy)
    target = copy / name
    text = target.read_text()
    for old, new in edits:
        assert old in text, (spelling, old)
        text = text.replace(old, new, 1)
    target.write_text(text)
    results = check_files(sorted(str(p) for p in copy.glob("*.py")), Settings(mesh=("dp",)))
    found = [(pathlib.Path(r.path).name, d.line, d.code) for r in results for d in r.diagnostics]
    if package is MISSING:
        assert found == [("train.py", 42, "SPMD601")], spelling
        assert "gradients of `w1`, `b1`, `w2` are" in results_message(results), spelling
    else:
        assert found == [("train.py", 39 if "forwarder" in spelling else 35, "SPMD602")], spelling


def results_message(results: list) -> str:
    return "".join(d.message for r in results for d in r.diagnostics)

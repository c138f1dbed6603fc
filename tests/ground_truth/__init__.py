"""The ground-truth execution harness: run programs on N gloo ranks and judge spmdcheck's verdicts.

Modules: ``spec`` (read a program: mesh, typed ``step``, GLOBAL_SHAPES), ``layout`` (per-rank blocks and
their reassembly), ``pool`` (persistent rank processes), ``worker`` (what a rank runs), ``harness``
(reference, N-rank runs, comparison, spmd-types' runtime checker), ``corpus`` and ``sweep`` (the fixtures),
``fake_megatron`` (test-only Megatron mappings). See docs/ground_truth.md.
"""

import pathlib
import sys

# The corpora's one expectation parser is tests/expectations.py: pytest puts tests/ on sys.path, and a sweep
# run as `python -m tests.ground_truth[.dtensor|.gradsync]` from the repository root needs it there too.
_TESTS = str(pathlib.Path(__file__).resolve().parent.parent)
if _TESTS not in sys.path:
    sys.path.append(_TESTS)

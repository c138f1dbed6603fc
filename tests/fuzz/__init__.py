"""Differential fuzzing of spmdcheck against execution (issue 3, items 4 and 5).

``programs`` generates random rank-local programs in the fixture convention (a hypothesis
strategy); ``runner`` gets spmdcheck's verdict and the ground-truth harness's execution verdict
for each and keeps the statistics (soundness, precision, false-positive classes); ``regressions``
writes a failing program as a fixture; ``python -m tests.fuzz`` runs it from the command line;
``metamorphic`` rewrites programs without changing their meaning (a helper, an nn.Module, another file, a
tuple) and compares spmdcheck's diagnostics before and after (tests/test_metamorphic.py); ``idioms`` (with
``sourceedit``) rewrites any module in the idioms of issue 20 (registries, getattr/setattr, containers, config
objects, decorators, generators, partial, **kwargs) and ``idiom_survey`` applies them to generated programs and to
the fixtures (``python -m tests.fuzz --idioms``).
See docs/ground_truth.md, "Differential fuzzing".

The harness package is imported as the top-level ``ground_truth`` (as tests/test_ground_truth.py
does), so tests/ must be on ``sys.path``; it is added here when this package is imported as
``tests.fuzz``.
"""
from __future__ import annotations

import os
import sys

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

"""Python idioms between the typed values and a bug (issue 20): the cases the fixture corpus cannot state
alone (a finding depends on which file holds which code), checked as small programs."""
from __future__ import annotations

from spmdcheck.api import Settings, check_sources

HELPERS = '''# spmdcheck: mesh = ["dp", "tp"]
import spmd_types as spmd
from spmd_types import R


def log_total(loss):
    total = spmd.all_reduce(loss.detach(), "dp", dst=R)
    print(total.item())
'''

TRAIN = '''# spmdcheck: mesh = ["dp", "tp"]
import torch.distributed as dist

from spmdcheck.annotations import Local

from .helpers import log_total


def step(loss: Local["dp: P, tp: I"]):
    if dist.get_rank() == 0:
        log_total(loss)
    return loss
'''


def _findings(sources: dict[str, str], registry) -> list[tuple[str, int, str]]:  # noqa: ANN001
    result = check_sources(sources, Settings(), registry)
    return sorted((path, d.line, d.code) for path, diags in result.items() for d in diags)


def test_a_collective_of_another_module_under_a_rank_condition_is_reported_there(registry):
    found = _findings({"pkg/__init__.py": "", "pkg/helpers.py": HELPERS, "pkg/train.py": TRAIN}, registry)
    assert found == [("pkg/helpers.py", 7, "SPMD501")]


def test_the_same_call_on_every_rank_is_silent(registry):
    train = TRAIN.replace("    if dist.get_rank() == 0:\n        log_total(loss)", "    log_total(loss)")
    assert _findings({"pkg/__init__.py": "", "pkg/helpers.py": HELPERS, "pkg/train.py": train}, registry) == []


def test_a_decorator_of_another_module_runs_the_function_on_rank_zero_only(registry):
    decorators = '''# spmdcheck: mesh = ["dp", "tp"]
import functools

import torch.distributed as dist


def rank_zero_only(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if dist.get_rank() == 0:
            return fn(*args, **kwargs)

    return wrapper
'''
    helpers = HELPERS.replace("def log_total", "@rank_zero_only\ndef log_total").replace(
        "from spmd_types import R\n", "from spmd_types import R\n\nfrom .deco import rank_zero_only\n"
    )
    train = TRAIN.replace("    if dist.get_rank() == 0:\n        log_total(loss)", "    log_total(loss)")
    sources = {"pkg/__init__.py": "", "pkg/deco.py": decorators, "pkg/helpers.py": helpers, "pkg/train.py": train}
    assert _findings(sources, registry) == [("pkg/helpers.py", 10, "SPMD501")]

"""What a finished analysis leaves behind: no frames held in cycles, no memo keeping its syntax trees, and a
cycle-collector budget that scales with the machine.

A program's data is freed as one lump once it is analysed; whatever holds it in a cycle (an exception kept in
a local of a frame its traceback holds, a memo of nodes) makes all of it wait for the cycle collector, whose
catch-up then walks every object of the program (a tenth of a cold run on torch/distributed).
"""

from __future__ import annotations

import gc
import pathlib
import types

import pytest

from spmdcheck.analysis import memo
from spmdcheck.api import Settings, check_files
from spmdcheck.engine import collection

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures"

# programs whose gradient walk runs both arms of an `if` that ends in `return` (gradients/statements.exec_both),
# and whose functions meet every memo (forwarders, generators, guarded imports, loop facts)
_PROGRAMS = sorted(p for p in (FIXTURES / "programs").iterdir() if p.is_dir() and p.name.startswith("gradsync_"))


def _garbage_after(run) -> list[object]:
    gc.collect()
    gc.disable()
    try:
        run()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    return found


# a training step whose gradient walk cannot choose an `if`'s arm, and both arms return: the walk runs each
# and re-raises the first arm's Return (gradients/statements.exec_both)
_BOTH_ARMS_RETURN = """\
import torch.distributed as dist


def scaled(flag, x):
    if flag:
        return x * 2
    else:
        return x * 3


def step(model, batch, flag, optimizer):
    loss = scaled(flag, model(batch)).sum()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    optimizer.step()
"""


def test_a_gradient_walk_leaves_no_frame_in_a_cycle(tmp_path: pathlib.Path) -> None:
    train = tmp_path / "train.py"
    train.write_text(_BOTH_ARMS_RETURN, encoding="utf-8")
    garbage = _garbage_after(lambda: check_files([str(train)], Settings()))
    frames = [f"{o.f_code.co_filename}:{o.f_code.co_name}" for o in garbage if isinstance(o, types.FrameType)]
    assert frames == []


@pytest.mark.parametrize("program", _PROGRAMS[:12], ids=lambda p: p.name)
def test_an_analysis_leaves_no_frame_in_a_cycle(program: pathlib.Path) -> None:
    files = sorted(str(f) for f in program.rglob("*.py"))
    garbage = _garbage_after(lambda: check_files(files, Settings()))
    frames = [f"{o.f_code.co_filename}:{o.f_code.co_name}" for o in garbage if isinstance(o, types.FrameType)]
    assert frames == []


def test_memos_forget_a_finished_program() -> None:
    files = sorted(str(f) for p in _PROGRAMS[:4] for f in p.rglob("*.py"))
    check_files(files, Settings())
    kept = {id(m): len(m._kept) for m in list(memo._MEMOS)}
    assert kept and not any(kept.values())


def test_a_memo_returns_its_fact_once_computed() -> None:
    calls: list[object] = []
    node = object()
    facts = memo.NodeMemo(lambda n: calls.append(n) or len(calls))
    assert facts(node) == facts(node) == 1
    assert facts.get(node, lambda n: 99) == 1  # the kept fact, not a new computation
    memo.forget_program_facts()
    assert facts(node) == 2


def test_the_garbage_budget_scales_with_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    def machine(page_count: int, cpus: int) -> int:
        collection.cycle_garbage_budget.cache_clear()
        monkeypatch.setattr(collection.os, "sysconf", lambda name: 4096 if name == "SC_PAGE_SIZE" else page_count)
        monkeypatch.setattr(collection.os, "cpu_count", lambda: cpus)
        return collection.cycle_garbage_budget()

    try:
        small = machine(2 * 2**30 // 4096, 8)  # 2 GiB, 8 cores: the floor
        large = machine(64 * 2**30 // 4096, 2)  # 64 GiB, 2 cores
        larger = machine(128 * 2**30 // 4096, 2)
    finally:
        collection.cycle_garbage_budget.cache_clear()
    assert small == collection._CYCLE_GARBAGE_FLOOR
    assert collection._CYCLE_GARBAGE_FLOOR < large < larger
    assert larger == pytest.approx(2 * large, rel=0.01)

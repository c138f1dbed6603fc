"""How often does the checker know the placement at a DTensor boundary call of real code? (issue 22, item 8)

    python benchmarks/dtensor_share.py [TREE] [--mesh] [--list]

TREE defaults to torchtitan 0.3.0 from the real-code corpus cache (downloaded if missing, see
tests/realcode/corpus.py), checked as one program (as the command line checks a folder). A *site* is a call
of `from_local`, `to_local`, `full_tensor`, `redistribute`, `local_map` or `parallelize_module`, by the name
called (`DTensor.from_local(...)`, `x.to_local()`, `@local_map(...)`). Each site is counted once, by where it
is written:

* reached: the analysis evaluated it at least once as that boundary (its stub rule ran);
* known:   at least one evaluation knew the operand's placement: a DTensor receiver with a known placement
           (`to_local`, `full_tensor`, `redistribute`), a local tensor with a typed axis (`from_local`), a
           contract read (`local_map`), a plan read against a module the checker built (`parallelize_module`).

The checker is run in-process with its own handlers wrapped (nothing in spmdcheck is changed): a
measurement, not a test.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "realcode"))

from spmdcheck.analysis import tp_plans  # noqa: E402
from spmdcheck.analysis.context import Options  # noqa: E402
from spmdcheck.analysis.dtensor import DTensorValue  # noqa: E402
from spmdcheck.analysis.dtensor import api as dtensor_api  # noqa: E402
from spmdcheck.analysis.values import UNKNOWN, DictValue, InstanceValue, TensorValue  # noqa: E402
from spmdcheck.api import load_registry  # noqa: E402
from spmdcheck.frontend.source import parse  # noqa: E402
from spmdcheck.frontend.source_file import mesh_names_in  # noqa: E402

BOUNDARY = ("from_local", "to_local", "full_tensor", "redistribute", "local_map", "parallelize_module")

_events: dict[int, bool] = {}  # id(call node) -> operand placement known at least once


def _note(node: cst.CSTNode, known: bool) -> None:
    _events[id(node)] = _events.get(id(node), False) or known


def _placed(value: object) -> bool:
    return isinstance(value, DTensorValue) and any(p is not None for p in value.placements)


def _wrap(name: str) -> None:
    inner = dtensor_api.HANDLERS[name]

    def handler(a, rule, bound, node):  # noqa: ANN001, ANN202
        result = inner(a, rule, bound, node)
        if name == "from_local":
            local = bound.get("local_tensor")
            _note(node, isinstance(local, TensorValue) and local.typed and not local.opaque)
        elif name == "local_map":
            _note(node, result is not UNKNOWN)
        else:
            _note(node, _placed(bound.get("self")))
        return result

    dtensor_api.HANDLERS[name] = handler


def _wrap_parallelize() -> None:
    inner = tp_plans._parallelize

    def parallelize(interp, args, node):  # noqa: ANN001, ANN202
        positional = [v for k, v, _ in args if k is None]
        named = {k: v for k, v, _ in args if k is not None}
        module = positional[0] if positional else named.get("module")
        plan = positional[2] if len(positional) > 2 else named.get("parallelize_plan")
        _note(node, isinstance(module, InstanceValue) and isinstance(plan, (DictValue, tp_plans.StyleValue)))
        return inner(interp, args, node)

    tp_plans._parallelize = parallelize


def _install() -> None:
    for name in ("from_local", "to_local", "full_tensor", "redistribute", "local_map"):
        _wrap(name)
    _wrap_parallelize()


class _Sites(cst.CSTVisitor):
    def __init__(self) -> None:
        self.sites: list[tuple[cst.Call, str]] = []

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        name = f.attr.value if isinstance(f, cst.Attribute) else f.value if isinstance(f, cst.Name) else None
        if name in BOUNDARY:
            self.sites.append((node, name))


def measure(tree: pathlib.Path, mesh: tuple[str, ...], listing: list[str] | None) -> dict[str, collections.Counter]:
    from spmdcheck.analysis.program import SourceUnit, analyze_program
    from spmdcheck.program.graph import build_graph, module_name_for

    registry = load_registry(())
    units, sites, texts = [], [], {}
    for path in sorted(tree.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        module = parse(text)
        if not isinstance(module, cst.Module):
            continue
        texts[str(path)] = text
        units.append(SourceUnit(str(path), module, Options(mesh=mesh), module_name_for(str(path)), mesh_names_in(text)))
        if any(word in text for word in BOUNDARY):
            finder = _Sites()
            module.visit(finder)
            if finder.sites:
                sites.append((path, MetadataWrapper(module, unsafe_skip_copy=True), finder))
    _events.clear()
    try:
        analyze_program(units, registry, build_graph(texts))
    except Exception as exc:  # noqa: BLE001 - a crash is counted, the measurement goes on
        print(f"crash: {type(exc).__name__}: {exc}", file=sys.stderr)
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for path, wrapper, finder in sites:
        for node, kind in finder.sites:
            c = totals[kind]
            c["sites"] += 1
            state = "unreached"
            if id(node) in _events:
                c["reached"] += 1
                c["known"] += _events[id(node)]
                state = "known" if _events[id(node)] else "unknown"
            if listing is not None:
                line = wrapper.resolve(PositionProvider)[node].start.line
                listing.append(f"{state:9s} {kind:18s} {path.relative_to(tree)}:{line}")
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", nargs="?")
    parser.add_argument("--mesh", action="store_true", help="check with torchtitan's mesh axes configured")
    parser.add_argument("--list", action="store_true", help="print every site with its state")
    ns = parser.parse_args()
    import corpus

    titan = corpus.CORPORA[0]
    tree = pathlib.Path(ns.tree) if ns.tree else corpus.ensure(titan)
    _install()
    listing: list[str] | None = [] if ns.list else None
    totals = measure(tree, titan.mesh if ns.mesh else (), listing)
    for entry in listing or ():
        print(entry)
    print(f"{tree} (mesh: {'configured' if ns.mesh else 'none'}; one program)")
    for kind in BOUNDARY:
        c = totals.get(kind, collections.Counter())
        print(f"  {kind:18s} sites {c['sites']:4d}  reached {c['reached']:4d}  placement known {c['known']:4d}")
    sites = sum(c["sites"] for c in totals.values())
    known = sum(c["known"] for c in totals.values())
    reached = sum(c["reached"] for c in totals.values())
    share = known / sites if sites else 0.0
    print(f"  {'all':18s} sites {sites:4d}  reached {reached:4d}  placement known {known:4d} ({share:.0%})")


if __name__ == "__main__":
    main()

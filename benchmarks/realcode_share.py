"""How often does the checker know the operand's type at an SPMD site of real code?

    python benchmarks/realcode_share.py [--mesh] [TREE]

TREE defaults to torchtitan 0.3.0 from the real-code corpus cache (downloaded
if missing, see tests/realcode/corpus.py). A *site* is a call written
`spmd.<api>(...)` (or `spmd.local_map(...)` used as a decorator or wrapper)
for the APIs below. Each site is counted once, by where it is written:

* reached: the analysis evaluated it at least once;
* known:   at least one evaluation saw a tensor operand with at least one typed
           axis (assert_type/mutate_type: the value being asserted; collectives:
           the input `x`; local_map: a decorated function whose in_types/out_types
           were read as types).

The checker is run in-process with its own handlers wrapped (nothing in
spmdcheck is changed): a measurement, not a test.
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

from spmdcheck.analysis import comms, signature, spmd_api  # noqa: E402
from spmdcheck.analysis.context import Options  # noqa: E402
from spmdcheck.analysis.driver import analyze_module  # noqa: E402
from spmdcheck.analysis.typeexpr import TypeExprError, axis_name, type_dict  # noqa: E402
from spmdcheck.analysis.values import UNKNOWN, Alternatives, Seq, TensorValue, TypeValue  # noqa: E402
from spmdcheck.api import load_registry  # noqa: E402
from spmdcheck.frontend.source import parse  # noqa: E402
from spmdcheck.frontend.source_file import mesh_names_in  # noqa: E402

ANNOTATIONS = {"assert_type", "mutate_type", "assert_type_like"}
COLLECTIVES = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "redistribute", "unshard",
    "convert", "reinterpret", "shard", "invariant_to_replicate",
}  # fmt: skip
KINDS = {**{a: "assert_type" for a in ANNOTATIONS}, **{c: "collective" for c in COLLECTIVES}, "local_map": "local_map"}

_events: dict[int, bool] = {}  # id(call node) -> typed operand seen
_read: set[int] = set()  # id(call node) of sites whose types (and axis) the checker read


def typed(value: object) -> bool:
    if isinstance(value, TensorValue):
        return value.typed and not value.opaque
    if isinstance(value, Alternatives):
        return all(typed(t) for t, _ in value.options)
    if isinstance(value, Seq):
        return any(typed(v) for v in value.items)
    return False


def _readable(contract: object) -> bool:
    """A local_map contract leaf the checker reads as a type (a dict, a PartitionSpec, a tuple of them)."""
    if contract is None:
        return False
    if isinstance(contract, Seq):
        return any(_readable(item) for item in contract.items)
    try:
        type_dict(contract)  # type: ignore[arg-type]
    except (TypeExprError, TypeError, AttributeError):
        return False
    return True


def _note(node: cst.CSTNode, known: bool) -> None:
    _events[id(node)] = _events.get(id(node), False) or known


def _wrap_handler(name: str) -> None:
    inner = spmd_api.HANDLERS[name]

    def handler(interp, rule, bound, node, args):  # noqa: ANN001, ANN202
        if name == "local_map":  # the call form: known when its contract reads as types
            contract = bound.get("in_types")
            leaves = list(contract.items) if isinstance(contract, Seq) else [contract]
            readable = any(_readable(t) for t in [*leaves, bound.get("out_types")])
            _note(node, readable)
            if readable:
                _read.add(id(node))
        else:
            _note(node, bool(args) and typed(args[0][1]))
        return inner(interp, rule, bound, node, args)

    spmd_api.HANDLERS[name] = handler


def _wrap_collective() -> None:
    inner = comms.apply_collective

    def apply_collective(interp, rule, bound, node):  # noqa: ANN001, ANN202
        _note(node, typed(bound.get(rule.collective.tensor_param)))
        coll = rule.collective
        given = [bound.get(k) for k in ("src", "dst")]
        types_read = all(v is None or isinstance(v, TypeValue) for v in given)
        if axis_name(bound.get(coll.axis_param) or UNKNOWN) is not None and types_read:
            _read.add(id(node))
        return inner(interp, rule, bound, node)

    comms.apply_collective = apply_collective


def _wrap_decorations() -> None:
    inner = signature.function_decorations

    def function_decorations(interp, fn):  # noqa: ANN001, ANN202
        decor = inner(interp, fn)
        for dec in fn.decorators:
            expr = dec.decorator
            if (
                isinstance(expr, cst.Call)
                and isinstance(expr.func, cst.Attribute)
                and expr.func.attr.value == "local_map"
            ):
                readable = any(_readable(t) for t in [*(decor.in_types or []), decor.out_types])
                _note(expr, readable)
                if readable:
                    _read.add(id(expr))
        return decor

    signature.function_decorations = function_decorations


def _install() -> None:
    for name in ANNOTATIONS | {"local_map"}:
        if name in spmd_api.HANDLERS:
            _wrap_handler(name)
    _wrap_collective()
    _wrap_decorations()
    _wrap_annotation_reader()


def _wrap_annotation_reader() -> None:
    inner = spmd_api._types_from

    def types_from(interp, values, node):  # noqa: ANN001, ANN202
        axes = inner(interp, values, node)
        if axes:
            _read.add(id(node))
        return axes

    spmd_api._types_from = types_from


class _Sites(cst.CSTVisitor):
    def __init__(self) -> None:
        self.sites: list[tuple[cst.Call, str]] = []

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "spmd":
            kind = KINDS.get(f.attr.value)
            if kind is not None:
                self.sites.append((node, kind))


def measure_program(
    tree: pathlib.Path, mesh: tuple[str, ...], listing: list[str] | None = None
) -> dict[str, collections.Counter]:
    """The whole package as one program (what the command line does with a folder): calls, classes and
    module contracts cross files."""
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
        axes = frozenset(mesh_names_in(text))
        units.append(SourceUnit(str(path), module, Options(mesh=mesh), module_name_for(str(path)), axes))
        if "spmd" in text:
            finder = _Sites()
            module.visit(finder)
            if finder.sites:
                wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
                sites.append((path, wrapper, finder))
    _events.clear()
    _read.clear()
    try:
        analyze_program(units, registry, build_graph(texts))
    except Exception as exc:  # noqa: BLE001 - a crash is counted, the measurement goes on
        print(f"crash: {type(exc).__name__}: {exc}", file=sys.stderr)
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for path, wrapper, finder in sites:
        _count(finder, totals, tree, path, wrapper, listing)
    return totals


def _count(finder, totals, tree, path, wrapper, listing) -> None:  # noqa: ANN001
    for node, kind in finder.sites:
        c = totals[kind]
        c["sites"] += 1
        state = "unreached"
        if id(node) in _events:
            c["reached"] += 1
            c["known"] += _events[id(node)]
            c["read"] += id(node) in _read
            state = "known" if _events[id(node)] else "unknown"
        if listing is not None:
            line = wrapper.resolve(PositionProvider)[node].start.line
            listing.append(f"{state:9s} {kind:11s} {path.relative_to(tree)}:{line}")


def measure(
    tree: pathlib.Path, mesh: tuple[str, ...], listing: list[str] | None = None
) -> dict[str, collections.Counter]:
    registry = load_registry(())
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for path in sorted(tree.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "spmd" not in text:
            continue
        module = parse(text)
        if not isinstance(module, cst.Module):
            continue
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        wrapper.resolve(PositionProvider)
        finder = _Sites()
        module.visit(finder)
        if not finder.sites:
            continue
        _events.clear()
        _read.clear()
        try:
            analyze_module(module, registry, Options(mesh=mesh), mesh_names_in(text))
        except Exception as exc:  # noqa: BLE001 - a crash is counted, the measurement goes on
            print(f"crash in {path}: {type(exc).__name__}: {exc}", file=sys.stderr)
        _count(finder, totals, tree, path, wrapper, listing)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", nargs="?")
    parser.add_argument("--mesh", action="store_true", help="check with torchtitan's mesh axes configured")
    parser.add_argument("--list", action="store_true", help="print every site with its state")
    parser.add_argument(
        "--program", action="store_true", help="check the package as one program (as the command line does)"
    )
    ns = parser.parse_args()
    import corpus

    titan = corpus.CORPORA[0]
    tree = pathlib.Path(ns.tree) if ns.tree else corpus.ensure(titan)
    _install()
    listing: list[str] | None = [] if ns.list else None
    totals = (measure_program if ns.program else measure)(tree, titan.mesh if ns.mesh else (), listing)
    for entry in listing or ():
        print(entry)
    all_sites = sum(c["sites"] for c in totals.values())
    all_known = sum(c["known"] for c in totals.values())
    all_read = sum(c["read"] for c in totals.values())
    print(f"{tree} (mesh: {'configured' if ns.mesh else 'none'}; {'one program' if ns.program else 'file by file'})")
    for kind in ("assert_type", "local_map", "collective"):
        c = totals.get(kind, collections.Counter())
        print(
            f"  {kind:12s} sites {c['sites']:4d}  reached {c['reached']:4d}  "
            f"contract read {c['read']:4d}  operand type known {c['known']:4d}"
        )
    share = all_known / all_sites if all_sites else 0.0
    read = all_read / all_sites if all_sites else 0.0
    print(f"  all          sites {all_sites:4d}  contract read {all_read:4d} ({read:.0%})  ", end="")
    print(f"operand type known {all_known:4d} ({share:.0%})")


if __name__ == "__main__":
    main()

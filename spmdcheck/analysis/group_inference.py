"""A program's own Megatron-like `parallel_state` module: which mesh axis each of its process groups spans.

Megatron's `initialize_model_parallel` (and the packages that copy it) builds every group with
`dist.new_group(ranks)` over a rank grid, in loops that every rank runs, and keeps this rank's group in a
module-level global that getters return:

    for i in range(data_parallel_size):
        ranks = range(i * tp, (i + 1) * tp)        # consecutive ranks: the innermost mesh axis (tp)
        group = dist.new_group(ranks)
        if rank in ranks:
            _TENSOR_MODEL_PARALLEL_GROUP = group
    for j in range(tp):
        ranks = range(j, world_size, tp)           # one rank of every block: the outer axis (dp)
        ...

Ranks are laid out row-major over the mesh's axes (the last axis innermost), as Megatron lays them out, so
a `range(a, b)` of consecutive ranks spans the last axis and, on a two-axis mesh, a strided
`range(a, b, step)` spans the first. A global whose every group is read this way is bound to that axis
after the module's top level runs (where it is still None), so `get_tensor_model_parallel_group()` and
`dist.get_world_size(_TENSOR_MODEL_PARALLEL_GROUP)` name the axis. A grid the checker cannot read
(Megatron's own `RankGenerator`, a list built elsewhere) leaves the global as it was: the
`group-helpers` setting, or a stub, then names the getters' axis.
"""

from __future__ import annotations

import libcst as cst

from spmdcheck.analysis import lambdas
from spmdcheck.analysis.frames import Scope
from spmdcheck.analysis.interp.loopreads import layout_free_fields
from spmdcheck.analysis.values import UNKNOWN, GroupValue, Literal, Unknown

CONTIGUOUS, STRIDED = "contiguous", "strided"
_CACHE: dict[int, tuple[cst.Module, dict[str, str]]] = {}  # id(module) -> (module, its grids)
_CACHE_SIZE = 256


def bind_group_globals(scope: Scope, mesh: tuple[str, ...]) -> None:
    """After a module's top level: its group globals whose rank grid can be read now hold their axis."""
    grids = _group_grids(scope.ctx.module)
    for name, grid in grids.items():
        axis = _axis_of(grid, mesh)
        current = scope.globals.get(name, UNKNOWN)
        if axis is not None and (isinstance(current, Unknown) or current == Literal(None)):
            scope.globals[name] = GroupValue(axis)


def _axis_of(grid: str, mesh: tuple[str, ...]) -> str | None:
    if not mesh:
        return None
    if grid == CONTIGUOUS:
        return mesh[-1]
    return mesh[0] if len(mesh) == 2 else None


def _group_grids(module: cst.Module) -> dict[str, str]:
    """Each module global assigned a `new_group` in a function (with `global`): the kind of its rank grid."""
    cached = _CACHE.get(id(module))
    if cached is not None and cached[0] is module:
        return cached[1]
    grids: dict[str, str | None] = {}
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef) and _declares_global(statement):
            for name, grid in _FunctionScan(statement).globals_assigned():
                grids[name] = grid if grids.get(name, grid) == grid else None
    found = {name: grid for name, grid in grids.items() if grid is not None}
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.clear()  # bounded: a long-lived server parses many versions of a file
    _CACHE[id(module)] = (module, found)
    return found


def _declares_global(fn: cst.FunctionDef) -> bool:
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ()
    return any(type(line) is cst.SimpleStatementLine and any(type(s) is cst.Global for s in line.body) for line in body)


class _FunctionScan:
    """The assignments of one function, in order: rank lists, groups made from them, globals set to groups."""

    def __init__(self, fn: cst.FunctionDef) -> None:
        self.global_names: set[str] = set()
        self.ranks: dict[str, str | None] = {}  # local name -> the grid of the ranks it holds
        self.groups: dict[str, str | None] = {}  # local name -> the grid of the group it holds
        self.assigned: list[tuple[str, str | None]] = []
        self._walk(fn.body)

    def _walk(self, body: cst.BaseSuite) -> None:
        """Every node of the body in source order (a libcst node's fields are in source order), not into
        nested functions (their names are their own): a walk of the fields, not libcst's visitor, which
        rebuilds every node it passes."""
        todo: list = [body]
        while todo:
            node = todo.pop()
            kind = type(node)
            if kind is cst.FunctionDef:
                continue
            if kind is cst.Global:
                self.visit_Global(node)
            elif kind is cst.Assign:
                self.visit_Assign(node)
            children: list = []
            for name in layout_free_fields(kind):
                value = getattr(node, name)
                if type(value) is list or type(value) is tuple:
                    children.extend(value)
                elif isinstance(value, cst.CSTNode):
                    children.append(value)
            todo.extend(reversed(children))

    def globals_assigned(self) -> list[tuple[str, str | None]]:
        return [(name, grid) for name, grid in self.assigned if name in self.global_names]

    def visit_Global(self, node: cst.Global) -> None:
        self.global_names.update(item.name.value for item in node.names)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        name = node.targets[0].target.value
        value = node.value
        group_grid = self._group_grid(value)
        if group_grid is not _NOT_A_GROUP:
            self.groups[name] = group_grid
            self.assigned.append((name, group_grid))
        elif isinstance(value, cst.Name) and value.value in self.groups:
            self.assigned.append((name, self.groups[value.value]))
        else:
            grid = _range_grid(value)
            if grid is not None:
                self.ranks[name] = grid
            else:
                self.ranks.pop(name, None)
                self.groups.pop(name, None)

    def _group_grid(self, value: cst.BaseExpression) -> str | None | object:
        """The grid of `dist.new_group(ranks)` (None: unreadable); _NOT_A_GROUP for any other expression."""
        value = lambdas.applied(value)  # `(lambda r: dist.new_group(r))(ranks)` is that call
        if not (isinstance(value, cst.Call) and _callee_name(value.func) == "new_group"):
            return _NOT_A_GROUP
        ranks = next((a.value for a in value.args if a.keyword is None or a.keyword.value == "ranks"), None)
        if ranks is None:
            return None
        ranks = _unlisted(ranks)
        if isinstance(ranks, cst.Name):
            return self.ranks.get(ranks.value)
        return _range_grid(ranks)


_NOT_A_GROUP = object()


def _callee_name(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _unlisted(value: cst.BaseExpression) -> cst.BaseExpression:
    """`list(x)` / `tuple(x)` -> `x`: the same ranks."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("list", "tuple"):
        if len(value.args) == 1 and value.args[0].keyword is None and not value.args[0].star:
            return value.args[0].value
    return value


def _range_grid(value: cst.BaseExpression) -> str | None:
    """`range(a, b)` (consecutive ranks), `range(a, b, step)` (strided), also inside `list(...)`."""
    value = _unlisted(value)
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "range"):
        return None
    args = value.args
    if any(a.keyword is not None or a.star for a in args):
        return None
    if len(args) == 2:
        return CONTIGUOUS
    if len(args) == 3:
        step = args[2].value
        if isinstance(step, cst.Integer) and step.value == "1":
            return CONTIGUOUS
        return STRIDED
    return None

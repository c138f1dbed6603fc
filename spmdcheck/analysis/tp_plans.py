"""Tensor-parallel plans: `parallelize_module(module, mesh, plan)` read as the boundary types of the planned
submodules, so the module's `forward` is checked on them (issue 22, item 4).

A style object (`ColwiseParallel(input_layouts=Shard(1))`, tp_styles.py) evaluates to a `StyleValue`: its
spec and the layouts its arguments give. `parallelize_module` given a module object the checker built and a
plan dict (keys are module paths: `.`-separated, `fnmatch` patterns per token as PyTorch matches them, list
indices for `nn.ModuleList` items) resolves every key against the object's submodules and records, for the
class of the object that holds each planned submodule, `attribute -> style` (`ClassPlan`). Plans belong to
the run (as module contracts do): every later check of those classes sees them, and a `forward` checked
before the plan was known is checked again.

Then, in a method of a planned class, `self.<attr>(x)` of a planned submodule the checker does not model
(an `nn.Linear`) crosses the style's boundary: the caller's local input must have the local type of the
style's input layout (tp_styles.local_type; SPMD403 at the argument, with the plan's fix), and the caller
gets the style's output placement as a local tensor (`use_local_output=True`) or as a DTensor. A submodule
the plan leaves out computes whole on every rank: given an input I (or R) on the plan's axis, its output is
the same. The root module's tensor inputs are the batch every rank of the plan's mesh holds whole (I), unless
a style of its plan takes a sequence-sharded input (sequence parallelism: then they are left untyped).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, replace

import libcst as cst

from spmdcheck.analysis import dtensor_module, tp_styles, tp_whole, writes
from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.dtensor import DTensorValue, PlacementValue, make_dtensor, to_local
from spmdcheck.analysis.dtensor.values import PARTIAL_PLACEMENT, REPLICATE_PLACEMENT
from spmdcheck.analysis.findings import Finding, Suggestion
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.layouts import MethodContract
from spmdcheck.analysis.tp_styles import PARTIAL, SHARD, Placement, StyleSpec, local_type, placement_of
from spmdcheck.analysis.values import (
    UNKNOWN,
    ClassValue,
    DictValue,
    FunctionValue,
    InstanceValue,
    LazyImport,
    Literal,
    MeshValue,
    ModuleRef,
    ModuleValue,
    Seq,
    TensorValue,
    Unknown,
    Value,
)
from spmdcheck.diagnostics.violations.contracts import ArgumentTypeMismatch
from spmdcheck.lattice import AI, GradState, Kind, SpmdType

Layouts = tuple[tuple[Placement | None, Placement | None], ...]  # per positional input: (declared, desired)


@dataclass(frozen=True)
class StyleValue(Value):
    """A parallel style object: its spec and the layouts its constructor arguments give (defaults filled)."""

    spec: StyleSpec
    inputs: Layouts  # what the caller's inputs are declared with, and what forward receives
    output: Placement | None  # where the output is redistributed to (None: as computed)
    use_local_output: bool
    local_input: bool  # PrepareModuleInput: forward receives local tensors
    readable: bool  # every argument was read (an argument the checker cannot read leaves the style unused)
    node: cst.CSTNode = field(compare=False, hash=False)  # the constructor call


@dataclass
class ClassPlan:
    """What the plans that reached one module class say: its planned submodules and, for a plan's root, how
    its inputs are typed."""

    cls: ClassValue
    axis: str
    mesh: Value
    entries: dict[str, StyleValue] = field(default_factory=dict)
    conflicting: set[str] = field(default_factory=set)  # attributes two plans gave different styles
    root: bool = False
    sequence_sharded: bool = False  # a style of the root's plan takes a sequence-sharded input

    def style(self, attr: str) -> StyleValue | None:
        return self.entries.get(attr) if attr not in self.conflicting else None


def plan_of(interp: Engine, cls: ClassValue) -> ClassPlan | None:
    plans = interp.run.tp_plans
    if not plans:
        return None
    for c in cls.mro():
        found = plans.get(id(c))
        if found is not None:
            return found
    return None


# ----------------------------------------------------------------------------- library calls
def call_library(interp: Engine, qualname: str, args: list[Arg], node: cst.Call) -> Value | None:
    """A style's constructor (its StyleValue), `parallelize_module` (the module, its plan recorded) or
    `distribute_module` (dtensor_module.py); None for any other callee."""
    spec = tp_styles.STYLES.get(qualname)
    if spec is not None:
        return _style(interp, spec, args, node)
    if qualname in tp_styles.PARALLELIZE:
        return _parallelize(interp, args, node)
    if qualname in dtensor_module.QUALNAMES:
        return dtensor_module.distribute_module(interp, args)
    return None


def _placement(interp: Engine, value: Value, node: cst.CSTNode | None) -> Placement | None:
    """A placement argument: a placement value another reader typed, else the call as written
    (`Shard(1)`, `Replicate()`, `Partial()` of torch.distributed.tensor). None: not readable."""
    kind = getattr(value, "kind", None)
    if isinstance(kind, str) and kind in (tp_styles.SHARD, tp_styles.REPLICATE, tp_styles.PARTIAL):
        dim = getattr(value, "dim", None)
        if kind == tp_styles.SHARD and not isinstance(dim, int):
            return None
        if kind == tp_styles.PARTIAL and getattr(value, "reduce_op", "sum") != "sum":
            return None
        return Placement(kind, dim if kind == tp_styles.SHARD else None)
    if not isinstance(node, cst.Call):
        return None
    kind = tp_styles.PLACEMENTS.get(_callee_qualname(interp, node.func) or "")
    if kind is None:
        return None
    if kind == tp_styles.SHARD:
        dim = _literal_int(node.args[0].value) if len(node.args) == 1 else None
        return Placement(kind, dim) if dim is not None else None
    if node.args:
        return None  # Partial("avg"): a reduction of its own
    return Placement(kind)


def _callee_qualname(interp: Engine, node: cst.BaseExpression) -> str | None:
    """The qualified name a callee written as a name or a dotted name stands for, read without evaluating it
    (a library name stays unloaded)."""
    rest: list[str] = []
    while isinstance(node, cst.Attribute):
        rest.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    frame = interp.frame
    value = frame.env.get(node.value, frame.globals.get(node.value))
    if isinstance(value, LazyImport):
        head = f"{value.module}.{value.name}"
    elif isinstance(value, ModuleRef):
        head = value.qualname
    elif isinstance(value, ModuleValue):
        head = value.name
    else:
        return None
    return interp.ctx.registry.resolve_alias(".".join([head, *reversed(rest)]))


def _literal_int(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _literal_int(node.expression)
        return -inner if inner is not None else None
    return None


def _style(interp: Engine, spec: StyleSpec, args: list[Arg], call: cst.Call) -> StyleValue:
    readable = True
    declared, desired, output = spec.input_layout, spec.desired_input_layout, spec.output_layout
    local, local_input = spec.use_local_output, False
    tuples: dict[str, Layouts | tuple[Placement | None, ...]] = {}
    fields = dict(spec.keywords)
    for keyword, value, node in args:
        role = fields.get(keyword or "")
        if role is None:
            readable = readable and keyword == "src_data_rank"
            continue
        if role in ("local", "local_input"):
            if not (isinstance(value, Literal) and isinstance(value.value, bool)):
                readable = False
            elif role == "local":
                local = value.value
            else:
                local_input = value.value
            continue
        if role == "sequence_dim":
            dim = value.value if isinstance(value, Literal) and isinstance(value.value, int) else None
            if dim is None:
                readable = False
            else:
                declared = desired = Placement(tp_styles.SHARD, dim)
            continue
        if role in ("input_kwarg_layouts", "desired_input_kwarg_layouts"):
            continue  # keyword inputs: not routed (their calls pass through unchecked)
        if role in ("input_layouts", "desired_input_layouts", "output_layouts", "desired_output_layouts"):
            read = _placements(interp, value, node)
            if read is None:
                readable = False
            else:
                tuples[role] = read
            continue
        if isinstance(value, Literal) and value.value is None:
            continue  # the default
        placement = _placement(interp, value, node)
        if placement is None:
            readable = False
        elif role == "input_layout":
            declared = placement
        elif role == "output_layout":
            output = placement
    inputs: Layouts = ((declared, desired),) if declared is not None else ()
    if spec.takes_module_inputs:
        given, wanted = tuples.get("input_layouts", ()), tuples.get("desired_input_layouts", ())
        inputs = tuple(zip(given, wanted)) if len(given) == len(wanted) else ()  # type: ignore[arg-type]
    if spec.prepares_output:
        finals = tuples.get("desired_output_layouts", ())
        output = finals[0] if len(finals) == 1 else None  # type: ignore[assignment]
        readable = readable and len(finals) == 1
    if spec.name == "SequenceParallel":
        output = declared  # a norm on the sequence shard keeps it
    return StyleValue(spec, inputs, output, local, local_input, readable, call)


def _placements(interp: Engine, value: Value, node: cst.CSTNode) -> tuple[Placement | None, ...] | None:
    """A layout or a tuple of layouts (one per input; None entries pass untouched)."""
    if isinstance(value, Literal) and value.value is None:
        return ()
    if isinstance(value, Seq):
        written = node.elements if isinstance(node, (cst.Tuple, cst.List)) else ()
        elements = [e.value for e in written] if len(written) == len(value.items) else [None] * len(value.items)
        out: list[Placement | None] = []
        for item, element in zip(value.items, elements):
            if isinstance(item, Literal) and item.value is None:
                out.append(None)
                continue
            placement = _placement(interp, item, element)  # the value, else the call as written
            if placement is None:
                return None
            out.append(placement)
        return tuple(out)
    placement = _placement(interp, value, node)
    return (placement,) if placement is not None else None


# ----------------------------------------------------------------------------- parallelize_module
def _parallelize(interp: Engine, args: list[Arg], node: cst.Call) -> Value:
    positional = [a for a in args if a[0] is None]
    named = {a[0]: a for a in args if a[0] is not None}
    module = positional[0] if positional else named.get("module")
    mesh = positional[1] if len(positional) > 1 else named.get("device_mesh")
    plan = positional[2] if len(positional) > 2 else named.get("parallelize_plan")
    if module is None:
        return UNKNOWN
    target = module[1]
    if not isinstance(target, InstanceValue) or plan is None or mesh is None:
        return target  # it returns the module it was given
    axis = _mesh_axis(interp, mesh[1])
    if axis is None:
        return target
    entries: list[tuple[InstanceValue, str, StyleValue | None]] = []
    styles = _plan_entries(plan[1])
    if styles is None:
        return target
    for key, style in styles:
        _resolve(target, key.split("."), style, entries)
    if not entries:
        return target
    _record(interp, target, axis, mesh[1], entries, [s for _, s in styles])
    return target


def _mesh_axis(interp: Engine, mesh: Value) -> str | None:
    """The axis of a plan's one-dimensional mesh: a mesh value's only dim, else the file's only mesh axis."""
    if isinstance(mesh, MeshValue):
        return mesh.axes[0] if len(mesh.axes) == 1 else None
    axes = interp.ctx.options.mesh
    return axes[0] if len(axes) == 1 and isinstance(mesh, Unknown) else None


def _plan_entries(plan: Value) -> list[tuple[str, StyleValue | None]] | None:
    """The plan's keys and styles; None for a style the checker cannot read (another library's style, a
    style given arguments it cannot read): the submodules it names are planned, but silently."""
    if isinstance(plan, StyleValue):
        return [("", plan)]
    if not isinstance(plan, DictValue):
        return None
    out: list[tuple[str, StyleValue | None]] = []
    for key, style, _ in plan.items:
        if not (isinstance(key, Literal) and isinstance(key.value, str)):
            return None  # a key the checker cannot read may name any submodule
        readable = isinstance(style, StyleValue) and style.readable
        out.append((key.value, style if readable else None))  # type: ignore[arg-type]
    return out


def _children(value: Value) -> list[tuple[str, Value]]:
    """A module's named children as `named_children()` lists them (what a plan token is matched against)."""
    if isinstance(value, InstanceValue):
        return [(n, v) for n, v in value.attrs.items() if isinstance(v, (InstanceValue, Unknown, Seq, DictValue))]
    if isinstance(value, Seq):
        return [(str(i), item) for i, item in enumerate(value.items)]
    if isinstance(value, DictValue):
        return [(k.value, v) for k, v, _ in value.items if isinstance(k, Literal) and isinstance(k.value, str)]
    return []


def _resolve(owner: Value, tokens: list[str], style: StyleValue | None, out: list) -> None:  # noqa: ANN001
    """Every submodule a key names under `owner`: (the object holding it, its attribute, the style)."""
    if tokens == [""]:
        return  # a style for the whole module: its callers' modules are not known here
    token, rest = tokens[0], tokens[1:]
    for name, child in _children(owner):
        if not fnmatch.fnmatch(name, token):
            continue
        if rest:
            _resolve(child, rest, style, out)
        elif isinstance(owner, InstanceValue):
            out.append((owner, name, style))


def _record(
    interp: Engine,
    root: InstanceValue,
    axis: str,
    mesh: Value,
    entries: list[tuple[InstanceValue, str, StyleValue | None]],
    styles: list[StyleValue | None],
) -> None:
    plans = interp.run.tp_plans
    touched: dict[int, ClassPlan] = {}
    for owner, attr, style in entries:
        cls = owner.cls
        plan = plans.get(id(cls))
        if plan is None or plan.axis != axis:
            plan = plans[id(cls)] = ClassPlan(cls, axis, mesh)
        have = plan.entries.get(attr)
        if style is None or (have is not None and have != style):
            plan.conflicting.add(attr)  # planned, but not in a way the checker can follow: silent
        if style is not None:
            plan.entries[attr] = style
        touched[id(cls)] = plan
    root_plan = plans.get(id(root.cls))
    if root_plan is None:
        root_plan = plans[id(root.cls)] = ClassPlan(root.cls, axis, mesh)
    root_plan.root = True
    # a style the checker cannot read may take a sequence-sharded input too
    root_plan.sequence_sharded |= any(style is None or _sequence_sharded(style) for style in styles)
    touched[id(root.cls)] = root_plan
    for plan in touched.values():
        if interp.log is not None:  # every root checked later sees the plan
            interp.log.wrote_shared(("tp_plan", writes.class_name(plan.cls), _describe(plan)))
        forward = plan.cls.lookup("forward")
        if isinstance(forward, FunctionValue):
            interp.run.recheck(forward, plan.cls)  # checked before the plan was known: again, with it


def _sequence_sharded(style: StyleValue) -> bool:
    """Whether a style takes its caller's input sharded on another dim than the features (sequence
    parallelism: the root's input may then be this rank's sequence shard)."""
    return any(
        declared is not None and declared.kind == tp_styles.SHARD and declared.dim != -1 for declared, _ in style.inputs
    )


def _describe(plan: ClassPlan) -> str:
    parts = [
        f"{attr}={style.spec.name}{style.inputs}{style.output}{style.use_local_output}"
        for attr, style in sorted(plan.entries.items())
    ]
    return f"{plan.axis}:{plan.root}:{plan.sequence_sharded}:{sorted(plan.conflicting)}:{';'.join(parts)}"


# ----------------------------------------------------------------------------- forward and calls
def root_forward_contract(interp: Engine, owner: ClassValue | None, fn: cst.FunctionDef) -> MethodContract | None:
    """A plan root's `forward` checked on its own: its tensor inputs are the batch every rank holds whole (I
    on the plan's axis), unless the plan takes a sequence-sharded input."""
    if owner is None or fn.name.value != "forward" or not interp.run.tp_plans:
        return None
    plan = plan_of(interp, owner)
    if plan is None or not plan.root or plan.sequence_sharded:
        return None
    params = {}
    for p in fn.params.params[1:]:
        if p.annotation is not None and _is_tensor_annotation(p.annotation.annotation):
            params[p.name.value] = {plan.axis: AI}
    return MethodContract(params, {}, None, None) if params else None


def _is_tensor_annotation(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Attribute):
        return node.attr.value == "Tensor"
    return isinstance(node, cst.Name) and node.value == "Tensor"


def _planned_attr(interp: Engine, node: cst.Call) -> tuple[ClassPlan, str] | None:
    """`self.<attr>(...)` (or `getattr(self, "<attr>")(...)`) in a method of a class a plan reached, or
    `model.<attr>(...)` of an object of such a class (`model.lm_head(h)` in a loss function given the model):
    its plan and the attribute."""
    attr = _self_attribute(interp, node.func)
    receiver: Value | None
    if attr is not None:
        receiver = interp.frame.env.get("self")
    elif isinstance(node.func, cst.Attribute) and isinstance(node.func.value, (cst.Name, cst.Attribute)):
        attr, receiver = node.func.attr.value, interp.eval(node.func.value)  # a name or a path: no side effect
    else:
        return None
    if not isinstance(receiver, InstanceValue):
        return None
    plan = plan_of(interp, receiver.cls)
    if plan is None or attr in plan.conflicting:
        return None
    return plan, attr


def _is_self(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "self"


def _self_attribute(interp: Engine, callee: cst.BaseExpression) -> str | None:
    if isinstance(callee, cst.Attribute):
        return callee.attr.value if _is_self(callee.value) else None
    if not (isinstance(callee, cst.Call) and isinstance(callee.func, cst.Name) and callee.func.value == "getattr"):
        return None
    if len(callee.args) != 2 or not _is_self(callee.args[0].value):
        return None
    written = callee.args[1].value
    if not isinstance(written, (cst.SimpleString, cst.FormattedString, cst.Name)):
        return None  # evaluated again here: only what has no side effect
    name = interp.eval(written)
    return name.value if isinstance(name, Literal) and isinstance(name.value, str) else None


def call_submodule(interp: Engine, func: Value, args: list[Arg], node: cst.Call) -> Value | None:
    """`self.<attr>(...)` of a submodule the checker does not model, in a method of a planned class: the
    style's boundary (planned) or a whole computation (left out of the plan). None: not such a call."""
    if not interp.run.tp_plans or not isinstance(func, Unknown):
        return None
    found = _planned_attr(interp, node)
    if found is None:
        return None
    plan, attr = found
    style = plan.style(attr)
    positional = [a for a in args if a[0] is None]
    if style is None:
        whole = _unplanned(plan, args)
        if whole is not None and any(s.spec.name == "ColwiseParallel" for s in plan.entries.values()):
            tp_whole.remember(whole, attr, f'"{attr}": ColwiseParallel()')
        return whole
    return _planned(interp, plan, attr, style, positional)


def _unplanned(plan: ClassPlan, args: list[Arg]) -> TensorValue | None:
    """A submodule the plan leaves out: its parameters are whole on every rank, so given a first input that
    is I (or R) on the plan's axis, and no other argument that may vary or that the checker cannot read, its
    output is the same."""
    positional = [a for a in args if a[0] is None]
    if not positional or not isinstance(positional[0][1], TensorValue):
        return None
    x = positional[0][1]
    have = x.type.get(plan.axis)
    if have is None or have.kind not in (Kind.I, Kind.R) or x.opaque:
        return None
    for _, value, _ in args[1:]:
        if isinstance(value, TensorValue):
            if value.opaque or value.type.get(plan.axis) != have:
                return None
        elif not isinstance(value, Literal):
            return None
    return TensorValue(SpmdType({plan.axis: have}), x.grad, x.rank)


def _planned(interp: Engine, plan: ClassPlan, attr: str, style: StyleValue, positional: list[Arg]) -> Value | None:
    spec = style.spec
    for (declared, desired), (_, value, arg_node) in zip(style.inputs, positional):
        if declared is not None and isinstance(value, TensorValue):
            if not _check_input(interp, plan, attr, style, declared, value, arg_node):
                return None  # reported here: what the misread input gives is not typed on (no cascade)
        if isinstance(value, DTensorValue) and isinstance(arg_node, cst.Name):
            _note_input_gradient(interp, plan, style, desired, value, arg_node)
    if spec.takes_module_inputs or spec.prepares_output or style.output is None:
        return None  # the module's own output, which the checker does not model
    x = positional[0][1] if positional and isinstance(positional[0][1], (TensorValue, DTensorValue)) else None
    rank = x.rank if x is not None else None
    grad = x.grad if x is not None else GradState.UNKNOWN
    return _deliver(plan, style.output, style.use_local_output, rank, grad)


def _note_input_gradient(
    interp: Engine, plan: ClassPlan, style: StyleValue, desired: Placement | None, dt: DTensorValue, node: cst.Name
) -> None:
    """A DTensor given to a planned module: the placement of the gradient its backward gives it on the plan's
    dim (`DTensorValue.backward`, read by `x.grad`). The style redistributes it to `desired`, where the
    module's gradient is Partial if the module's parameters are sharded and it takes it Replicate (a column-
    parallel linear: each rank's weight rows give one share), else the same placement; redistribute's
    backward takes a Shard back to the DTensor's own Shard and gathers a Shard taken from a Replicate."""
    dims = [i for i, d in enumerate(dt.dims) if d == (plan.axis,)]
    if len(dims) != 1 or desired is None:
        return
    (i,) = dims
    have = dt.placements[i]
    if have is None or have.kind == PARTIAL:
        return
    sharded = any(p.kind == SHARD for _, p in style.spec.linear_params)
    if have.kind == SHARD:
        gradient = have if desired.kind != SHARD or desired.dim == have.dim else None
    elif desired.kind == SHARD:
        gradient = REPLICATE_PLACEMENT  # a Replicate split to a shard: its gradient gathered back
    else:
        gradient = PARTIAL_PLACEMENT if sharded else REPLICATE_PLACEMENT
    if gradient is None:
        return
    known = list(dt.backward or (None,) * len(dt.placements))
    known[i] = gradient
    interp.rebind(node, replace(dt, backward=tuple(known)))


def _deliver(plan: ClassPlan, final: Placement, local: bool, rank: int | None, grad: GradState) -> Value:
    """A style's output with placement `final`: the DTensor, or its `to_local()` (default gradient placement)."""
    dt = make_dtensor(_mesh(plan), (PlacementValue(final.kind, final.dim),), rank=rank, grad=grad)
    return to_local(dt) if local else dt


def _mesh(plan: ClassPlan) -> MeshValue:
    mesh = plan.mesh
    return mesh if isinstance(mesh, MeshValue) and mesh.axes == (plan.axis,) else MeshValue((plan.axis,))


def _check_input(
    interp: Engine,
    plan: ClassPlan,
    attr: str,
    style: StyleValue,
    declared: Placement,
    value: TensorValue,
    node: cst.CSTNode,
) -> bool:
    """The caller's local input must be what the style's input layout declares it (`DTensor.from_local`
    believes it: a whole activation declared a shard, or a shard declared whole, is silently misread)."""
    axis = plan.axis
    have = value.type.get(axis)
    if have is None:
        return True
    want = local_type(declared)
    form = "kind"
    if want.kind is Kind.V:
        if have.kind is not Kind.V or have.is_pending:
            pass
        elif have.shard is None or _same_dim(have.shard, want.shard, value.rank):  # type: ignore[arg-type]
            return True
        else:
            form = "shard-dim"
    elif want.kind is Kind.P:
        if have.kind in (Kind.V, Kind.P):
            return True
    elif have.kind is want.kind:
        return True
    what = f"input of `self.{attr}` (planned `{_written(interp, style)}`, input_layouts {declared})"
    mismatch = ArgumentTypeMismatch(what, axis, have, want, form)  # type: ignore[arg-type]
    interp.report(Finding.of(mismatch, node, _fixes(interp, attr, style, have)))
    return False


def _same_dim(have: int, want: int, rank: int | None) -> bool:
    if have == want:
        return True
    if rank is None:
        return (have >= 0) == (want >= 0)  # cannot tell S(1) from S(-1) without the rank
    return have % rank == want % rank


def _written(interp: Engine, style: StyleValue) -> str:
    """The style as the plan writes it (libcst generates a node's code from the node, whatever its file)."""
    text = interp.ctx.code_of(style.node)
    return text if len(text) <= 80 else f"{style.spec.name}(...)"


def _fixes(interp: Engine, attr: str, style: StyleValue, have) -> list[Suggestion]:  # noqa: ANN001
    """The plan entry that would take this input, in DTensor spelling. It replaces the entry's style (an
    unsafe fix: the plan changes what runs) when the file binds every name it spells; otherwise it is help
    text (the plan may be in another file, or the placement need an import)."""
    spec = style.spec
    shown = placement_of(have)
    if spec.name == "ColwiseParallel" and shown is not None and shown.kind == tp_styles.SHARD and shown.dim == -1:
        title = f"plan `{attr}` RowwiseParallel: it takes the feature shard a ColwiseParallel layer hands on"
        return [_plan_fix(interp, style, title, "RowwiseParallel()", ("RowwiseParallel",))]
    if shown is not None and spec.name in ("ColwiseParallel", "RowwiseParallel", "NoParallel"):
        keyword = "input_layout" if spec.name == "NoParallel" else "input_layouts"
        title = f"declare the input's layout in the plan entry of `{attr}`"
        placement = str(shown).split("(")[0]  # the constructor's name: Shard, Replicate, Partial
        return [_plan_fix(interp, style, title, f"{spec.name}({keyword}={shown})", (spec.name, placement))]
    return []


def _plan_fix(interp: Engine, style: StyleValue, title: str, replacement: str, names: tuple[str, ...]) -> Suggestion:
    bound = interp.frame.globals
    written_here = isinstance(style.node, cst.Call) and all(name in bound for name in names)
    return Suggestion(title, replacement, style.node if written_here else None)


# ----------------------------------------------------------------------------- planned modules the checker runs
def call_planned_module(
    interp: Engine, module: InstanceValue, forward: FunctionValue, args: list[Arg], node: cst.Call
) -> Value | None:
    """`self.<attr>(...)` of a checked module a style plans (PrepareModuleInput/Output, SequenceParallel,
    NoParallel): its forward runs on the inputs as the style prepares them (each checked against the layout
    it is declared with), and the caller gets the output as the style hands it on. None: not such a call (a
    ColwiseParallel/RowwiseParallel entry needs an nn.Linear or nn.Embedding: not a checked class)."""
    if not interp.run.tp_plans or not isinstance(node, cst.Call):
        return None
    found = _planned_attr(interp, node)
    if found is None:
        return None
    plan, attr = found
    style = plan.style(attr)
    if style is None or style.spec.linear_params or style.spec.embedding_params:
        return None
    _replicated_parameters(interp, plan, style, module)
    routed: list[Arg] = []
    position = 0
    for keyword, value, arg_node in args:
        if keyword is None:
            if position < len(style.inputs):
                value = _prepared_input(interp, plan, attr, style, position, value, arg_node)
            position += 1
        routed.append((keyword, value, arg_node))
    result = interp.call(forward, routed, node, receiver=module)
    return _prepared_output(plan, style, result)


def _prepared_input(
    interp: Engine, plan: ClassPlan, attr: str, style: StyleValue, position: int, value: Value, node: cst.CSTNode
) -> Value:
    declared, desired = style.inputs[position]
    if declared is None:
        return value  # this input passes untouched
    target = desired or declared
    if isinstance(value, DTensorValue):
        if len(value.dims) != 1:
            return value
        dt = value.with_placements((PlacementValue(target.kind, target.dim),))
    elif isinstance(value, TensorValue):
        if not _check_input(interp, plan, attr, style, declared, value, node):
            return UNKNOWN
        dt = make_dtensor(_mesh(plan), (PlacementValue(target.kind, target.dim),), rank=value.rank, grad=value.grad)
    else:
        return value
    return to_local(dt) if style.local_input else dt


def _prepared_output(plan: ClassPlan, style: StyleValue, result: Value) -> Value:
    spec = style.spec
    if spec.takes_module_inputs and not spec.prepares_output:
        return result  # PrepareModuleInput: the module's own output
    if spec.prepares_output or spec.computed_output is not None:  # redistributed to the style's layout
        if style.output is None or not isinstance(result, (TensorValue, DTensorValue)):
            return result
        return _deliver(plan, style.output, style.use_local_output, result.rank, result.grad)
    if isinstance(result, DTensorValue) and style.use_local_output:
        return to_local(result)  # SequenceParallel(use_local_output=True)
    return result


def _replicated_parameters(interp: Engine, plan: ClassPlan, style: StyleValue, module: InstanceValue) -> None:
    """A style that replicates the module's parameters (SequenceParallel, NoParallel): each becomes a
    Replicate DTensor for this call (written back when the running check ends, as every shared object's)."""
    placement = style.spec.params
    if placement is None:
        return
    for name, value in list(module.attrs.items()):
        if isinstance(value, TensorValue) and value.leaf and value.grad is GradState.YES:
            interp.remember_attr(module, name)
            module.attrs[name] = make_dtensor(
                _mesh(plan), (PlacementValue(placement.kind, placement.dim),), rank=value.rank, grad=value.grad
            )

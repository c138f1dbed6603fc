"""Gradient accumulation in the gradient walk (SPMD604): hooks, `no_sync()` and repeated backward() calls.

* **Hooks.** `p.register_post_accumulate_grad_hook(fn)` runs `fn(p)` once backward() has added this
  micro-batch's gradient into `p.grad`; `p.register_hook(fn)` runs `fn(grad)` on the incoming gradient
  before it is added; `m.register_full_backward_hook(fn)` runs `fn(m, grad_input, grad_output)` (read here as
  after the module's parameters got their gradients). A hook the walk cannot follow (a lambda, a library
  function) makes what it does to the gradients unknown: they are forgotten after each backward().
* **Contexts.** A call of the program's `@contextmanager` function is a `GeneratorContext`: a `with` runs its
  body up to the `yield` on entry (`self.require_backward_grad_sync = False`) and the rest on exit (the
  `finally`). `DistributedDataParallel.no_sync()` switches off the wrapper's own sync in backward(). While a
  context of either kind is entered, a backward() whose hooks leave a gradient pending records that they
  were switched off (`unsynced`).
* **Accumulation.** backward() adds into `.grad` (sync.py calls `accumulate` per parameter and axis): pending
  onto pending stays pending; a pending gradient added onto one a hook already *summed* (a plain sum, not
  an average: summing it again multiplies it by the axis size) is the early sync, reported at the backward()
  that ran that hook; what the walk cannot name is forgotten.
* **Step.** At `optimizer.step()` (sync.py `checkpoint`), `claim_unsynced` reports the gradients still pending
  because the last backward() ran with their sync switched off, and leaves the others to SPMD601.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import libcst as cst

from spmdcheck.analysis.frames import Scope
from spmdcheck.analysis.gradients.state import OPAQUE, AxisGrad, GradRef, MethodRef, ModuleObj, Param
from spmdcheck.analysis.gradients.walker import Break, Continue, Return, WalkFrame
from spmdcheck.analysis.values import FunctionValue
from spmdcheck.diagnostics.violations.accumulation import AccumulationSyncMisplaced

if TYPE_CHECKING:
    from spmdcheck.analysis.gradients.walker import Walker

# what a hook registered by each method receives: the parameter, its incoming gradient, or the module
PARAM_HOOKS = {"register_post_accumulate_grad_hook": "param", "register_hook": "grad"}
MODULE_HOOKS = frozenset({"register_full_backward_hook", "register_backward_hook"})


@dataclass(eq=False)
class Hook:
    """A hook the program registered: the function it runs (None: one the walk cannot follow), what it is
    given ("param", "grad" or "module"), and the registration call."""

    func: Any
    kind: str
    node: cst.CSTNode


@dataclass(eq=False)
class GeneratorContext:
    """A call of the program's `@contextmanager` function, not entered yet: its body, bound arguments, call."""

    fn: cst.FunctionDef
    scope: Scope
    env: dict[str, Any]
    receiver: Any
    cls: Any
    node: cst.CSTNode


@dataclass(eq=False)
class DdpNoSync:
    """`ddp_model.no_sync()`: DistributedDataParallel's own sync switched off while it is entered."""

    wrapper: ModuleObj
    node: cst.CSTNode


@dataclass
class Entered:
    """A context being run: the `with` statement, and whether the walk knows what it switches."""

    node: cst.CSTNode
    known: bool = True


@dataclass
class Accumulation:
    """What this module keeps during one walk (`Walker.accumulation`)."""

    hooks: dict[int, list[Hook]] = field(default_factory=dict)  # id(param) -> its hooks
    module_hooks: list[tuple[ModuleObj, Hook]] = field(default_factory=list)
    entered: list[Entered] = field(default_factory=list)
    # (id(param), axis) -> the backward() whose hook summed the gradient there
    synced_by: dict[tuple[int, str], cst.CSTNode] = field(default_factory=dict)
    # (id(param), axis) -> (the hook's registration or the DDP wrapper, the `with` that switched it off, DDP?)
    unsynced: dict[tuple[int, str], tuple[cst.CSTNode, cst.CSTNode, bool]] = field(default_factory=dict)
    reported: set[int] = field(default_factory=set)  # registrations (node ids) an early sync was reported for


def of(walker: Walker) -> Accumulation:
    if walker.accumulation is None:
        walker.accumulation = Accumulation()
    return walker.accumulation


# ----------------------------------------------------------------------------------------------- hooks
def register_param_hook(walker: Walker, param: Param, name: str, args: list, node: cst.CSTNode) -> Any:
    """`p.register_post_accumulate_grad_hook(fn)` / `p.register_hook(fn)`."""
    func = args[0][0] if args else None
    followed = func if isinstance(func, (MethodRef, FunctionValue)) else None
    of(walker).hooks.setdefault(id(param), []).append(Hook(followed, PARAM_HOOKS[name], walker.remember(node)))
    return OPAQUE


def register_module_hook(walker: Walker, module: ModuleObj, args: list, node: cst.CSTNode) -> Any:
    """`m.register_full_backward_hook(fn)`: run after backward() for the parameters of `m`."""
    func = args[0][0] if args else None
    followed = func if isinstance(func, (MethodRef, FunctionValue)) else None
    of(walker).module_hooks.append((module, Hook(followed, "module", walker.remember(node))))
    return OPAQUE


def _call_hook(walker: Walker, hook: Hook, argument: Any, node: cst.CSTNode) -> None:
    func = hook.func
    args = [(argument, node)] if hook.kind != "module" else [(argument, node), (OPAQUE, node), (OPAQUE, node)]
    if isinstance(func, MethodRef):
        walker.call_function(walker, func.func, func.receiver, args, {})
    elif isinstance(func, FunctionValue):
        walker.call_function(walker, func, None, args, {})


# ----------------------------------------------------------------------------------------------- backward
def ddp_syncs(wrapper: ModuleObj) -> bool:
    """Whether a DistributedDataParallel wrapper syncs in this backward() (not inside its `no_sync()`)."""
    return wrapper.attrs.get("require_backward_grad_sync", True) is not False


def accumulate(
    walker: Walker,
    param: Param,
    axis: str,
    incoming: AxisGrad,
    node: cst.CSTNode,
    plus: Callable[[AxisGrad | None, AxisGrad], AxisGrad],
) -> AxisGrad | None:
    """The gradient of `param` on `axis` once backward() (at `node`) added `incoming` into it: `plus` (sync.py's
    `+=` rule) of what it held and what the `register_hook` hooks make of `incoming`; None (unknown) after an
    early sync, which is reported here."""
    state = walker.accumulation
    key = (id(param), axis)
    if state is not None:
        grad_hooks = [h for h in state.hooks.get(id(param), ()) if h.kind == "grad"]
        if grad_hooks:
            hooked = _through_grad_hooks(walker, param, axis, incoming, grad_hooks, node)
            if hooked is None:
                return None
            incoming = hooked
    previous = walker.state.get(param, axis)
    if previous is None or incoming.by_ddp:
        # the first backward() since the gradients were zeroed (or nothing is known of them), or DDP, which
        # sums the whole accumulated buffer
        if state is not None:
            state.synced_by.pop(key, None)
        return plus(previous, incoming)
    if previous.status == "summed" and incoming.status == "pending" and state is not None:
        synced_at = state.synced_by.get(key)
        averaged = len(previous.divisions) > len(incoming.divisions)
        if synced_at is not None and not (averaged or previous.by_ddp):
            # a plain sum summed again multiplies the part synced so far by the axis size (an average
            # averaged again does not: it stays pending until the rest is averaged too)
            _report_early(walker, param, axis, synced_at)
            return None
    return plus(previous, incoming)


def _through_grad_hooks(
    walker: Walker, param: Param, axis: str, incoming: AxisGrad, hooks: list[Hook], node: cst.CSTNode
) -> AxisGrad | None:
    """`register_hook` hooks act on this backward()'s gradient before it is added: run them on it alone."""
    previous = walker.state.get(param, axis)
    walker.state.set(param, axis, incoming)
    for hook in hooks:
        if hook.func is None:
            walker.state.set(param, axis, previous)
            return None
        _call_hook(walker, hook, GradRef(param), node)
    after = walker.state.get(param, axis)
    walker.state.set(param, axis, previous)
    if after is None or previous is None:
        return after
    if after.status == previous.status:  # every micro-batch's gradient synced on its own, or none of them
        return after
    return None  # some micro-batches synced and some not: left to the step (never reported as known)


def _report_early(walker: Walker, param: Param, axis: str, synced_at: cst.CSTNode) -> None:
    state = of(walker)
    hook = next((h for h in state.hooks.get(id(param), ()) if h.kind == "param"), None)
    if hook is None:
        hook = next((h for m, h in state.module_hooks if param in _params_of(m)), None)
    if hook is None or id(hook.node) in state.reported:
        return
    state.reported.add(id(hook.node))  # one finding per hook: the micro-batches after it repeat the same sync
    same = tuple(
        p.name
        for p in walker.state.params.values()
        if state.synced_by.get((id(p), axis)) is synced_at and walker.state.get(p, axis) is not None
    )
    violation = AccumulationSyncMisplaced("early", axis, same or (param.name,), walker.site(hook.node))
    walker.report(violation, synced_at)
    for p in list(walker.state.params.values()):  # one finding per sync: the others are forgotten with it
        if state.synced_by.get((id(p), axis)) is synced_at:
            state.synced_by.pop((id(p), axis), None)
            if p is not param:
                walker.state.set(p, axis, None)


def report_resummed(walker: Walker, param: Param, axis: str, first: cst.CSTNode, node: cst.CSTNode, api: str) -> None:
    """A sum (at `node`) of a gradient that a sum at `first` synced before a later backward() added local
    gradients to it (a sync inside the micro-batch loop): the synced part is summed again. Reported once for
    every gradient that sum synced; nothing more is known of them."""
    same = tuple(
        p.name
        for p in walker.state.params.values()
        if (grad := walker.state.get(p, axis)) is not None and grad.synced_before is first
    )
    names = same or (param.name,)
    violation = AccumulationSyncMisplaced("early", axis, names, walker.site(first), api=api, repeated=first is node)
    walker.report(violation, node)
    for p in list(walker.state.params.values()):
        grad = walker.state.get(p, axis)
        if grad is not None and grad.synced_before is first:
            walker.state.set(p, axis, None)
    walker.state.set(param, axis, None)


def _params_of(module: ModuleObj) -> list[Param]:
    return [p for _, p in module.named_parameters()]


def after_backward(walker: Walker, models: Sequence[ModuleObj], node: cst.CSTNode) -> None:
    """The hooks registered on the parameters of `models` (and on their modules) run, as backward() at `node`
    runs them once their gradients are accumulated; what they leave pending inside `no_sync()` is recorded."""
    state = walker.accumulation
    params: list[Param] = []
    for model in models:
        for p in _params_of(model):
            if p not in params:
                params.append(p)
    switched_off = state.entered[-1] if state is not None and state.entered else None
    if state is not None and (state.hooks or state.module_hooks):
        unknown = any(not e.known for e in state.entered)
        for param in params:
            hooks = [h for h in state.hooks.get(id(param), ()) if h.kind == "param"]
            if not hooks:
                continue
            if unknown or any(h.func is None for h in hooks):
                walker.state.forget(param)
                continue
            before = {axis: walker.state.get(param, axis) for axis in walker.state.axes_of(param)}
            for hook in hooks:
                _call_hook(walker, hook, param, node)
            _record(walker, state, [param], before, hooks[0].node, switched_off, node)
        for module, hook in state.module_hooks:
            owned = [p for p in _params_of(module) if p in params]
            if not owned:
                continue
            if unknown or hook.func is None:
                for p in owned:
                    walker.state.forget(p)
                continue
            before = {(id(p), a): walker.state.get(p, a) for p in owned for a in walker.state.axes_of(p)}
            _call_hook(walker, hook, module, node)
            _record_many(walker, state, owned, before, hook.node, switched_off, node)
    for model in models:
        if model.ddp_axis is not None and model.ddp_node is not None:
            _record_ddp(walker, model, params, switched_off)


def _record(
    walker: Walker,
    state: Accumulation,
    params: list[Param],
    before: dict[str, AxisGrad | None],
    hook_node: cst.CSTNode,
    switched_off: Entered | None,
    node: cst.CSTNode,
) -> None:
    keyed = {(id(params[0]), axis): grad for axis, grad in before.items()}
    _record_many(walker, state, params, keyed, hook_node, switched_off, node)


def _record_many(
    walker: Walker,
    state: Accumulation,
    params: list[Param],
    before: dict[tuple[int, str], AxisGrad | None],
    hook_node: cst.CSTNode,
    switched_off: Entered | None,
    node: cst.CSTNode,
) -> None:
    """After the hooks ran: which gradients they summed (at this backward()), which they left pending."""
    for param in params:
        for axis in walker.state.axes_of(param):
            key = (id(param), axis)
            grad, earlier = walker.state.get(param, axis), before.get(key)
            if grad is None:
                continue
            if grad.status == "summed" and (earlier is None or earlier.status == "pending"):
                state.synced_by[key] = node
                state.unsynced.pop(key, None)
            elif grad.status == "pending" and switched_off is not None:
                state.unsynced[key] = (hook_node, switched_off.node, False)
            elif grad.status == "pending":
                state.unsynced.pop(key, None)


def _record_ddp(walker: Walker, wrapper: ModuleObj, params: list[Param], switched_off: Entered | None) -> None:
    axis = wrapper.ddp_axis
    assert axis is not None and wrapper.ddp_node is not None
    state = of(walker)
    for param in params:
        key = (id(param), axis)
        grad = walker.state.get(param, axis)
        if grad is not None and grad.status == "pending" and switched_off is not None and not ddp_syncs(wrapper):
            state.unsynced[key] = (wrapper.ddp_node, switched_off.node, True)
        else:
            state.unsynced.pop(key, None)


# ----------------------------------------------------------------------------------------------- contexts
def is_context_manager(fn: cst.FunctionDef) -> bool:
    """A function decorated with `@contextmanager` / `@contextlib.contextmanager`."""
    for decorator in fn.decorators:
        expr = decorator.decorator
        if isinstance(expr, cst.Name) and expr.value == "contextmanager":
            return True
        if isinstance(expr, cst.Attribute) and expr.attr.value == "contextmanager":
            return True
    return False


def no_sync_of(wrapper: ModuleObj, node: cst.CSTNode) -> Any:
    """`model.no_sync()` of a DistributedDataParallel wrapper."""
    return DdpNoSync(wrapper, node) if wrapper.ddp_axis is not None else OPAQUE


def enter(walker: Walker, value: Any, node: cst.With) -> Callable[[], None] | None:
    """Enter the context `value` of the `with` at `node`: what to run when it is left (None: nothing)."""
    if isinstance(value, DdpNoSync):
        wrapper = value.wrapper
        previous = wrapper.attrs.get("require_backward_grad_sync", True)
        wrapper.attrs["require_backward_grad_sync"] = False
        entered = Entered(walker.remember(node))
        of(walker).entered.append(entered)

        def leave_ddp() -> None:
            wrapper.attrs["require_backward_grad_sync"] = previous
            _pop(walker, entered)

        return leave_ddp
    if not isinstance(value, GeneratorContext):
        return None
    parts = _around_yield(value.fn)
    entered = Entered(walker.remember(node), parts is not None)
    of(walker).entered.append(entered)
    if parts is None:
        return lambda: _pop(walker, entered)
    before, after = parts
    frame = WalkFrame(dict(value.env), value.scope, value.receiver, value.cls)
    _run_in(walker, frame, before)

    def leave() -> None:
        try:
            _run_in(walker, frame, after)
        finally:
            _pop(walker, entered)

    return leave


def _pop(walker: Walker, entered: Entered) -> None:
    stack = of(walker).entered
    if entered in stack:
        stack.remove(entered)


def _run_in(walker: Walker, frame: WalkFrame, body: Sequence[cst.CSTNode]) -> None:
    saved = walker.frame
    walker.frame = frame
    try:
        walker.exec_block(walker, body)
    except (Return, Break, Continue):
        pass
    finally:
        walker.frame = saved


def _around_yield(fn: cst.FunctionDef) -> tuple[list[cst.CSTNode], list[cst.CSTNode]] | None:
    """The statements a `@contextmanager` body runs before its `yield` and after it (a `yield` at its top
    level, or in the body of a top-level `try` whose `finally` runs after it); None for other shapes."""
    if not isinstance(fn.body, cst.IndentedBlock):
        return None
    body = list(fn.body.body)
    for i, stmt in enumerate(body):
        if _is_yield(stmt):
            return body[:i], body[i + 1 :]
        if isinstance(stmt, cst.Try) and isinstance(stmt.body, cst.IndentedBlock):
            inner = list(stmt.body.body)
            for j, small in enumerate(inner):
                if _is_yield(small):
                    final = list(stmt.finalbody.body.body) if stmt.finalbody is not None else []
                    orelse = list(stmt.orelse.body.body) if stmt.orelse is not None else []
                    return body[:i] + inner[:j], inner[j + 1 :] + orelse + final + body[i + 1 :]
    return None


def _is_yield(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.Yield)
    )


# ----------------------------------------------------------------------------------------------- step
def claim_unsynced(walker: Walker, pending: dict[str, list[Param]], node: cst.CSTNode) -> dict[str, list[Param]]:
    """At `optimizer.step()`: the pending gradients whose sync the last backward() ran switched off are
    reported here (SPMD604); the others are returned for SPMD601."""
    state = walker.accumulation
    if state is None or not state.unsynced:
        return pending
    rest: dict[str, list[Param]] = {}
    for axis, params in pending.items():
        claimed: dict[tuple[int, int, bool], list[Param]] = {}
        sources: dict[tuple[int, int, bool], tuple[cst.CSTNode, cst.CSTNode, bool]] = {}
        for param in params:
            record = state.unsynced.get((id(param), axis))
            if record is None:
                rest.setdefault(axis, []).append(param)
                continue
            key = (id(record[0]), id(record[1]), record[2])
            claimed.setdefault(key, []).append(param)
            sources[key] = record
        for key, params_off in claimed.items():
            hook_node, context_node, by_ddp = sources[key]
            names = tuple(dict.fromkeys(p.name for p in params_off))
            violation = AccumulationSyncMisplaced(
                "never", axis, names, walker.site(hook_node), walker.site(context_node), by_ddp
            )
            walker.report(violation, node)
    return rest

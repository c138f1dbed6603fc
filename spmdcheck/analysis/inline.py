"""Calls into the program's own functions, inlined: the callee's body is checked with the argument types.

Calls are memoised by (function, abstract arguments, grad mode, mesh): a repeated call replays its
summary (result, collectives issued, effects on its arguments and objects) instead of running again.
"""

from __future__ import annotations

import functools

import libcst as cst

from spmdcheck.analysis import configs, decorators, rankflow, signature
from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.frames import Engine, Frame, Summary
from spmdcheck.analysis.values import (
    NUMBER,
    UNKNOWN,
    DimSize,
    FunctionValue,
    InstanceValue,
    ShapeValue,
    TensorValue,
    Value,
    carries_types,
    share_objects,
)


def call_function(
    interp: Engine,
    func: FunctionValue,
    args: list[Arg],
    node: cst.CSTNode,
    receiver: Value | None = None,
) -> Value:
    """Inline a call to a checked function (any file): its body is checked with the argument types.

    Calls are memoised by (function, abstract arguments, grad mode, mesh): a repeated call replays
    its summary (result, collectives issued, effects on its arguments and objects) instead of re-running.
    """
    fn = func.node
    if fn.decorators and type(func) is FunctionValue:  # an Undecorated is the body its decorators were given
        expanded = decorators.call_decorated(interp, func, args, node, receiver)
        if expanded is not None:
            return expanded
    if fn in interp.inline_stack or len(interp.inline_stack) >= interp.ctx.options.max_inline_depth:
        return UNKNOWN
    if (
        func.scope is not None
        and func.scope.ctx.library
        and not func.scope.ctx.stub
        and not any(carries_types(v) for v in (receiver, *(v for _, v, _ in args)))
    ):
        return UNKNOWN  # a library function given nothing typed can produce no finding and no type
    key = _summary_key(interp, func, args, receiver)
    summary = interp.run.summaries.get(key) if key is not None else None
    if summary is not None:
        if interp.log is not None:
            interp.log.reuse(summary.root, summary.units)
        return _replay(interp, summary, fn, args, node, receiver)
    return _run(interp, func, args, node, receiver, key)


def _run(
    interp: Engine, func: FunctionValue, args: list[Arg], node: cst.CSTNode, receiver: Value | None, key: tuple | None
) -> Value:
    """Run the callee's body on the call's arguments; its summary is kept under `key` (None: not memoised)."""
    fn = func.node
    log = interp.log
    if log is not None:
        log.enter_body(fn)
    interp.inline_stack.append(fn)
    interp.call_sites.append((interp.ctx, node))
    start = len(interp.collectives)
    instances = _instances_of(args, receiver)
    result: Value = UNKNOWN
    globals_ = func.scope.globals if func.scope is not None else interp.frame.globals
    frame = Frame(decorators.enclosing_names(func), globals_, function=fn, owner=func.owner)
    frame.yields = rankflow.YieldLog(len(interp.divergent), len(interp.attr_logs))  # a generator's body yields into it
    skipped = False
    try:
        # decorators and defaults resolve in the callee's globals; argument mismatches are reported
        # at the call site, in the caller's file
        with interp.entered(frame):
            decor = signature.function_decorations(interp, fn)
            if decor.skip:
                skipped = True
                return TensorValue()  # a no_typecheck function's results are untyped tensors
            if decor.grad_enabled is not None:
                interp.grad_enabled = decor.grad_enabled
            for name, value in signature.parameter_values(interp, fn, decor, args, receiver):
                frame.env[name] = value
            with interp.entered(frame, func.scope):  # the body runs in the callee's file
                if not interp.mesh:
                    interp.mesh = interp.ctx.options.mesh
                interp.exec_block(fn.body.body if isinstance(fn.body, cst.IndentedBlock) else fn.body.body)
                result = signature.check_returns(interp, fn, decor, frame.returns)
                if frame.yields.items:
                    result = rankflow.generated(frame.yields)  # a generator: what a loop over it iterates
            return result
    finally:
        interp.inline_stack.pop()
        interp.call_sites.pop()
        units = log.exit_body() if log is not None else frozenset()
        if not skipped:
            _apply_param_effects(interp, fn, args, frame.param_effects, receiver)
            if key is not None:
                # what the summary keeps, later checks see: writes to it are undone from now on
                share_objects(result)
                for _, obj in instances:
                    for value in obj.attrs.values():
                        share_objects(value)
                interp.run.summaries[key] = Summary(
                    result,
                    _distinct_sites(interp.collectives[start:]),
                    dict(frame.param_effects),
                    [(i, dict(obj.attrs)) for i, obj in instances],
                    units,
                    log.current if log is not None else None,
                )


def _distinct_sites(collectives: list) -> list:
    """The collectives a call issued, each site once: enough to compare branches, and bounded."""
    seen: set[int] = set()
    out = []
    for entry in collectives:
        if id(entry[2]) not in seen:
            seen.add(id(entry[2]))
            out.append(entry)
    return out


def _instances_of(args: list[Arg], receiver: Value | None) -> list[tuple[int, InstanceValue]]:
    """The objects a call can change, by position (-1: the receiver), so a summary replays onto the new ones."""
    out = [(i, v) for i, (_, v, _) in enumerate(args) if isinstance(v, InstanceValue)]
    if isinstance(receiver, InstanceValue):
        out.append((-1, receiver))
    return out


def _abstract_argument(interp: Engine, passed: list[Value | None], value: Value) -> object:
    """What of an argument a call's summary depends on. (Module-level, given its context: a nested function
    that called itself would be a cycle through its own cell, garbage for the collector at every call.)"""
    kind = type(value)  # exact types (none of these has a subclass): asked of every argument of every call
    if kind is InstanceValue:
        return (value.snapshot(), configs.slot_key(interp, value))
    if kind is DimSize or kind is ShapeValue:
        # a size matters to the callee only as the size of a tensor it is given (a view of that tensor
        # keeps the dim); any other size is just a number, and calls given one share their summary
        owner = next((i for i, v in enumerate(passed) if v is value.tensor), None)
        if owner is None:
            return NUMBER if isinstance(value, DimSize) else UNKNOWN
        return (type(value).__name__, owner, getattr(value, "index", None), getattr(value, "rank", None))
    if isinstance(value, FunctionValue) and value.closure is not None:
        # a wrapper: what it was made with
        return value, value.closure.key(value.node, functools.partial(_abstract_argument, interp, passed))
    return value


def _summary_key(interp: Engine, func: FunctionValue, args: list[Arg], receiver: Value | None) -> tuple | None:
    passed = [receiver, *(v for _, v, _ in args)]
    abstract = functools.partial(_abstract_argument, interp, passed)

    try:
        key = (
            id(func.node),
            tuple((k, abstract(v)) for k, v, _ in args),
            abstract(receiver) if receiver is not None else None,
            interp.grad_enabled,
            interp.mesh,
            interp.checking,
            # a function defined in another: the names of its definition its body reads
            func.closure.key(func.node, abstract) if func.closure is not None else None,
        )
        hash(key)
    except TypeError:
        return None  # a value that cannot be compared (should not happen): just no memo
    return key


def _replay(
    interp: Engine, summary: Summary, fn: cst.FunctionDef, args: list[Arg], node: cst.CSTNode, receiver: Value | None
) -> Value:
    if interp.divergent or interp.rank_branches:
        for api, axis, call in summary.collectives:
            interp.note_collective(api, axis, call)  # checked against the rank-dependent conditions
    else:
        interp.collectives.extend(summary.collectives)
    objects = dict(_instances_of(args, receiver))
    for i, attrs in summary.instance_states:
        if i in objects:
            obj = objects[i]
            for name in [n for n in obj.attrs if n not in attrs]:
                interp.set_attr(obj, name, None)
            for name, value in attrs.items():
                if obj.attrs.get(name) is not value:
                    interp.set_attr(obj, name, value)
    _apply_param_effects(interp, fn, args, summary.param_effects, receiver)
    return summary.result


def _apply_param_effects(
    interp: Engine, fn: cst.FunctionDef, args: list[Arg], effects: dict[str, Value], receiver: Value | None
) -> None:
    """In-place writes to a parameter happened to the caller's argument: rebind what the caller named."""
    if not effects:
        return
    params = [p.name.value for p in (*fn.params.posonly_params, *fn.params.params)]
    if receiver is not None and params:
        params = params[1:]
    positional = [a for a in args if a[0] is None]
    by_name = {p: a for p, a in zip(params, positional)}
    by_name.update({k: (k, v, n) for k, v, n in args if k is not None})
    for name, value in effects.items():
        arg = by_name.get(name)
        if arg is not None and isinstance(arg[2], (cst.Name, cst.Attribute)):
            interp.rebind(arg[2], value)

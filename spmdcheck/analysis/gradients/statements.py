"""Statements of the gradient walk: blocks, `if` (both arms joined when the walk cannot decide the test),
`for` (one pass per element of a list it follows, else the body once joined with not running it), `with`,
`try`, assignments and returns."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from spmdcheck.analysis.gradients import accumulation, exprs, library, loops, norms
from spmdcheck.analysis.gradients.state import OPAQUE, Data
from spmdcheck.analysis.gradients.walker import Break, Continue, Return, Walker


def exec_block(walker: Walker, body: Sequence[cst.CSTNode]) -> None:
    for stmt in body:
        exec_stmt(walker, stmt)


def exec_stmt(walker: Walker, stmt: cst.CSTNode) -> None:
    walker.tick()
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            exec_small(walker, small)
    elif isinstance(stmt, cst.If):
        exec_if(walker, stmt)
    elif isinstance(stmt, cst.For):
        exec_for(walker, stmt)
    elif isinstance(stmt, cst.While):
        exec_while(walker, stmt)
    elif isinstance(stmt, cst.With):
        exec_with(walker, stmt)
    elif isinstance(stmt, cst.Try):
        exec_block(walker, stmt.body.body)
        if stmt.finalbody is not None:
            exec_block(walker, stmt.finalbody.body.body)
    elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        walker.env[stmt.name.value] = OPAQUE


def exec_small(walker: Walker, small: cst.BaseSmallStatement) -> None:
    if isinstance(small, cst.Expr):
        exprs.evaluate(walker, small.value)
    elif isinstance(small, cst.Assign):
        value = exprs.evaluate(walker, small.value)
        for target in small.targets:
            exprs.assign(walker, target.target, value)
    elif isinstance(small, cst.AnnAssign) and small.value is not None:
        exprs.assign(walker, small.target, exprs.evaluate(walker, small.value))
    elif isinstance(small, cst.AugAssign):
        exprs.augmented(walker, small)
    elif isinstance(small, cst.Return):
        raise Return(exprs.evaluate(walker, small.value) if small.value is not None else None)
    elif isinstance(small, cst.Raise):
        raise Return(OPAQUE)
    elif isinstance(small, cst.Break):
        raise Break
    elif isinstance(small, cst.Continue):
        raise Continue


def exec_if(walker: Walker, node: cst.If) -> None:
    truth = exprs.test(walker, node.test)
    orelse = node.orelse
    other: Sequence[cst.CSTNode] = []
    if isinstance(orelse, cst.If):
        other = [orelse]
    elif isinstance(orelse, cst.Else):
        other = orelse.body.body
    if truth is True:
        exec_block(walker, node.body.body)
    elif truth is False:
        exec_block(walker, other)
    else:
        condition = norms.rank_condition(walker, node.test, exprs.evaluate, exprs.test)
        exec_both(walker, node.body.body, other, condition)


def exec_both(
    walker: Walker, first: Sequence[cst.CSTNode], second: Sequence[cst.CSTNode], condition: object = None
) -> None:
    """Two paths the walk cannot choose between: each on its own copy; what they disagree on is unknown.
    `condition`: the first path's (norms.py keeps it for the gradients counted there)."""
    before_state, before_env = walker.state.copy(), dict(walker.env)
    yields = walker.frame.yields  # type: ignore[union-attr]
    yielded = len(yields.items) if yields is not None else 0
    norms.push_condition(walker, condition)
    try:
        ended_first = _exec_path(walker, first)
    finally:
        norms.pop_condition(walker)
    after_state, after_env = walker.state, dict(walker.env)
    walker.state = before_state
    walker.frame.env = before_env  # type: ignore[union-attr]
    norms.push_condition(walker, None)
    try:
        ended_second = _exec_path(walker, second)
    finally:
        norms.pop_condition(walker)
    walker.state.join(after_state)
    if yields is not None and len(yields.items) != yielded:
        yields.unknown = True  # how many elements a generator yields depends on a path the walk cannot choose
    for name in set(after_env) | set(walker.env):
        if after_env.get(name, OPAQUE) is not walker.env.get(name, OPAQUE):
            # a squared norm one arm added to keeps its terms (each with the arm's condition): norms.py
            walker.env[name] = norms.join(after_env.get(name, OPAQUE), walker.env.get(name, OPAQUE))
    if ended_first is not None and ended_second is not None:
        try:
            raise ended_first
        finally:
            # the raised exception's traceback holds this frame: the locals must not hold the exception, or
            # the cycle keeps every frame of the walk (and the whole program they reach) for the collector
            ended_first = ended_second = None


def _exec_path(walker: Walker, body: Sequence[cst.CSTNode]) -> Exception | None:
    """The path's run; the Return, Break or Continue that ended it (without its traceback: kept in a local
    of the caller, the traceback's frames would hold that local in a cycle)."""
    try:
        exec_block(walker, body)
    except (Return, Break, Continue) as ended:
        return ended.with_traceback(None)
    return None


def exec_for(walker: Walker, node: cst.For) -> None:
    iterable = exprs.evaluate(walker, node.iter)
    counted = library.counted_of(iterable)
    if counted is not None:
        backward, steps = loops.body_calls(node)
        if steps:  # a training loop: a zero_grad() the walk cannot see may part its iterations
            exec_unknown_loop(walker, node.body.body, node.target, _any_iteration(counted))
            return
        items = counted.items()
        if items is not None:  # a known count: iteration by iteration
            _exec_iterations(walker, node, items)
            return
        if backward:  # a micro-batch loop of an unknown count (loops.py)
            _exec_iterations(walker, node, [counted.element(i) for i in counted.indices()])
            return
    items = exprs.iterate(walker, iterable)
    if items is None:
        exec_unknown_loop(walker, node.body.body, node.target)
        return
    _exec_iterations(walker, node, items)


def exec_while(walker: Walker, node: cst.While) -> None:
    """A `while` loop whose body calls `backward()` and steps no optimizer is a micro-batch loop (`i = 0; while
    i < n: ...; i += 1`, `while True: batch = next(batches)`): walked as the first, a middle and the last of
    several iterations, as a `for` over an unknown count is (loops.py); an index counted from 0 up to the test's
    bound (`_while_index`) compares there as a `for` loop's does. Any other `while`: its body once, joined with not
    running it."""
    backward, steps = loops.body_calls(node)
    if not backward or steps or node.orelse is not None:
        exec_unknown_loop(walker, node.body.body, None)
        return
    index = _while_index(walker, node)
    for position in loops.POSITIONS:
        if index is not None:
            name, count = index
            walker.env[name] = loops.LoopIndex(position, count)
        try:
            exec_block(walker, node.body.body)
        except Continue:
            continue
        except Break:
            break


def _while_index(walker: Walker, node: cst.While) -> tuple[str, str] | None:
    """`i = 0; while i < n:` (or `!=`): the index name and the count's code, as `for i in range(n)` has them (each
    iteration's `i` a `loops.LoopIndex`); None for any other test or start."""
    test = node.test
    if not (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and len(test.comparisons) == 1):
        return None
    target = test.comparisons[0]
    if not isinstance(target.operator, (cst.LessThan, cst.NotEqual)) or walker.env.get(test.left.value) != 0:
        return None
    return test.left.value, walker.text(target.comparator)


def _exec_iterations(walker: Walker, node: cst.For, items: Sequence[object]) -> None:
    for item in items:
        exprs.assign(walker, node.target, item)
        try:
            exec_block(walker, node.body.body)
        except Continue:
            continue
        except Break:
            break


def _any_iteration(counted: loops.Counted) -> object:
    """The element of a counted sequence standing for any iteration: its tensors (a batch is split as every
    other is), no index (which iteration it is, the walk does not know)."""

    def unindexed(value: object) -> object:
        if isinstance(value, tuple):
            return tuple(unindexed(v) for v in value)
        return value if isinstance(value, Data) else OPAQUE

    return unindexed(counted.element(OPAQUE))


def exec_unknown_loop(
    walker: Walker, body: Sequence[cst.CSTNode], target: cst.BaseExpression | None, item: object = OPAQUE
) -> None:
    """A loop over what the walk does not follow (`item`: what every iteration's target is known to be): its body
    once, joined with not running it."""
    if target is not None:
        exprs.assign(walker, target, item)
    try:
        exec_both(walker, body, [])
    except (Break, Continue):
        pass


def exec_with(walker: Walker, node: cst.With) -> None:
    leaving = []
    try:
        for item in node.items:
            value = exprs.evaluate(walker, item.item)
            leave = accumulation.enter(walker, value, node)  # `no_sync()`: the program's or DDP's
            if leave is not None:
                leaving.append(leave)
            if item.asname is not None:
                # what a context yields is not followed (the context object itself is no value of the walk)
                exprs.assign(walker, item.asname.name, OPAQUE if value is None or leave is not None else value)
        exec_block(walker, node.body.body)
    finally:
        for leave in reversed(leaving):
            leave()

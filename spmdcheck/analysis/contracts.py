"""Module contracts reaching modules: where a contract object attaches, and what it does to the module.

A contract (layouts.py) reaches a module class through an attribute its stub names, on the module or on its
nested config class, or the slot of a typed config field (configs.py). Then that module's `forward` is
checked on it: its arguments typed by the dst layouts (src where no dst is given), its parameters and
buffers by the state layouts, its returned value against out_src; and a call of the module is routed as
its `parallelize` wrapper runs it.
"""

from __future__ import annotations

import libcst as cst

from spmdcheck.analysis import configs, signature, spmd_api, writes
from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.layouts import MethodContract, method_contract, typed_state
from spmdcheck.analysis.values import (
    UNKNOWN,
    ClassValue,
    ContractValue,
    FunctionValue,
    InstanceValue,
    TensorValue,
    Value,
)
from spmdcheck.diagnostics.violations.contracts import ArgumentTypeMismatch, ReturnTypeMismatch
from spmdcheck.lattice import GradState, SpmdType


def attach(interp: Engine, owner: Value, attr: str, value: Value) -> None:
    """`obj.<attr> = contract`, `Cls.Config(<attr>=contract)`, `<attr> = contract` in a class body."""
    if not isinstance(value, ContractValue) or attr not in value.rule.attach:
        return
    if isinstance(owner, InstanceValue) and id(owner) in interp.run.slots.slot_of:
        # the config of one field: its module only, not every one of its class
        configs.attach_slot(interp, owner, value)
        return
    cls = owner.cls if isinstance(owner, InstanceValue) else owner
    if not isinstance(cls, ClassValue):
        return
    module = cls.outer if cls.outer is not None and cls.lookup("forward") is None else cls
    contracts = interp.run.contracts
    if contracts.get(id(module)) == value:
        return
    contracts[id(module)] = value
    if interp.log is not None:  # every root checked later sees the contract
        interp.log.wrote_shared(("contract", writes.class_name(module), writes.describe(value)))
    forward = module.lookup("forward")
    if isinstance(forward, FunctionValue):
        # already checked without its contract: check it again, now that the contract is known
        interp.run.recheck(forward, module)


def attach_from_call(interp: Engine, cls: ClassValue, args: list[Arg]) -> None:
    """`Linear.Config(..., sharding_config=ShardingConfig(...))`."""
    for keyword, value, _ in args:
        if keyword is not None and isinstance(value, ContractValue):
            attach(interp, cls, keyword, value)


def attach_from_body(interp: Engine, cls: ClassValue) -> None:
    for name, value in cls.namespace.items():
        if isinstance(value, ContractValue):
            attach(interp, cls, name, value)


def for_forward(interp: Engine, owner: ClassValue | None, fn: cst.FunctionDef) -> MethodContract | None:
    if owner is None or fn.name.value != "forward":
        return None
    known = interp.run.contracts
    contract = next((known[id(c)] for c in owner.mro() if id(c) in known), None)
    if contract is None:
        return None
    return method_contract(interp, contract)


def call_module(
    interp: Engine, module: InstanceValue, forward: FunctionValue, args: list[Arg], node: cst.CSTNode
) -> Value | None:
    """`self.w2(h)` on a module with a contract, as its `parallelize` wrapper runs it: each argument must be
    its in_src layout (SPMD403 here), forward receives the in_dst layout, the caller gets out_dst. None: the
    module has no contract the checker knows."""
    from_slot = configs.slot_contract(interp, module) if forward.node.name.value == "forward" else None
    if from_slot is not None:
        contract: MethodContract | None = method_contract(interp, from_slot)
    else:
        contract = for_forward(interp, module.cls, forward.node)
    if contract is None:
        return None
    # a field's module gets its parameters typed, not its buffers: torchtitan's RoPE cache, typed R by its
    # contract, reaches `local_map(out_types={dp: S(0), ...})` returns (spmd_types 0.3.1 itself rejects that R
    # there, so the cache cannot be typed so at run time by the path the checker follows)
    typed_state(module, contract, parameters_only=from_slot is not None, remember=interp.remember_attr)
    names = [p.name.value for p in (*forward.node.params.posonly_params, *forward.node.params.params)][1:]
    routed: list[Arg] = []
    position = 0
    for keyword, value, arg_node in args:
        name = keyword if keyword not in (None, "*") else None
        if keyword is None:
            name = names[position] if position < len(names) else None
            position += 1
        _check_source(interp, contract, name, value, arg_node)
        if name in contract.params and (value is UNKNOWN or isinstance(value, TensorValue)):
            grad = value.grad if isinstance(value, TensorValue) else GradState.UNKNOWN
            rank = value.rank if isinstance(value, TensorValue) else None
            value = TensorValue(SpmdType(contract.params[name]), grad, rank)
        routed.append((keyword, value, arg_node))
    result = interp.call(forward, routed, node, receiver=module)
    if from_slot is not None and contract.returns:
        signature.check_declared(interp, result, contract.returns, node, ReturnTypeMismatch, "returned value (out_src)")
    if contract.delivered and (result is UNKNOWN or isinstance(result, TensorValue)):
        grad = result.grad if isinstance(result, TensorValue) else GradState.UNKNOWN
        return TensorValue(SpmdType(contract.delivered), grad, None)
    return result


def call_opaque_module(interp: Engine, module: InstanceValue, args: list[Arg]) -> Value | None:
    """A call of a module built from a typed config field whose `forward` the checked code does not define
    (it comes from a library base: `class Linear(nn.Linear, Module)`): its contract alone says what it takes
    and gives. The arguments are checked against in_src (by keyword, or the only positional argument when
    in_src names one input), the caller gets out_dst (else out_src). None: no contract reached the module."""

    found = configs.slot_contract(interp, module)
    if found is None:
        return None
    contract = method_contract(interp, found)
    positional = [a for a in args if a[0] is None]
    only = next(iter(contract.sources)) if len(contract.sources) == 1 and len(positional) == 1 else None
    for keyword, value, arg_node in args:
        _check_source(interp, contract, keyword if keyword not in (None, "*") else only, value, arg_node)
    if not contract.delivered:
        return None
    return TensorValue(SpmdType(contract.delivered), GradState.UNKNOWN, None)  # its weights decide the gradient


def _check_source(interp: Engine, contract: MethodContract, name: str | None, value: Value, node: cst.CSTNode) -> None:
    """An argument the caller passes must be the contract's in_src layout for it (SPMD403 at the argument)."""
    if name in contract.sources and isinstance(value, TensorValue):
        spmd_api.refine(
            interp,
            value,
            contract.sources[name],
            node,
            ArgumentTypeMismatch,
            f"argument `{name}` (the contract's in_src)",
        )

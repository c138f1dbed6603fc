"""State shared by one file's analysis: rules, options, sites, findings, the mesh in scope."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.values import Branch, Value
from spmdcheck.rules.stubs import Registry


@dataclass
class Options:
    mesh: tuple[str, ...] = ()  # the configured mesh (current mesh by default)
    strict: bool = False
    max_inline_depth: int = 3


@dataclass
class FileContext:
    registry: Registry
    options: Options
    module: cst.Module
    known_axes: set[str] = field(default_factory=set)  # every axis name valid in this file
    findings: list[Finding] = field(default_factory=list)
    sites: list[cst.CSTNode] = field(default_factory=list)
    _site_ids: dict[int, int] = field(default_factory=dict)
    _seen: set[tuple[str, int, str]] = field(default_factory=set)
    branch_stack: list[tuple[Branch, ...]] = field(default_factory=list)
    spmd_alias: str = "spmd_types"  # how the file spells the spmd_types module
    megatron_names: dict[str, str] = field(default_factory=dict)  # qualname -> local spelling
    # An observer of name bindings (--show-types, editor hovers): called with the name, its new value,
    # the node that binds it and the module. Never changes the analysis.
    on_bind: Callable[[str, Value, cst.CSTNode, cst.Module], None] | None = None

    def bound(self, name: str, value: Value, node: cst.CSTNode) -> None:
        if self.on_bind is not None:
            self.on_bind(name, value, node, self.module)

    def site(self, node: cst.CSTNode) -> int:
        key = id(node)
        ref = self._site_ids.get(key)
        if ref is None:
            ref = len(self.sites)
            self.sites.append(node)
            self._site_ids[key] = ref
        return ref

    def report(self, finding: Finding) -> None:
        if self.branch_stack and self.branch_stack[-1] and not finding.branches:
            finding.branches = self.branch_stack[-1]
        key = finding.key()
        if key in self._seen:
            return
        self._seen.add(key)
        self.findings.append(finding)

    def code_of(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

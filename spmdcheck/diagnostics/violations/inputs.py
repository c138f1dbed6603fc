"""0xx: the input itself (and the checker itself): files, annotations, axis names, equations, settings."""

from __future__ import annotations

from typing import Literal

from spmdcheck.diagnostics.violation import Violation


class InternalError(Violation):
    """The checker failed on a file (`error_type` set), or gave up on it (`detail` says why)."""

    code = "SPMD000"
    detail: str
    error_type: str | None = None  # the exception's class name when the checker crashed
    where: str | None = None  # `file.py:line` of the innermost frame

    @property
    def message(self) -> str:
        if self.error_type is None:
            return f"{self.detail}; the file was not checked"
        at = f" (at {self.where})" if self.where else ""
        return f"internal error: {self.error_type}: {self.detail}{at}"


class SyntaxErrorFound(Violation):
    """The file (or one expression of it) cannot be parsed or analysed.

    reason: `syntax` (the parser's message in `detail`), `undecodable` (the decoder's full message in
    `detail`), `deep-expression` (one expression `depth` levels deep, the limit `limit`), `too-deep` (the
    whole file overflowed the analysis).
    """

    code = "SPMD001"
    reason: Literal["syntax", "undecodable", "deep-expression", "too-deep"]
    detail: str = ""
    depth: int = 0
    limit: int = 0

    @property
    def message(self) -> str:
        if self.reason == "syntax":
            return f"syntax error: {self.detail}; the file was not checked"
        if self.reason == "deep-expression":
            return (
                f"expression nested {self.depth} levels deep (the limit is {self.limit}): it was not "
                "analysed (read as an unknown value); the rest of the file was checked"
            )
        if self.reason == "too-deep":
            return "file is too deeply nested to analyse"
        return self.detail


class MalformedAnnotation(Violation):
    """An SPMD type (annotation, type argument, S(d)) that cannot be read.

    reason: `unreadable` (the reader's error in `detail`), `merge` (the types given disagree: `detail`),
    `no-types` (assert_type with none), `bare-without-mesh`, `bad-type-argument` (`api`'s `param`= is not a
    type), `shard-dim-range` (`limit` dims at most), `shard-dim-not-int`, `local-spec` (Local(...) or
    Local[...] not given a string).
    """

    code = "SPMD002"
    reason: Literal[
        "unreadable",
        "merge",
        "no-types",
        "bare-without-mesh",
        "bad-type-argument",
        "shard-dim-range",
        "shard-dim-not-int",
        "local-spec",
    ]
    detail: str = ""
    api: str = ""
    param: str = ""
    limit: int = 0

    @property
    def message(self) -> str:
        texts = {
            "unreadable": f"cannot read this SPMD type: {self.detail}",
            "merge": self.detail,
            "no-types": "assert_type needs at least one type",
            "bare-without-mesh": "a bare type fills the axes of the current mesh, but no mesh is in scope (set "
            "[tool.spmdcheck] mesh or use set_current_mesh)",
            "bad-type-argument": f"`{self.api}`: {self.param}= must be R, I, V, P or S(d) (a bare `S` needs its dim)",
            "shard-dim-range": f"S(d) out of range: a tensor has at most {self.limit} dims",
            "shard-dim-not-int": "S(d) needs an integer dim",
            "local-spec": 'Local(...) takes a string like "tp: V, dp: S(0)"',
        }
        return texts[self.reason]


class UnknownAxis(Violation):
    code = "SPMD003"
    axis: str
    mesh_axes: tuple[str, ...]  # the axes of the mesh in scope

    @property
    def message(self) -> str:
        return f"unknown mesh axis {self.axis!r}; the mesh in scope has {', '.join(sorted(self.mesh_axes))}"


class MalformedEinsum(Violation):
    """An equation that does not parse (`op` None) or does not fit the operands of `op`."""

    code = "SPMD004"
    detail: str  # the einsum reader's error
    op: str | None = None

    @property
    def message(self) -> str:
        if self.op is None:
            return f"malformed einsum equation: {self.detail}"
        return f"`{self.op}`: {self.detail}"


class ConfigError(Violation):
    """Settings, a stub file or the file itself that cannot be read.

    reason: `setting` (the settings reader's message in `detail`), `stub` (the stub loader's), `unreadable`
    (the operating system's reason the file cannot be read).
    """

    code = "SPMD005"
    reason: Literal["setting", "stub", "unreadable"]
    detail: str

    @property
    def message(self) -> str:
        if self.reason == "stub":
            return f"stub error: {self.detail}"
        if self.reason == "unreadable":
            return f"cannot read file: {self.detail}"
        return self.detail


class UnusedSuppression(Violation):
    """A suppression comment with codes (`unused`) it suppresses nothing of.

    `unknown` are the ones that are no code of spmdcheck; `whole_file` for `ignore-file[...]`. The fix
    keeps the codes in `keep` or removes the `removal`: the whole comment `line`, the `comment`, or the
    `directive` alone.
    """

    code = "SPMD006"
    directive: str  # as written
    unused: tuple[str, ...]
    unknown: tuple[str, ...] = ()
    whole_file: bool = False
    keep: tuple[str, ...] = ()
    removal: Literal["line", "comment", "directive"] = "directive"

    @property
    def message(self) -> str:
        if self.unknown:
            why = f"unknown code {', '.join(self.unknown)}"
        elif self.whole_file:
            why = f"no finding of {', '.join(self.unused)} in this file"
        else:
            why = f"nothing to suppress for {', '.join(self.unused)}"
        return f"unused suppression `{self.directive}`: {why}"

    @property
    def fix_title(self) -> str:
        if self.keep:
            return f"keep only {', '.join(self.keep)}"
        return {"line": "remove the comment line", "comment": "remove the comment"}.get(
            self.removal, "remove the directive"
        )

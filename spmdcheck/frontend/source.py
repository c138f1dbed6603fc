"""Reading a file: the cheap relevance scan, parsing, and the syntax-error diagnostic."""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass

from spmdcheck.frontend.guard import DeepExpression, Screened, null_byte_failure, quiet_ast_parse, screen
from spmdcheck.frontend.lazy_libcst import cst  # imported on first use

# Types only enter a program through these spellings: annotations and the spmd_types API, Megatron
# mappings, tensors that need grad (raw collectives on them), or torch factories under a configured mesh;
# and a rank-dependent branch (SPMD501) needs a rank. A file that names none of them cannot produce a
# diagnostic beyond a syntax error.
_TYPE_SOURCES = re.compile(
    rb"spmd|Annotated\[|Local\[|requires_grad|Parameter|megatron|get_rank|get_local_rank|_parallel_rank"
)
_TORCH = re.compile(rb"torch")


def is_relevant(data: bytes, mesh_configured: bool = False) -> bool:
    if _TYPE_SOURCES.search(data) is not None:
        return True
    return mesh_configured and _TORCH.search(data) is not None


def read_source_bytes(path: str) -> bytes:
    """A regular file's bytes. Opened without blocking and checked first: a FIFO or a device that got a
    `.py` name after discovery raises OSError instead of hanging the run."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return fh.read()


def decode_source(data: bytes) -> str | ParseFailure:
    """The text of a source file as Python reads it: a UTF-8 BOM or a PEP 263 coding cookie, else UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # an unknown encoding name, or a cookie that contradicts the BOM
        return ParseFailure(f"cannot decode the file: {exc.msg if hasattr(exc, 'msg') else exc}", 1, 1)
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        line = data[: getattr(exc, "start", 0)].count(b"\n") + 1
        return ParseFailure(f"the file is not valid {encoding}: {getattr(exc, 'reason', exc)}", line, 1)
    return text[1:] if text.startswith("\ufeff") else text


def syntax_error(data: bytes) -> ParseFailure | None:
    """The cheap check for files the analysis skips: CPython's parser, 10x faster than libcst."""
    try:
        quiet_ast_parse(data)
    except SyntaxError as exc:
        return ParseFailure(exc.msg, exc.lineno or 1, exc.offset or 1)
    except ValueError as exc:
        return null_byte(data.decode("utf-8", "replace")) if b"\0" in data else ParseFailure(str(exc), 1, 1)
    except RecursionError as exc:
        return ParseFailure(str(exc), 1, 1)
    return None


def null_byte(text: str) -> ParseFailure:
    """`guard.null_byte_failure`: a binary file is one line at its first NUL."""
    return ParseFailure(*null_byte_failure(text))


@dataclass
class ParseFailure:
    message: str
    line: int
    column: int


class _Unvalidated:
    """libcst validates every node as it is built (`CSTNode.__post_init__`); the nodes its parser builds
    are valid by construction, and the checks cost a tenth of a parse, so they are off while parsing."""

    def __enter__(self) -> None:
        from libcst._nodes.base import CSTNode

        self.saved = CSTNode.__dict__.get("__post_init__")
        CSTNode.__post_init__ = _no_validation  # type: ignore[method-assign]

    def __exit__(self, *exc: object) -> None:
        from libcst._nodes.base import CSTNode

        CSTNode.__post_init__ = self.saved  # type: ignore[method-assign]


def _no_validation(self: object) -> None:
    pass


def parse(text: str, shallow: bool = False) -> cst.Module | ParseFailure:
    return parse_screened(text, shallow)[0]


def parse_screened(text: str, shallow: bool = False) -> tuple[cst.Module | ParseFailure, list[DeepExpression]]:
    """Parse with libcst what `guard.screen` lets through; also the expressions it replaced (too deep).
    `shallow`: CPython parsed the text (or one it was cut from) and `guard.shallow` held: no screen."""
    screened = Screened(text) if shallow else screen(text)
    if screened.failure is not None:
        message, line, column = screened.failure
        return ParseFailure(message, line, column), screened.deep
    try:
        with _Unvalidated():
            return cst.parse_module(screened.text), screened.deep
    except cst.ParserSyntaxError as exc:
        # Python's own message and position, as `python` would report the file: libcst's message is its
        # parser's token list ("expected one of !=, %, &, ..."), and its raw_line can be one line past the error
        message, line, column = exc.message, exc.raw_line, exc.raw_column + 1
        if "\0" in text:
            return null_byte(text), []
        try:
            quiet_ast_parse(text)
        except SyntaxError as py_exc:
            message, line, column = py_exc.msg, py_exc.lineno or line, py_exc.offset or column
        except (ValueError, RecursionError, MemoryError):
            pass
        return ParseFailure(message, line, column), []
    except (RecursionError, ValueError, MemoryError) as exc:  # pathological input: still a diagnostic, not a crash
        return ParseFailure(f"{type(exc).__name__}: {str(exc)[:200]}", 1, 1), []

"""`spmdcheck server`: a Language Server over stdio (diagnostics, quick fixes, type hovers).

This package's own modules import pygls and lsprotocol (the `lsp` extra)
lazily: the checker's command line never needs them.
"""

from __future__ import annotations


def build():  # noqa: ANN201 - the return type lives in the lazily imported module
    """The language server, ready to start (raises ImportError without the `lsp` extra)."""
    from spmdcheck.server.lsp import build_server

    return build_server()


def serve() -> None:
    """Run the language server on stdin/stdout until the client says exit."""
    build().start_io()

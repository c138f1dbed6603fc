"""`spmdcheck server`: a Language Server over stdio (diagnostics, quick fixes, type hovers).

This package's own modules import pygls and lsprotocol (the `lsp` extra)
lazily: the checker's command line never needs them.
"""

from __future__ import annotations


def serve() -> None:
    """Run the language server on stdin/stdout until the client says exit."""
    from spmdcheck.server.lsp import build_server

    build_server().start_io()

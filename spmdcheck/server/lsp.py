"""The pygls wiring: LSP messages in, `documents.Analysis` results out.

Diagnostics are published on open, change and save, for the file and for the open files whose program holds
it; a finding's call chain is its related information; quick fixes are the
checker's suggestions as workspace edits; hover shows the inferred SPMD type
and gradient type of the name under the cursor.
"""

from __future__ import annotations

import os
import pathlib

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer

from spmdcheck import __version__
from spmdcheck.diagnostics.related import related_locations
from spmdcheck.engine.buffers import DiskTexts
from spmdcheck.server.documents import Analysis, Span, analyse

_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "note": types.DiagnosticSeverity.Information,
}


def _range(span: Span) -> types.Range:
    return types.Range(
        start=types.Position(line=span.start_line, character=span.start_char),
        end=types.Position(line=span.end_line, character=span.end_char),
    )


def _span(r: types.Range) -> Span:
    return Span(r.start.line, r.start.character, r.end.line, r.end.character)


class SpmdLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("spmdcheck", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.analyses: dict[str, Analysis] = {}
        self.disk = DiskTexts()  # the saved files of the open files' programs, read again when changed

    def buffers(self) -> dict[str, str]:
        """The open files' texts, by path: unsaved edits count in the programs of the others."""
        out = {}
        for uri, document in list(self.workspace.text_documents.items()):
            if uri.startswith("file:"):
                out[document.path] = document.source
        return out

    def refresh(self, uri: str) -> None:
        """Check an open file with its program and publish its diagnostics, then re-check the open files whose
        program holds it (they import it, or import what imports it): an edit of a helper changes their
        findings."""
        self._publish(uri)
        if uri.startswith("file:"):
            self.refresh_dependants(uri, self.workspace.get_text_document(uri).path)

    def refresh_dependants(self, uri: str, path: str) -> None:
        """Re-check the open files other than `uri` whose program holds `path`."""
        changed = os.path.abspath(path)
        for other, analysis in list(self.analyses.items()):
            if other != uri and changed in {os.path.abspath(p) for p in analysis.program}:
                self._publish(other)

    def _publish(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        path = document.path if uri.startswith("file:") else None
        analysis = analyse(document.source, path, self.buffers(), self.disk)
        self.analyses[uri] = analysis
        diagnostics = [
            types.Diagnostic(
                range=_range(analysis.diagnostic_span(d)),
                message=d.message,
                severity=_SEVERITY.get(d.severity, types.DiagnosticSeverity.Warning),
                code=d.code,
                source="spmdcheck",
                related_information=_related(d.message) or None,
            )
            for d in analysis.result.diagnostics
        ]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=document.version)
        )


def _related(message: str) -> list[types.DiagnosticRelatedInformation]:
    """The call chain (and other files' sites) the message names, as locations the editor can open."""
    return [
        types.DiagnosticRelatedInformation(
            location=types.Location(
                uri=pathlib.Path(os.path.abspath(r.path)).as_uri(),
                range=types.Range(
                    start=types.Position(line=max(r.line - 1, 0), character=0),
                    end=types.Position(line=max(r.line - 1, 0), character=0),
                ),
            ),
            message=r.message,
        )
        for r in related_locations(message)
    ]


def build_server() -> SpmdLanguageServer:
    server = SpmdLanguageServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: SpmdLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: SpmdLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: SpmdLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.refresh(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: SpmdLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.analyses.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        if uri.startswith("file:"):  # its unsaved text no longer counts: the others read the saved file
            ls.refresh_dependants(uri, uris.to_fs_path(uri) or "")

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    def code_action(ls: SpmdLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        analysis = ls.analyses.get(uri)
        if analysis is None:
            return []
        actions = []
        for fix in analysis.quick_fixes(_span(params.range)):
            d = fix.diagnostic
            actions.append(
                types.CodeAction(
                    title=f"{fix.title} ({d.code})",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[
                        types.Diagnostic(
                            range=_range(analysis.diagnostic_span(d)),
                            message=d.message,
                            code=d.code,
                            source="spmdcheck",
                        )
                    ],
                    edit=types.WorkspaceEdit(
                        changes={uri: [types.TextEdit(range=_range(e.span), new_text=e.new_text) for e in fix.edits]}
                    ),
                )
            )
        return actions

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: SpmdLanguageServer, params: types.HoverParams) -> types.Hover | None:
        analysis = ls.analyses.get(params.text_document.uri)
        if analysis is None:
            return None
        text = analysis.hover(params.position.line, params.position.character)
        if text is None:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text))

    return server

"""The pygls wiring: LSP messages in, `documents.Analysis` results out.

Diagnostics are published on open, change and save; quick fixes are the
checker's suggestions as workspace edits; hover shows the inferred SPMD type
and gradient type of the name under the cursor.
"""

from __future__ import annotations

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from spmdcheck import __version__
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

    def refresh(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        analysis = analyse(document.source, document.path if uri.startswith("file:") else None)
        self.analyses[uri] = analysis
        diagnostics = [
            types.Diagnostic(
                range=_range(analysis.diagnostic_span(d)),
                message=d.message,
                severity=_SEVERITY.get(d.severity, types.DiagnosticSeverity.Warning),
                code=d.code,
                source="spmdcheck",
            )
            for d in analysis.result.diagnostics
        ]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=document.version)
        )


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

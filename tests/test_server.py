"""`spmdcheck server` driven over stdio by a small JSON-RPC client, as an editor would."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time

import pytest

pytest.importorskip("pygls")
pytest.importorskip("lsprotocol")

BUGGY = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F

    import spmd_types as spmd
    from spmd_types import I, R
    from spmdcheck.annotations import Local


    def mlp(x: Local["tp: I"], w1: Local["tp: S(0)"], w2: Local["tp: S(1)"]) -> Local["tp: I"]:
        h = F.gelu(F.linear(x, w1))
        y = F.linear(h, w2)
        return spmd.all_reduce(y, "tp", src=spmd.P, dst=I)
""")
FIXED = BUGGY.replace("F.linear(x, w1)", "F.linear(spmd.convert(x, 'tp', src=I, dst=R), w1)")
TIMEOUT = 60


class Client:
    """Content-Length framed JSON-RPC over the server's stdin/stdout; a reader thread queues what arrives."""

    def __init__(self, cwd) -> None:
        env = dict(os.environ)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "spmdcheck", "server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        self.inbox: queue.Queue = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = stream.readline()
                if not line:
                    return
                line = line.decode("ascii").strip()
                if not line:
                    break
                key, value = line.split(":", 1)
                headers[key.strip().lower()] = value.strip()
            body = stream.read(int(headers["content-length"]))
            self.inbox.put(json.loads(body))

    def send(self, message: dict) -> None:
        data = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: dict | None) -> dict:
        self.next_id += 1
        my_id = self.next_id
        self.send({"id": my_id, "method": method, "params": params})
        reply = self.wait(lambda m: m.get("id") == my_id and "method" not in m)
        assert "error" not in reply, reply
        return reply["result"]

    def wait(self, predicate) -> dict:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                message = self.inbox.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if predicate(message):
                return message
        raise AssertionError(f"no such message from the server; stderr: {self.proc.stderr.read1().decode()}")

    def diagnostics(self, uri: str) -> list[dict]:
        message = self.wait(
            lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
        )
        return message["params"]["diagnostics"]

    def close(self) -> int:
        self.request("shutdown", None)
        self.notify("exit", {})
        try:
            return self.proc.wait(timeout=TIMEOUT)
        finally:
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                stream.close()


def apply_edits(text: str, edits: list[dict]) -> str:
    """Apply LSP TextEdits (ASCII text here, so UTF-16 characters are code points), last first."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(pos: dict) -> int:
        return offsets[min(pos["line"], len(lines))] + pos["character"]

    spans = sorted(
        ((offset(e["range"]["start"]), offset(e["range"]["end"]), e["newText"]) for e in edits), reverse=True
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


@pytest.fixture
def session(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    path = tmp_path / "mlp.py"
    path.write_text(BUGGY)
    client = Client(tmp_path)
    client.request(
        "initialize",
        {"processId": os.getpid(), "rootUri": tmp_path.as_uri(), "capabilities": {}},
    )
    client.notify("initialized", {})
    yield client, path.as_uri(), path
    assert client.close() == 0


def test_diagnostics_quick_fix_and_hover(session):
    client, uri, path = session
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": BUGGY}},
    )
    (diag,) = client.diagnostics(uri)
    assert diag["code"] == "SPMD102" and diag["severity"] == 1 and diag["source"] == "spmdcheck"
    assert diag["range"]["start"] == {"line": 9, "character": 15}
    assert "Invariant on axis 'tp'" in diag["message"]

    actions = client.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": diag["range"], "context": {"diagnostics": [diag]}},
    )
    assert actions, "the SPMD102 suggestion is offered as a quick fix"
    first = actions[0]
    assert first["kind"] == "quickfix" and "SPMD102" in first["title"]
    fixed = apply_edits(BUGGY, first["edit"]["changes"][uri])
    assert fixed == FIXED  # the checker's own first suggestion, nothing else

    # the editor applies the edit: the server re-checks the new text and clears the finding
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": fixed}]},
    )
    assert client.diagnostics(uri) == []

    # hover on `h` where it is bound, and on the use of `x` inside the fix (a parameter: I, gradient I)
    hover = client.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 9, "character": 4}}
    )
    assert "SPMD type: `{tp: S(-1)}`" in hover["contents"]["value"]
    assert "gradient: `{tp: S(-1)}`" in hover["contents"]["value"]
    line_y = 10
    hover = client.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": line_y, "character": 4}}
    )
    assert "SPMD type: `{tp: V (unreduced partial sum)}`" in hover["contents"]["value"]
    use_of_x = fixed.splitlines()[9].index("convert(x") + len("convert(")
    hover = client.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 9, "character": use_of_x}}
    )
    assert "**`x`** (as bound at line 9)" in hover["contents"]["value"]
    assert "SPMD type: `{tp: I}`" in hover["contents"]["value"] and "gradient: `{tp: I}`" in hover["contents"]["value"]

    # back to the buggy text, then a save: each publishes the finding again
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"text": BUGGY}]},
    )
    assert [d["code"] for d in client.diagnostics(uri)] == ["SPMD102"]
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    assert [d["code"] for d in client.diagnostics(uri)] == ["SPMD102"]


def test_reveal_is_an_information_diagnostic_and_bad_input_is_survived(session):
    client, uri, path = session
    text = (
        "from spmdcheck.annotations import Local, reveal_spmd_type\n\n\n"
        "def f(a: Local['tp: P']):\n    reveal_spmd_type(a)\n"
    )
    client.notify(
        "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}
    )
    (note,) = client.diagnostics(uri)
    assert note["code"] == "SPMD901" and note["severity"] == 3
    assert note["message"] == "revealed type of `a`: forward {tp: P}; gradient {tp: R}"
    client.notify(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": "def f(:\n"}]},
    )
    (syntax,) = client.diagnostics(uri)
    assert syntax["code"] == "SPMD001"
    hover = client.request(
        "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 4}}
    )
    assert hover is None


def test_positions_count_utf16_code_units():
    from spmdcheck.server.documents import codepoint_column, utf16_column

    line = "s = '\U0001f600é' + x"
    x_at = line.index("x")
    assert utf16_column(line, x_at) == x_at + 1  # the emoji is two UTF-16 code units
    assert codepoint_column(line, x_at + 1) == x_at


def test_server_without_the_lsp_extra_says_how_to_get_it(tmp_path):
    code = "import sys; sys.modules['pygls'] = None; from spmdcheck.cli import main; sys.exit(main(['server']))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert "pip install 'spmdcheck[lsp]'" in proc.stderr


def test_hover_on_a_use_finds_the_binding_of_its_own_scope():
    from spmdcheck.server.documents import analyse

    text = textwrap.dedent("""\
        # spmdcheck: mesh = ["tp"]
        import spmd_types as spmd
        from spmd_types import I, R
        from spmdcheck.annotations import Local

        x = 3


        def f(x: Local["tp: I"]):
            y = spmd.convert(x, "tp", src=I, dst=R)
            return y + x


        def g(y: Local["tp: V"]):
            return y
    """)
    analysis = analyse(text, None)
    lines = text.splitlines()
    use_of_x = lines[10].index("+ x") + 2
    hover = analysis.hover(10, use_of_x)
    assert hover is not None and "(as bound at line 9)" in hover and "`{tp: I}`" in hover
    use_of_y = lines[10].index("y")
    assert "SPMD type: `{tp: R}`" in analysis.hover(10, use_of_y)
    # g's `y` is its parameter, not f's local
    assert "SPMD type: `{tp: V}`" in analysis.hover(14, lines[14].index("y"))
    assert analysis.hover(5, 0) is None  # a module-level int: not a tensor
    assert analysis.hover(1, 0) is None  # `import`: nothing bound there by the analysis


def test_editor_settings_are_those_of_the_command_line(tmp_path):
    """per-file-ignores and the closest config apply to a buffer as to `spmdcheck check`."""
    from spmdcheck.server.documents import analyse

    (tmp_path / "pyproject.toml").write_text(
        '[tool.spmdcheck]\nmesh = ["tp"]\n[tool.spmdcheck.per-file-ignores]\n"legacy/*" = ["SPMD102"]\n'
    )
    (tmp_path / "legacy").mkdir()
    checked = analyse(BUGGY, str(tmp_path / "mlp.py"))
    ignored = analyse(BUGGY, str(tmp_path / "legacy" / "mlp.py"))
    assert [d.code for d in checked.result.diagnostics] == ["SPMD102"]
    assert ignored.result.diagnostics == []

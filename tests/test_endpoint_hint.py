"""A 404 from /completions (a chat-only model or a hosted API) says to add `;chat`; a run
that failed before its first iteration says how to continue it."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.openai_server import server  # noqa: F401  (the fixture)

from evo.errors import UserError
from evo.policies.transport import endpoint_hint, exchange


class _NotFound(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        data = b'{"error": {"message": "This is a chat model and not supported in the v1/completions endpoint."}}'
        self.send_response(404)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_a_404_from_completions_says_add_chat():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        with pytest.raises(UserError, match=r"HTTP 404.*add ;chat to the URI, openai:URL#MODEL;chat"):
            exchange("POST", url + "/completions", {"model": "m"}, {}, 5.0)
        with pytest.raises(UserError, match=r"try the URI without ;chat"):
            exchange("POST", url + "/chat/completions", {"model": "m"}, {}, 5.0)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_other_refusals_get_no_endpoint_hint():
    assert endpoint_hint("http://h/v1/completions", 401, "bad key") == ""
    assert endpoint_hint("http://h/v1/models", 404, "") == ""
    assert "add ;chat" in endpoint_hint("http://h/v1/completions", 400, "use the chat endpoint")


def test_a_run_whose_first_policy_call_fails_says_how_to_continue(tmp_path, server):
    import shutil as sh
    import subprocess
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "function_minimization"
    for name in ("problem.toml", "initial.py", "score.py"):
        sh.copy(example / name, tmp_path / name)
    fake = server(["400"] * 8)
    out = tmp_path / "run"
    evo = sh.which("evo") or pytest.skip("the evo console script is not installed")
    result = subprocess.run([evo, "run", str(tmp_path / "problem.toml"), "--policy", f"p=openai:{fake.url}#tiny",
                             "--iterations", "1", "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=180)
    assert result.returncode == 2, result.stderr
    assert "HTTP 400" in result.stderr and result.stderr.count("\n") == 1
    assert f"continue it with evo run --resume {out} --policy p=URI" in result.stderr

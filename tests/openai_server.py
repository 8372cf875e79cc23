"""A real OpenAI-style HTTP server on 127.0.0.1 that misbehaves on purpose, for the `openai:` tests."""

from __future__ import annotations

import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from evo.policies.openai import OpenAIConfig, OpenAIPolicy


class FakeServer:
    """An OpenAI-style server that plays a script of replies: "ok", "500", "429", "hang",
    "bad-json", "400", "drip-head", "drip-body", or bytes (a raw 200 reply); after the script
    it answers "ok". `models` is the GET /models reply. Records bodies and concurrency."""

    def __init__(self, script: list[str | bytes] = (), delay: float = 0.0, drip: float = 1.0,
                 cert: Path | None = None) -> None:
        self.script, self.delay, self.drip, self.hang = list(script), delay, drip, 2.0
        self.models: object = {"object": "list", "data": [{"id": "tiny"}, {"id": "other"}]}
        self.text = lambda i, prefix: f"{prefix}{i}"  # the text of choice i ("t" completions, "c" chat)
        self.reply = None  # reply(body, i) -> text of choice i, in place of `text` (a server that reads the prompt)
        self.token_ids = True  # answer `return_token_ids` with ids, as vLLM does (False: a server that ignores it)
        self.usage = None  # usage(body, texts) -> the reply's "usage" object (None: no usage field)
        self.bodies: list[dict] = []
        self.routes: dict[str, object] = {}  # path (no query) -> its JSON reply, or an HTTP status to fail with
        self.paths: list[str] = []  # the routed requests' paths, in order (query included)
        self.routed: list[dict | None] = []  # their bodies
        self.posts = self.gets = 0
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        if cert is not None:  # https with a self-signed certificate (PEM: key and certificate)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert)
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"http{'s' if cert else ''}://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if self._route(None):
                    return
                with server.lock:
                    server.gets += 1
                self._send(200, server.models)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                if self._route(body):
                    return
                with server.lock:
                    server.posts += 1
                    server.bodies.append(body)
                    action = server.script.pop(0) if server.script else "ok"
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._act(action, body)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _route(self, body: dict | None) -> bool:
                """Answer a path of `server.routes` (the development endpoints of `vllm serve`)."""
                reply = server.routes.get(self.path.partition("?")[0])
                if reply is None:
                    return False
                with server.lock:
                    server.paths.append(self.path)
                    server.routed.append(body)
                if isinstance(reply, int):
                    self._send(reply, {"error": {"message": f"fault {reply}"}})
                else:
                    self._send(200, reply)
                return True

            def _act(self, action: str | bytes, body: dict) -> None:
                if isinstance(action, bytes):
                    self._raw(200, action)
                    return
                if isinstance(action, tuple):  # ("wire", bytes): written as is, then the connection closes
                    self.wfile.write(action[1])
                    self.close_connection = True
                    return
                if action == "hang":
                    time.sleep(server.hang)
                    return
                if action in ("drip-head", "drip-body"):
                    self._drip(action, json.dumps({"choices": [{"index": 0, "text": "t0"}]}).encode())
                    return
                if action in ("500", "429", "400"):
                    headers = {"Retry-After": "0"} if action == "429" else {}
                    self._send(int(action), {"error": {"message": f"fault {action}"}}, headers)
                    return
                if action == "bad-json":
                    self._raw(200, b'{"choices": [ oops')
                    return
                time.sleep(server.delay)
                chat = "messages" in body
                texts = [server.text(i, "c" if chat else "t") if server.reply is None else server.reply(body, i)
                         for i in range(body["n"])]
                ids = body.get("return_token_ids") and server.token_ids
                choices = [{"index": i, "finish_reason": "length" if i and server.reply is None else "stop",
                            **({"message": {"role": "assistant", "content": texts[i]}} if chat else {"text": texts[i]}),
                            **({"token_ids": [ord(c) % 97 for c in texts[i]]} if ids else {})}
                           for i in reversed(range(body["n"]))]
                usage = {} if server.usage is None else {"usage": server.usage(body, texts)}
                self._send(200, {"choices": choices, **usage})

            def _drip(self, action: str, data: bytes) -> None:
                """One byte every `server.drip` seconds: of the status line and headers, or of the body."""
                head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(data)}\r\n\r\n").encode()
                dripped = head + data if action == "drip-head" else data
                if action == "drip-body":
                    self.wfile.write(head)
                try:
                    for i in range(len(dripped)):
                        self.wfile.write(dripped[i:i + 1])
                        self.wfile.flush()
                        time.sleep(server.drip)
                except OSError:
                    pass  # the client gave up

            def _send(self, code: int, payload: object, headers: dict = {}) -> None:
                self._raw(code, json.dumps(payload).encode(), headers)

            def _raw(self, code: int, data: bytes, headers: dict = {}) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


@pytest.fixture
def server():
    made: list[FakeServer] = []

    def make(script=(), delay=0.0, drip=1.0, cert=None) -> FakeServer:
        made.append(FakeServer(script, delay, drip, cert))
        return made[-1]

    yield make
    for s in made:
        s.close()


def policy(url: str, **options) -> OpenAIPolicy:
    return OpenAIPolicy(OpenAIConfig(base_url=url, model="tiny", backoff=0.01, max_backoff=0.05, **options))

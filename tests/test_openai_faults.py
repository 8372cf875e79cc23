"""The `openai:` policy against a real local HTTP server that misbehaves on purpose."""

from __future__ import annotations

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evo.errors import UserError
from evo.policies import load
from evo.policies.openai import OpenAIConfig, OpenAIPolicy, backoff_delay, normalize_base_url, parse_uri


class FakeServer:
    """An OpenAI-style server that plays a script of replies: "ok", "500", "429", "hang",
    "bad-json", "400"; after the script it answers "ok". Records bodies and concurrency."""

    def __init__(self, script: list[str] = (), delay: float = 0.0) -> None:
        self.script, self.delay = list(script), delay
        self.bodies: list[dict] = []
        self.posts = 0
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
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
                self._send(200, {"object": "list", "data": [{"id": "tiny"}, {"id": "other"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
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

            def _act(self, action: str, body: dict) -> None:
                if action == "hang":
                    time.sleep(2.0)
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
                choices = [{"index": i, "finish_reason": "length" if i else "stop",
                            **({"message": {"role": "assistant", "content": f"c{i}"}} if chat else {"text": f"t{i}"})}
                           for i in reversed(range(body["n"]))]
                self._send(200, {"choices": choices})

            def _send(self, code: int, payload: dict, headers: dict = {}) -> None:
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

    def make(script=(), delay=0.0) -> FakeServer:
        made.append(FakeServer(script, delay))
        return made[-1]

    yield make
    for s in made:
        s.close()


def policy(url: str, **options) -> OpenAIPolicy:
    return OpenAIPolicy(OpenAIConfig(base_url=url, model="tiny", backoff=0.01, max_backoff=0.05, **options))


def test_completions_request_and_reply(server) -> None:
    s = server()
    out = policy(s.url).generate(["p0", "p1"], n=3, max_new_tokens=7, temperature=0.5, top_p=0.9, seed=4,
                                 stop=["\n\n"])
    assert [[c.text for c in g] for g in out] == [["t0", "t1", "t2"]] * 2  # ordered by index
    assert [c.finish_reason for c in out[0]] == ["stop", "length", "length"]
    body = s.bodies[0]
    assert {k: body[k] for k in ("model", "n", "max_tokens", "temperature", "top_p", "stop")} == {
        "model": "tiny", "n": 3, "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "stop": ["\n\n"]}
    assert body["prompt"] in ("p0", "p1")
    seeds = sorted(b["seed"] for b in s.bodies)
    again = server()
    policy(again.url).generate(["p0", "p1"], n=3, seed=4)
    assert seeds == sorted(b["seed"] for b in again.bodies) and seeds[0] != seeds[1]


def test_chat_endpoint(server) -> None:
    s = server()
    out = policy(s.url, chat=True).generate(["hello"], n=2)
    assert [c.text for c in out[0]] == ["c0", "c1"]
    assert s.bodies[0]["messages"] == [{"role": "user", "content": "hello"}]


def test_greedy_asks_once_and_repeats(server) -> None:
    s = server()
    out = policy(s.url).generate(["p"], n=4, temperature=0.0)
    assert s.bodies[0]["n"] == 1 and [c.text for c in out[0]] == ["t0"] * 4


@pytest.mark.parametrize("fault", ["500", "429", "bad-json"])
def test_transient_faults_are_retried(server, fault: str) -> None:
    s = server([fault, fault])
    p = policy(s.url, retries=3)
    assert p.generate(["p"], n=1)[0][0].text == "t0"
    assert s.posts == 3 and p.attempts == 3


@pytest.mark.parametrize("fault,reason", [("500", "HTTP 500: {\"error\": {\"message\": \"fault 500\"}}"),
                                          ("429", "HTTP 429"), ("bad-json", "malformed JSON reply")])
def test_last_retry_gives_one_line_error(server, fault: str, reason: str) -> None:
    s = server([fault] * 10)
    with pytest.raises(UserError) as err:
        policy(s.url, retries=2).generate(["p"], n=1)
    message = str(err.value)
    assert s.posts == 3 and "\n" not in message
    assert message.startswith(f"openai: POST {s.url}/v1/completions failed after 3 attempts: ")
    assert reason in message


def test_hanging_server_times_out(server) -> None:
    s = server(["hang", "hang"])
    start = time.monotonic()
    with pytest.raises(UserError, match=r"failed after 2 attempts: timed out after 0.2 s$"):
        policy(s.url, retries=1, timeout=0.2).generate(["p"], n=1)
    assert time.monotonic() - start < 1.5 and s.posts == 2


def test_client_errors_are_not_retried(server) -> None:
    s = server(["400"])
    with pytest.raises(UserError, match="refused the request: HTTP 400"):
        policy(s.url, retries=3).generate(["p"], n=1)
    assert s.posts == 1


def test_concurrency_limit(server) -> None:
    s = server(delay=0.1)
    out = policy(s.url, concurrency=2).generate([f"p{i}" for i in range(6)], n=1)
    assert len(out) == 6 and s.max_in_flight == 2


def test_load_checks_the_server(server) -> None:
    s = server()
    assert load(f"openai:{s.url}").config.model == "tiny"  # first listed model
    assert load(f"openai:{s.url}/v1#other;chat;concurrency=3").config.concurrency == 3
    with pytest.raises(UserError, match="model 'nope' is not served by .*; served: tiny, other"):
        load(f"openai:{s.url}#nope")
    closed = server()
    closed.close()
    with pytest.raises(UserError, match="cannot reach .*is the server running"):
        load(f"openai:{closed.url}#tiny")


def test_uri_options_and_urls() -> None:
    cfg = parse_uri("http://h:1/v1#m;chat;logprobs;token_ids;timeout=2.5;retries=0")
    assert (cfg.model, cfg.chat, cfg.logprobs, cfg.token_ids, cfg.timeout, cfg.retries) == ("m", True, True, True, 2.5, 0)
    with pytest.raises(UserError, match="unknown option 'fast'"):
        parse_uri("http://h#m;fast")
    assert normalize_base_url("http://h:8000/") == "http://h:8000/v1"
    assert normalize_base_url("https://api.x.com/v1") == "https://api.x.com/v1"


def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    rng = random.Random(0)
    for attempt in range(8):
        d = min(4.0, 0.5 * 2**attempt)
        draws = [backoff_delay(attempt, 0.5, 4.0, rng) for _ in range(200)]
        assert d / 2 <= min(draws) and max(draws) <= d and max(draws) - min(draws) > d / 4

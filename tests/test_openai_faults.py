"""The `openai:` policy against a real local HTTP server that misbehaves on purpose."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evo.errors import UserError
from evo.policies import load
from evo.policies.openai import OpenAIConfig, OpenAIPolicy, backoff_delay, normalize_base_url, parse_uri


class FakeServer:
    """An OpenAI-style server that plays a script of replies: "ok", "500", "429", "hang",
    "bad-json", "400", "drip-head", "drip-body", or bytes (a raw 200 reply); after the script
    it answers "ok". `models` is the GET /models reply. Records bodies and concurrency."""

    def __init__(self, script: list[str | bytes] = (), delay: float = 0.0, drip: float = 1.0,
                 cert: Path | None = None) -> None:
        self.script, self.delay, self.drip, self.hang = list(script), delay, drip, 2.0
        self.models: object = {"object": "list", "data": [{"id": "tiny"}, {"id": "other"}]}
        self.text = lambda i, prefix: f"{prefix}{i}"  # the text of choice i ("t" completions, "c" chat)
        self.bodies: list[dict] = []
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
                with server.lock:
                    server.gets += 1
                self._send(200, server.models)

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
                texts = [server.text(i, "c" if chat else "t") for i in range(body["n"])]
                choices = [{"index": i, "finish_reason": "length" if i else "stop",
                            **({"message": {"role": "assistant", "content": texts[i]}} if chat else {"text": texts[i]})}
                           for i in reversed(range(body["n"]))]
                self._send(200, {"choices": choices})

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



@pytest.mark.parametrize("where", ["drip-body", "drip-head"])
def test_a_dripped_reply_times_out_at_the_deadline(server, where: str) -> None:
    """One byte a second never trips a per-read socket timeout; the request's deadline ends it."""
    s = server([where], drip=1.0)
    start = time.monotonic()
    with pytest.raises(UserError, match=r"failed after 1 attempts: timed out after 1.5 s$"):
        policy(s.url, retries=0, timeout=1.5).generate(["p"], n=1)
    assert 1.4 < time.monotonic() - start < 2.5


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_the_deadline_holds_over_tls(server, tmp_path, monkeypatch) -> None:
    pem = tmp_path / "server.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(pem), "-out", str(tmp_path / "cert.pem")],
                   check=True, capture_output=True)
    pem.write_text(pem.read_text() + (tmp_path / "cert.pem").read_text())
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))  # trust it, as a private CA would be
    s = server(["ok", "drip-body"], drip=1.0, cert=pem)
    assert s.url.startswith("https://") and policy(s.url, retries=0).generate(["p"], n=1)[0][0].text == "t0"
    start = time.monotonic()
    with pytest.raises(UserError, match=r"failed after 1 attempts: timed out after 1.5 s$"):
        policy(s.url, retries=0, timeout=1.5).generate(["p"], n=1)
    assert 1.4 < time.monotonic() - start < 2.5


def test_a_slow_reply_within_the_deadline_is_read(server) -> None:
    s = server(["drip-body"], drip=0.002)  # about 50 bytes in 0.1 s: well inside the deadline
    assert policy(s.url, retries=0, timeout=5.0).generate(["p"], n=1)[0][0].text == "t0"


def bad(**choice) -> bytes:
    return json.dumps({"choices": [{"index": 0, "text": "t0", **choice}]}).encode()


BAD_REPLIES = {
    "text: 123": (bad(text=123), "choices[0].text is 123 (int), expected a string"),
    "token_ids: ['x']": (bad(token_ids=["x"]), "choices[0].token_ids[0] is 'x', expected a token id"),
    "token_ids: [-1]": (bad(token_ids=[-1]), "choices[0].token_ids[0] is -1, expected a token id"),
    "token_ids: [true]": (bad(token_ids=[True]), "choices[0].token_ids[0] is True, expected a token id"),
    "token_ids: 5": (bad(token_ids=5), "choices[0].token_ids is 5 (int), expected a list of token ids"),
    "no text": (json.dumps({"choices": [{"index": 0}]}).encode(), "choices[0] has no text"),
    "choices: null": (b'{"choices": null}', "choices is None (null), expected a list"),
    "no choices": (b'{"id": "x"}', "choices is None (null), expected a list"),
    "too few choices": (b'{"choices": []}', "asked for n=1 completions, got 0"),
    "choice not an object": (b'{"choices": ["t0"]}', "choices[0] is 't0' (str), expected an object"),
    "index: 'a'": (bad(index="a"), "choices[0].index is 'a' (str), expected an integer"),
    "index: 3": (bad(index=3), "choice indices [3] are not 0..0"),
    "finish_reason: 7": (bad(finish_reason=7), "choices[0].finish_reason is 7 (int), expected a string"),
    "logprobs: 'x'": (bad(logprobs="x"), "choices[0].logprobs is 'x' (str), expected an object"),
    "token_logprobs: ['a']": (bad(logprobs={"token_logprobs": ["a"]}),
                              "choices[0].logprobs.token_logprobs[0] is 'a' (str), expected a number"),
    "token_logprobs: [NaN]": (b'{"choices": [{"index": 0, "text": "t", "logprobs": {"token_logprobs": [NaN]}}]}',
                              "choices[0].logprobs.token_logprobs[0] is NaN"),
    "error object": (b'{"error": {"message": "model\\r\\n  overloaded"}}', "the server replied with an error: model overloaded"),
    "a JSON list": (b'[1, 2]', "malformed reply (not a JSON object)"),
    "deep nesting": (b"[" * 100_000, "malformed JSON reply"),
    "not UTF-8": (b'{"choices": "\xff\xfe"}', "malformed JSON reply"),
}


@pytest.mark.parametrize("name", list(BAD_REPLIES))
def test_a_malformed_reply_is_retried_then_one_line(server, name: str) -> None:
    reply, reason = BAD_REPLIES[name]
    s = server([reply] * 3)
    with pytest.raises(UserError) as err:
        policy(s.url, retries=2).generate(["p"], n=1)
    message = str(err.value)
    assert s.posts == 3 and "\n" not in message and len(message) < 400
    assert message.startswith(f"openai: POST {s.url}/v1/completions failed after 3 attempts: "), message
    assert reason in message, message
    assert policy(s.url, retries=0).generate(["p"], n=1)[0][0].text == "t0"  # the script is over: a good reply


@pytest.mark.parametrize("wire, reason", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"choi", "the reply was cut short (6 bytes read, 94 missing)"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "connection error"),
    (b"garbage\r\n\r\n", "BadStatusLine"),
    (b"", "Remote end closed connection without response"),
    (b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 200 + b"\r\n", "got more than 100 headers"),
])
def test_broken_http_is_retried_then_one_line(server, wire: bytes, reason: str) -> None:
    s = server([("wire", wire)] * 2)
    with pytest.raises(UserError) as err:
        policy(s.url, retries=1).generate(["p"], n=1)
    message = str(err.value)
    assert s.posts == 2 and "\n" not in message and "failed after 2 attempts: connection error" in message
    assert reason in message, message


def test_a_malformed_reply_then_a_good_one_succeeds(server) -> None:
    s = server([BAD_REPLIES["text: 123"][0]])
    assert policy(s.url, retries=1).generate(["p"], n=1)[0][0].text == "t0" and s.posts == 2


@pytest.mark.parametrize("name, reply, chat", [
    ("chat message missing", b'{"choices": [{"index": 0}]}', True),
    ("chat content 5", b'{"choices": [{"index": 0, "message": {"content": 5}}]}', True),
    ("chat logprob 'x'", b'{"choices": [{"index": 0, "message": {"content": "c"}, "logprobs": {"content": [{"logprob": "x"}]}}]}', True),
])
def test_malformed_chat_replies(server, name: str, reply: bytes, chat: bool) -> None:
    s = server([reply] * 2)
    with pytest.raises(UserError, match=r"failed after 2 attempts: malformed reply: choices\[0\]"):
        policy(s.url, retries=1, chat=chat).generate(["p"], n=1)


def test_well_formed_extras_are_read(server) -> None:
    reply = {"choices": [{"index": 1, "text": None, "finish_reason": None, "token_ids": None},
                         {"index": 0, "text": "a", "finish_reason": "length", "token_ids": [5, 0],
                          "logprobs": {"token_logprobs": [-0.5, -1]}}]}
    s = server([json.dumps(reply).encode()])
    first, second = policy(s.url, retries=0).generate(["p"], n=2)[0]
    assert (first.text, first.token_ids, first.logprobs, first.finish_reason) == ("a", (5, 0), (-0.5, -1.0), "length")
    assert (second.text, second.token_ids, second.logprobs, second.finish_reason) == ("", (), None, "stop")


@pytest.mark.parametrize("models, reason", [
    ({"data": None}, "data is None (null), expected a list of models"),
    ({"object": "list"}, "data is None (null), expected a list of models"),
    ({"data": "tiny"}, "data is 'tiny' (str), expected a list of models"),
    ({"data": [{"id": 5}]}, "data[0].id is 5 (int), expected a string"),
    ({"data": ["tiny"]}, "data[0] is 'tiny' (str), expected an object"),
    ([{"id": "tiny"}], "malformed reply (not a JSON object)"),
])
def test_a_malformed_model_list_is_one_line(server, models: object, reason: str) -> None:
    s = server()
    s.models = models
    with pytest.raises(UserError) as err:
        load(f"openai:{s.url}#tiny")
    assert str(err.value).startswith(f"openai: {s.url}/v1/models is not an OpenAI model list: {reason}")


def test_server_text_in_messages_stays_on_one_line(server) -> None:
    s = server(["500"] * 2)
    s.models = {"data": [{"id": "a\nb"}, {"id": "c\r\nd"}]}
    with pytest.raises(UserError) as err:
        load(f"openai:{s.url}#tiny")
    assert str(err.value).endswith("served: a b, c d")


@pytest.mark.parametrize("option, message", [
    ("retries=-1", "option retries: expected an integer in [0, 100], got -1"),
    ("retries=1.5", "option retries: expected an integer in [0, 100], got '1.5'"),
    ("retries=1000", "option retries: expected an integer in [0, 100], got 1000"),
    ("timeout=-1", "option timeout: expected a finite number in (0, 86400], got -1.0"),
    ("timeout=0", "option timeout: expected a finite number in (0, 86400], got 0.0"),
    ("timeout=nan", "option timeout: expected a finite number in (0, 86400], got nan"),
    ("timeout=inf", "option timeout: expected a finite number in (0, 86400], got inf"),
    ("timeout=soon", "option timeout: expected a finite number in (0, 86400], got 'soon'"),
    ("concurrency=0", "option concurrency: expected an integer in [1, 1024], got 0"),
    ("concurrency=", "option concurrency: expected an integer in [1, 1024], got ''"),
    ("backoff=-0.5", "option backoff: expected a finite number in [0, 3600], got -0.5"),
    ("max_backoff=nan", "option max_backoff: expected a finite number in [0, 3600], got nan"),
    ("chat=yes", "unknown option 'chat=yes'"),
    ("retries", "unknown option 'retries'"),
])
def test_uri_options_are_range_checked(option: str, message: str) -> None:
    with pytest.raises(UserError) as err:
        parse_uri(f"http://127.0.0.1:1/v1#m;{option}")
    assert str(err.value).startswith("openai: ") and message in str(err.value) and "\n" not in str(err.value)


def test_configs_built_in_python_are_range_checked_too() -> None:
    with pytest.raises(UserError, match=r"option retries: expected an integer in \[0, 100\], got -1$"):
        OpenAIConfig(base_url="http://h", retries=-1)
    with pytest.raises(UserError, match="option concurrency: expected an integer in .*got True"):
        OpenAIConfig(base_url="http://h", concurrency=True)


@pytest.mark.parametrize("url", ["http://127.0.0.1:notaport", "http://127.0.0.1:99999", "http://:80/v1", "http://h st:80"])
def test_bad_urls_are_one_line(url: str) -> None:
    with pytest.raises(UserError, match=r"^openai: bad policy URL"):
        load(f"openai:{url}#m")


def test_an_api_key_with_a_line_break_is_refused(server, monkeypatch) -> None:
    s = server()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-123\nX-Injected: 1")
    with pytest.raises(UserError, match="API key .*control character"):
        load(f"openai:{s.url}#tiny")
    assert s.gets == 0


@pytest.mark.parametrize("setting, message", [
    ({"temperature": float("nan")}, "temperature: expected a finite number >= 0, got nan"),
    ({"temperature": -0.1}, "temperature: expected a finite number >= 0, got -0.1"),
    ({"temperature": float("inf")}, "temperature: expected a finite number >= 0, got inf"),
    ({"top_p": 0.0}, "top_p: expected a finite number in (0, 1], got 0.0"),
    ({"top_p": 1.01}, "top_p: expected a finite number in (0, 1], got 1.01"),
    ({"max_new_tokens": 0}, "max_new_tokens: expected an integer >= 1, got 0"),
    ({"n": 0}, "n: expected an integer >= 1, got 0"),
])
def test_sampling_arguments_are_checked_before_anything_is_sent(server, setting: dict, message: str) -> None:
    s = server()
    with pytest.raises(UserError) as err:
        policy(s.url).generate(["p", "q"], **{"n": 1, **setting})
    assert str(err.value) == f"openai: {message}" and s.posts == 0


INTERRUPTED = """
import sys, threading, time
from evo.policies.openai import OpenAIConfig, OpenAIPolicy

policy = OpenAIPolicy(OpenAIConfig(base_url=sys.argv[1], model="tiny", concurrency=4, timeout=30.0, retries=3))
prompts = [f"p{i}" for i in range(8)]
if sys.argv[2] == "thread":  # as evo run's loop calls it
    threading.Thread(target=policy.generate, args=(prompts,), daemon=True).start()
    time.sleep(60)
else:  # as evo compare calls it
    policy.generate(prompts)
"""


@pytest.mark.parametrize("caller", ["thread", "main"])
def test_ctrl_c_abandons_requests_in_flight(server, tmp_path, caller: str) -> None:
    """Ctrl-C while four requests hang: the process ends at once; nothing waits for the requests'
    timeouts and retries at exit (the old thread pool's workers held exit for ~36 s)."""
    s = server(["hang"] * 8)
    s.hang = 60.0
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    process = subprocess.Popen([sys.executable, str(script), s.url, caller], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while s.in_flight < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.in_flight == 4  # `concurrency` requests in flight
        time.sleep(0.2)
        start = time.monotonic()
        process.send_signal(signal.SIGINT)
        stderr = process.communicate(timeout=30)[1]
        took = time.monotonic() - start
    finally:
        process.kill()
    assert "KeyboardInterrupt" in stderr and took < 1.5, (took, stderr[-500:])


def test_the_first_failure_is_raised_without_waiting_for_the_rest(server) -> None:
    s = server(["400", "hang", "hang", "hang"])
    start = time.monotonic()
    with pytest.raises(UserError, match="HTTP 400"):
        policy(s.url, concurrency=4, timeout=30.0, retries=0).generate([f"p{i}" for i in range(4)], n=1)
    assert time.monotonic() - start < 1.5  # the hanging requests are abandoned, not awaited


def test_numpy_scalars_are_sent_as_json_numbers(server) -> None:
    import numpy as np

    s = server()
    out = policy(s.url).generate(["p"], n=np.int64(2), max_new_tokens=np.int64(5), temperature=np.float32(0.5),
                                 top_p=np.float64(0.9), seed=np.int64(3))
    assert len(out[0]) == 2 and (s.bodies[0]["n"], s.bodies[0]["max_tokens"], s.bodies[0]["temperature"]) == (2, 5, 0.5)


def test_backoff_never_overflows() -> None:
    assert backoff_delay(5000, 0.5, 30.0, random.Random(0)) <= 30.0

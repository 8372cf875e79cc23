"""The `openai:` policy against a real local HTTP server that misbehaves on purpose: faults,
retries, whole-request deadlines (dripped replies, TLS too), broken HTTP, Ctrl-C."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evo.errors import UserError
from evo.policies import load
from evo.policies.openai import backoff_delay, normalize_base_url, parse_uri
from tests.openai_server import policy, server  # noqa: F401 -- `server` is a fixture


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
    # the deadline's watchdog ("timed out after 0.2 s") or, on a loaded machine, the socket's own
    # timeout during connect ("connection error: timed out") ends the attempt: both are timeouts
    with pytest.raises(UserError, match=r"failed after 2 attempts: (timed out after 0\.2 s|connection error: timed out)$"):
        policy(s.url, retries=1, timeout=0.2).generate(["p"], n=1)
    assert time.monotonic() - start < 1.5 and s.posts == 2


def test_client_errors_are_not_retried(server) -> None:
    s = server(["400"])
    with pytest.raises(UserError, match="refused the request: HTTP 400"):
        policy(s.url, retries=3).generate(["p"], n=1)
    assert s.posts == 1


def test_concurrency_limit(server) -> None:
    s = server(delay=0.5)  # long enough that two requests overlap even on a loaded machine
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
    assert 1.4 < time.monotonic() - start < 4.0  # the deadline, not the drip (about 50 s)


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
    assert 1.4 < time.monotonic() - start < 4.0  # the deadline, not the drip (about 50 s)


def test_a_slow_reply_within_the_deadline_is_read(server) -> None:
    s = server(["drip-body"], drip=0.002)  # about 50 bytes in 0.1 s: well inside the deadline
    assert policy(s.url, retries=0, timeout=5.0).generate(["p"], n=1)[0][0].text == "t0"


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
        process.wait()  # reaped: a zombie would fail later tests that count leftover children
    # 0.1-0.3 s on an idle machine; the bound leaves room for a loaded one (the old pool: > 30 s)
    assert "KeyboardInterrupt" in stderr and took < 3.0, (took, stderr[-500:])


def test_the_first_failure_is_raised_without_waiting_for_the_rest(server) -> None:
    s = server(["400", "hang", "hang", "hang"])
    start = time.monotonic()
    with pytest.raises(UserError, match="HTTP 400"):
        policy(s.url, concurrency=4, timeout=30.0, retries=0).generate([f"p{i}" for i in range(4)], n=1)
    assert time.monotonic() - start < 5.0  # the hanging requests (30 s each) are abandoned, not awaited


def test_backoff_never_overflows() -> None:
    assert backoff_delay(5000, 0.5, 30.0, random.Random(0)) <= 30.0


def test_a_server_that_stops_mid_run_is_named_as_stopped(server) -> None:
    """A server that answered, then died (a crashed `vllm serve`): the one line says it may have
    stopped and where to look, not only "Connection refused"."""
    from evo.errors import WorkFailed

    s = server()
    p = policy(s.url, retries=1)
    p.generate(["x"], max_new_tokens=2)
    s.close()
    with pytest.raises(WorkFailed) as failed:
        p.generate(["x"], max_new_tokens=2)
    assert "Connection refused" in str(failed.value) and "has it stopped? its log says why" in str(failed.value)

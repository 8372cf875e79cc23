"""The shapes of an OpenAI-compatible server's replies and the ranges of the `openai:` options
and sampling arguments, against a real local HTTP server: one line each, never a traceback."""

from __future__ import annotations

import json

import pytest

from evo.errors import UserError
from evo.policies import load
from evo.policies.openai import OpenAIConfig, parse_uri
from tests.openai_server import policy, server  # noqa: F401 -- `server` is a fixture


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


def test_numpy_scalars_are_sent_as_json_numbers(server) -> None:
    import numpy as np

    s = server()
    out = policy(s.url).generate(["p"], n=np.int64(2), max_new_tokens=np.int64(5), temperature=np.float32(0.5),
                                 top_p=np.float64(0.9), seed=np.int64(3))
    assert len(out[0]) == 2 and (s.bodies[0]["n"], s.bodies[0]["max_tokens"], s.bodies[0]["temperature"]) == (2, 5, 0.5)


def test_max_tokens_stays_within_the_served_context(server) -> None:
    """vLLM states its max_model_len in GET /models and refuses a max_tokens above it: the budget
    is cut to the context (and, for a prompt sent as token ids, to what the prompt leaves)."""
    s = server()
    s.models = {"object": "list", "data": [{"id": "tiny", "max_model_len": 64}, {"id": "other", "max_model_len": 9}]}
    p = policy(s.url)
    p.generate(["text"], max_new_tokens=1000)
    assert s.bodies[-1]["max_tokens"] == 1000  # before check(): nothing known, sent as asked
    p.check()
    assert p.context == 64
    s.routes["/tokenize"] = {"count": 5, "max_model_len": 64}  # vLLM's, beside /v1
    p.generate(["text"], max_new_tokens=1000)  # could pass the context: measured by the server
    p.generate(["text"], max_new_tokens=50)  # 4 bytes + 2 + 50 <= 64: sent as asked, not measured
    p.generate([[5] * 60], max_new_tokens=1000)
    p.generate([[5] * 10], max_new_tokens=8)
    assert [b["max_tokens"] for b in s.bodies[-4:]] == [59, 50, 4, 8]
    assert s.paths == ["/tokenize"] and s.routed == [{"model": "tiny", "prompt": "text"}]
    posts = s.posts
    with pytest.raises(UserError, match="a prompt of 64 tokens does not fit the served model's context of 64 tokens"):
        p.generate([[5] * 64], max_new_tokens=8)
    assert s.posts == posts


@pytest.mark.parametrize("entry", [{"id": "tiny"}, {"id": "tiny", "max_model_len": "64"}, {"id": "tiny", "max_model_len": 0},
                                   {"id": "tiny", "max_model_len": True}])
def test_a_context_the_server_does_not_state_leaves_the_budget_as_asked(server, entry: dict) -> None:
    s = server()
    s.models = {"object": "list", "data": [entry]}
    p = policy(s.url)
    p.check()
    p.generate([[5] * 100], max_new_tokens=1000)
    assert p.context is None and s.bodies[-1]["max_tokens"] == 1000


def test_a_server_without_tokenize_gets_the_budget_as_asked(server) -> None:
    s = server()
    s.models = {"object": "list", "data": [{"id": "tiny", "max_model_len": 64}]}
    s.routes["/tokenize"] = 404
    p = policy(s.url, chat=True)
    p.check()
    p.generate(["text"], max_new_tokens=40)  # 4 bytes + a template's 256 + 40 > 64: asked, 404, sent as asked
    assert s.bodies[-1]["max_tokens"] == 40 and s.routed[-1]["messages"] == [{"role": "user", "content": "text"}]

"""`openai:` policy: any OpenAI-compatible server (`vllm serve`, Ollama, a hosted API).

Standard library only. One request per prompt (with `n` samples), at most `concurrency` in
flight; 429, 5xx, timeouts, connection errors and malformed replies are retried with
exponential backoff and jitter, then reported as one line (evo.errors.UserError).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from evo.errors import UserError
from evo.policies.base import Completion
from evo.policies.seeding import prompt_seed


@dataclass(frozen=True)
class OpenAIConfig:
    base_url: str  # ends with /v1
    model: str = ""  # empty: the first model the server lists
    chat: bool = False  # use /chat/completions with one user message per prompt
    concurrency: int = 8
    timeout: float = 120.0  # seconds per request
    retries: int = 4  # extra attempts after the first
    backoff: float = 0.5  # first delay in seconds; doubles per attempt, with jitter
    max_backoff: float = 30.0
    logprobs: bool = False  # ask for the sampled tokens' log-probabilities
    token_ids: bool = False  # ask for the sampled token ids (vLLM's `return_token_ids`)
    api_key: str = ""


class RetryableError(Exception):
    """A failure worth another attempt (429, 5xx, timeout, connection, malformed reply)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


def normalize_base_url(url: str) -> str:
    """`http://host:8000` and `http://host:8000/` mean `http://host:8000/v1`."""
    url = url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UserError(f"openai: policy URL must start with http:// or https:// (got {url!r})")
    path = url.partition("://")[2].partition("/")[2]
    return url if path else url + "/v1"


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with 'equal jitter': in [d/2, d] with d = min(cap, base * 2**attempt)."""
    delay = min(cap, base * (2**attempt))
    return delay * (0.5 + 0.5 * rng.random())


class OpenAIPolicy:
    """A Policy over an OpenAI-compatible HTTP API."""

    def __init__(self, config: OpenAIConfig) -> None:
        key = config.api_key or os.environ.get("OPENAI_API_KEY", "")
        self.config = OpenAIConfig(**{**config.__dict__, "base_url": normalize_base_url(config.base_url), "api_key": key})
        self._rng = random.Random()
        self._lock = threading.Lock()
        self.attempts = 0  # requests sent, retries included (for tests and logs)

    def check(self) -> None:
        """Reach the server once (no retries) and pick or validate the model; one-line error if not."""
        cfg = self.config
        try:
            reply = self._request("GET", "/models", None, timeout=min(cfg.timeout, 10.0))
        except RetryableError as exc:
            raise UserError(f"openai: cannot reach {cfg.base_url}: {exc}; is the server running?") from None
        served = [m.get("id", "") for m in reply.get("data", []) if isinstance(m, dict)]
        if not cfg.model:
            if not served:
                raise UserError(f"openai: {cfg.base_url} lists no models; name one as openai:URL#MODEL")
            self.config = OpenAIConfig(**{**cfg.__dict__, "model": served[0]})
        elif served and cfg.model not in served:
            shown = ", ".join(served[:10]) + (", ..." if len(served) > 10 else "")
            raise UserError(f"openai: model {cfg.model!r} is not served by {cfg.base_url}; served: {shown}")

    def generate(self, prompts: Sequence[str], *, n: int = 1, max_new_tokens: int = 256, temperature: float = 1.0,
                 top_p: float = 1.0, seed: int | None = None, stop: Sequence[str] = ()) -> list[list[Completion]]:
        draws = 1 if temperature <= 0.0 else n  # servers refuse n > 1 for greedy; greedy repeats

        def one(i: int) -> list[Completion]:
            body = self._body(prompts[i], draws, max_new_tokens, temperature, top_p,
                              None if seed is None else prompt_seed(seed, i), stop)
            return self._completions(self._post_with_retries(body), draws) * (n // draws)

        if len(prompts) <= 1 or self.config.concurrency <= 1:
            return [one(i) for i in range(len(prompts))]
        with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(prompts))) as pool:
            return list(pool.map(one, range(len(prompts))))

    def _body(self, prompt: str, n: int, max_new_tokens: int, temperature: float, top_p: float,
              seed: int | None, stop: Sequence[str]) -> dict:
        body: dict = {"model": self.config.model, "n": n, "max_tokens": max_new_tokens,
                      "temperature": temperature, "top_p": top_p}
        if self.config.chat:
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if seed is not None:
            body["seed"] = seed
        if stop:
            body["stop"] = list(stop)
        if self.config.logprobs:
            body.update({"logprobs": True} if self.config.chat else {"logprobs": 0})
        if self.config.token_ids:
            body["return_token_ids"] = True
        return body

    def _post_with_retries(self, body: dict) -> dict:
        cfg = self.config
        path = "/chat/completions" if cfg.chat else "/completions"
        for attempt in range(cfg.retries + 1):
            try:
                return self._request("POST", path, body, timeout=cfg.timeout)
            except RetryableError as exc:
                if attempt == cfg.retries:
                    raise UserError(f"openai: POST {cfg.base_url}{path} failed after {attempt + 1} attempts: {exc}") from None
                delay = backoff_delay(attempt, cfg.backoff, cfg.max_backoff, self._rng)
                time.sleep(max(delay, min(exc.retry_after or 0.0, cfg.max_backoff)))
        raise AssertionError("unreachable")

    def _request(self, method: str, path: str, body: dict | None, timeout: float) -> dict:
        """One HTTP exchange. Raises RetryableError for transient faults, UserError for the rest."""
        with self._lock:
            self.attempts += 1
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.config.base_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.config.api_key:
            request.add_header("Authorization", f"Bearer {self.config.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                raw = reply.read()
        except urllib.error.HTTPError as exc:
            raise _http_error(exc) from None
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, socket.timeout, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RetryableError(f"timed out after {timeout:g} s" if _is_timeout(reason) else f"connection error: {reason}") from None
        try:
            parsed = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RetryableError(f"malformed JSON reply: {raw[:80]!r}") from None
        if not isinstance(parsed, dict):
            raise RetryableError(f"malformed reply (not a JSON object): {raw[:80]!r}")
        return parsed

    def _completions(self, reply: dict, n: int) -> list[Completion]:
        try:
            choices = sorted(reply["choices"], key=lambda c: c.get("index", 0))
            out = [self._completion(c) for c in choices]
        except (KeyError, TypeError, AttributeError) as exc:
            raise UserError(f"openai: reply from {self.config.base_url} lacks choices/text ({exc!r})") from None
        if len(out) != n:
            raise UserError(f"openai: asked {self.config.base_url} for n={n} completions, got {len(out)}")
        return out

    def _completion(self, choice: dict) -> Completion:
        text = choice["message"]["content"] if self.config.chat else choice["text"]
        finish = "length" if choice.get("finish_reason") == "length" else "stop"
        logprobs = None
        lp = choice.get("logprobs")
        if isinstance(lp, dict) and lp.get("token_logprobs") is not None:
            logprobs = tuple(float(x) for x in lp["token_logprobs"])
        elif isinstance(lp, dict) and isinstance(lp.get("content"), list):
            logprobs = tuple(float(t["logprob"]) for t in lp["content"])
        ids = choice.get("token_ids") or ()
        return Completion(text or "", tuple(int(t) for t in ids), logprobs, finish)


def _is_timeout(reason: object) -> bool:
    return isinstance(reason, (socket.timeout, TimeoutError)) or "timed out" in str(reason)


def _http_error(exc: urllib.error.HTTPError) -> Exception:
    detail = exc.read()[:200].decode("utf-8", "replace").replace("\n", " ").strip()
    reason = f"HTTP {exc.code}" + (f": {detail}" if detail else "")
    if exc.code == 429 or exc.code >= 500:
        retry_after = exc.headers.get("Retry-After") if exc.headers else None
        try:
            seconds = float(retry_after) if retry_after else None
        except ValueError:
            seconds = None
        return RetryableError(reason, seconds)
    return UserError(f"openai: {exc.url} refused the request: {reason}")


def parse_uri(rest: str) -> OpenAIConfig:
    """`URL#MODEL[;chat][;logprobs][;token_ids][;concurrency=8][;timeout=60][;retries=4]` -> config."""
    url, _, fragment = rest.partition("#")
    model, *options = fragment.split(";") if fragment else ("",)
    fields: dict = {"base_url": url, "model": model}
    types = {"concurrency": int, "timeout": float, "retries": int, "backoff": float, "max_backoff": float}
    for option in options:
        key, has_value, value = option.partition("=")
        if key in ("chat", "logprobs", "token_ids") and not has_value:
            fields[key] = True
        elif key in types and has_value:
            try:
                fields[key] = types[key](value)
            except ValueError:
                raise UserError(f"openai: option {key} needs a number (got {value!r})") from None
        else:
            raise UserError(f"openai: unknown option {option!r}; known: chat, logprobs, token_ids, " + ", ".join(f"{k}=N" for k in types))
    return OpenAIConfig(**fields)

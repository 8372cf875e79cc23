"""`openai:` policy: any OpenAI-compatible server (`vllm serve`, Ollama, a hosted API).

Standard library only. One request per prompt (with `n` samples), at most `concurrency` in
flight on daemon threads (an interrupted caller abandons them; nothing waits for them at
exit). Each attempt ends by its `timeout` (the whole request, evo/policies/transport.py);
429, 5xx, timeouts, connection errors and malformed replies are retried with exponential
backoff and jitter, then reported as one line (evo.errors.WorkFailed: exit code 1; a refused
request or a bad setting is a UserError: exit code 2).
"""

from __future__ import annotations

import os
import queue
import random
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evo.errors import UserError, WorkFailed
from evo.policies import replies
from evo.policies.base import Completion
from evo.policies.options import GREEDY_BELOW, Range, check_config, check_sampling, parse_option
from evo.policies.seeding import prompt_seed
from evo.policies.transport import NotJSON, RetryableError, exchange, one_line

# The numeric options of an `openai:` URI and their ranges (the one place they are written).
RANGES: dict[str, Range] = {
    "concurrency": Range(1, 1024, integer=True),
    "timeout": Range(0.0, 86400.0, open_low=True),
    "retries": Range(0, 100, integer=True),
    "backoff": Range(0.0, 3600.0),
    "max_backoff": Range(0.0, 3600.0),
}
FLAGS = ("chat", "logprobs", "token_ids")
TEMPLATE_TOKENS = 256  # the most tokens a chat template is taken to wrap a user message in (openai._room)


@dataclass(frozen=True)
class OpenAIConfig:
    base_url: str  # ends with /v1
    model: str = ""  # empty: the first model the server lists
    chat: bool = False  # use /chat/completions with one user message per prompt
    concurrency: int = 8
    timeout: float = 120.0  # seconds per request, all of it: connect, send, wait and read
    retries: int = 4  # extra attempts after the first
    backoff: float = 0.5  # first delay in seconds; doubles per attempt, with jitter
    max_backoff: float = 30.0
    logprobs: bool = False  # ask for the sampled tokens' log-probabilities
    token_ids: bool = False  # ask for the sampled token ids (vLLM's `return_token_ids`)
    train: str = ""  # the checkpoint directory the server serves: `evo run --train` trains it (evo/policies/served.py)
    api_key: str = ""

    def __post_init__(self) -> None:
        check_config("openai", self, RANGES)
        if any(ord(c) < 32 or ord(c) == 127 for c in self.api_key):
            raise UserError("openai: the API key (OPENAI_API_KEY) holds a control character such as a line break")


def normalize_base_url(url: str) -> str:
    """`http://host:8000` and `http://host:8000/` mean `http://host:8000/v1`."""
    url = url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UserError(f"openai: policy URL must start with http:// or https:// (got {url!r})")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number in 0..65535
    except ValueError as error:
        raise UserError(f"openai: bad policy URL {url!r}: {error}") from None
    if not parts.hostname or any(c.isspace() or ord(c) < 32 for c in url):
        raise UserError(f"openai: bad policy URL {url!r}: expected http://HOST[:PORT][/PATH]")
    return url if parts.path else url + "/v1"


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with 'equal jitter': in [d/2, d] with d = min(cap, base * 2**attempt)."""
    delay = min(cap, base * (2.0 ** min(attempt, 64)))
    return delay * (0.5 + 0.5 * rng.random())


def map_abandonable(fn: Callable[[int], object], count: int, workers: int) -> list:
    """[fn(0), ..., fn(count - 1)] on `workers` daemon threads. The first error is raised at once;
    an interrupted caller (Ctrl-C) returns without joining: calls in flight are abandoned."""
    done: queue.Queue = queue.Queue()
    todo = iter(range(count))
    lock = threading.Lock()
    failed = threading.Event()

    def work() -> None:
        while not failed.is_set():
            with lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                done.put((i, fn(i), None))
            except BaseException as error:  # noqa: BLE001 -- re-raised in the caller
                failed.set()
                done.put((i, None, error))

    for _ in range(min(workers, count)):
        threading.Thread(target=work, daemon=True).start()
    results: list = [None] * count
    for _ in range(count):
        i, value, error = done.get()
        if error is not None:
            raise error
        results[i] = value
    return results


class OpenAIPolicy:
    """A Policy over an OpenAI-compatible HTTP API."""

    def __init__(self, config: OpenAIConfig) -> None:
        key = config.api_key or os.environ.get("OPENAI_API_KEY", "")
        self.config = OpenAIConfig(**{**config.__dict__, "base_url": normalize_base_url(config.base_url), "api_key": key})
        self._rng = random.Random()
        self._lock = threading.Lock()
        self.attempts = 0  # requests sent, retries included (for tests and logs)
        self.usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}  # as the server reported them
        self.context: int | None = None  # the served model's context in tokens, where `GET /models` says it (check)

    def check(self) -> None:
        """Reach the server once (no retries) and pick or validate the model; one-line error if not."""
        cfg = self.config
        try:
            listed = self._request("GET", "/models", None, timeout=min(cfg.timeout, 10.0))
            served = replies.model_ids(listed)
        except (NotJSON, replies.MalformedReply) as exc:
            raise UserError(f"openai: {cfg.base_url}/models is not an OpenAI model list: {exc}") from None
        except RetryableError as exc:
            raise UserError(f"openai: cannot reach {cfg.base_url}: {exc}; is the server running?") from None
        if not cfg.model:
            if not served:
                raise UserError(f"openai: {cfg.base_url} lists no models; name one as openai:URL#MODEL")
            self.config = OpenAIConfig(**{**cfg.__dict__, "model": served[0]})
        elif served and cfg.model not in served:
            shown = one_line(", ".join(served[:10]) + (", ..." if len(served) > 10 else ""))
            raise UserError(f"openai: model {cfg.model!r} is not served by {cfg.base_url}; served: {shown}")
        self.context = replies.context_length(listed, self.config.model)

    def generate(self, prompts: Sequence[str] | Sequence[Sequence[int]], *, n: int = 1, max_new_tokens: int = 256,
                 temperature: float = 1.0, top_p: float = 1.0, seed: int | None = None, stop: Sequence[str] = ()) -> list[list[Completion]]:
        check_sampling("openai", n=n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)
        n, max_new_tokens, temperature, top_p = int(n), int(max_new_tokens), float(temperature), float(top_p)  # JSON
        draws = 1 if temperature < GREEDY_BELOW else n  # servers refuse n > 1 for greedy; greedy repeats

        def one(i: int) -> list[Completion]:
            body = self._body(prompts[i], draws, max_new_tokens, temperature, top_p,
                              None if seed is None else prompt_seed(seed, i), stop)
            return self._complete_with_retries(body, draws) * (n // draws)

        if len(prompts) <= 1 or self.config.concurrency <= 1:
            return [one(i) for i in range(len(prompts))]
        return map_abandonable(one, len(prompts), self.config.concurrency)

    def _body(self, prompt: str | Sequence[int], n: int, max_new_tokens: int, temperature: float, top_p: float,
              seed: int | None, stop: Sequence[str]) -> dict:
        body: dict = {"model": self.config.model, "n": n, "max_tokens": self._room(prompt, max_new_tokens),
                      "temperature": temperature, "top_p": top_p}
        body.update(self._prompt_fields(prompt))
        if seed is not None:
            body["seed"] = seed
        if stop:
            body["stop"] = list(stop)
        if self.config.logprobs:
            body.update({"logprobs": True} if self.config.chat else {"logprobs": 0})
        if self.config.token_ids:
            body["return_token_ids"] = True
        return body

    def _prompt_fields(self, prompt: str | Sequence[int]) -> dict:
        """How a request carries its prompt: one user message with `;chat`, else the text or token ids."""
        if self.config.chat:
            return {"messages": [{"role": "user", "content": prompt}]}
        return {"prompt": prompt if isinstance(prompt, str) else list(prompt)}  # token ids: /completions only

    def _room(self, prompt: str | Sequence[int], max_new_tokens: int) -> int:
        """`max_new_tokens` within the served model's context, where the server states it: vLLM
        refuses a request whose prompt and `max_tokens` together pass its max_model_len, so a
        search's budget for a long program would end the run. A prompt is measured only when it
        could matter: token ids by their count; a text when its UTF-8 bytes (no tokenizer writes
        more tokens than bytes, plus its special tokens and, with `;chat`, the template's
        wrapper: TEMPLATE_TOKENS) and the budget pass the context, by the server (vLLM's
        /tokenize). A prompt that fills the context alone is refused in one line, as the
        `local:` sampler refuses it."""
        if self.context is None:
            return max_new_tokens
        if isinstance(prompt, str):
            bound = len(prompt.encode()) + (TEMPLATE_TOKENS if self.config.chat else 2)
            used = 0 if bound + max_new_tokens <= self.context else self._count(prompt)
            if used is None:
                return max_new_tokens
        else:
            used = len(prompt)
        if used >= self.context:
            raise UserError(f"openai: a prompt of {used} tokens does not fit the served model's context of "
                            f"{self.context} tokens; shorten the prompt, or serve the model with a larger --max-model-len")
        return min(max_new_tokens, self.context - used)

    def _count(self, prompt: str) -> int | None:
        """The prompt's length in the served model's tokens, by vLLM's `POST /tokenize` (beside /v1);
        None where the server has no such endpoint."""
        body = {"model": self.config.model, **self._prompt_fields(prompt)}
        if self.config.chat:
            body["add_generation_prompt"] = True
        url = self.config.base_url.removesuffix("/v1") + "/tokenize"
        try:
            count = exchange("POST", url, body, self._headers(), min(self.config.timeout, 30.0)).get("count")
        except (UserError, RetryableError, NotJSON):
            return None
        return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None

    def _complete_with_retries(self, body: dict, n: int) -> list[Completion]:
        """POST one request and read its `n` completions; a fault or a malformed reply is retried."""
        cfg = self.config
        path = "/chat/completions" if cfg.chat else "/completions"
        for attempt in range(cfg.retries + 1):
            try:
                reply = self._request("POST", path, body, timeout=cfg.timeout)
                completions = replies.completions(reply, n, cfg.chat)
                prompt_tokens, completion_tokens = replies.usage(reply)
                with self._lock:
                    self.usage["requests"] += 1
                    self.usage["prompt_tokens"] += prompt_tokens
                    self.usage["completion_tokens"] += completion_tokens
                return completions
            except (RetryableError, replies.MalformedReply) as exc:
                reason = f"malformed reply: {exc}" if isinstance(exc, replies.MalformedReply) else str(exc)
                if attempt == cfg.retries:
                    gone = " (the server answered before: has it stopped? its log says why)" if (
                        self.usage["requests"] and getattr(exc, "refused", False)) else ""
                    raise WorkFailed(f"openai: POST {cfg.base_url}{path} failed after {attempt + 1} attempts: {reason}{gone}") from None
                delay = backoff_delay(attempt, cfg.backoff, cfg.max_backoff, self._rng)
                time.sleep(max(delay, min(getattr(exc, "retry_after", None) or 0.0, cfg.max_backoff)))
        raise AssertionError("unreachable")

    def _request(self, method: str, path: str, body: dict | None, timeout: float) -> dict:
        """One HTTP exchange of at most `timeout` seconds. RetryableError for transient faults, UserError for the rest."""
        with self._lock:
            self.attempts += 1
        return exchange(method, self.config.base_url + path, body, self._headers(), timeout)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return headers


def parse_uri(rest: str) -> OpenAIConfig:
    """`URL#MODEL[;chat][;logprobs][;token_ids][;concurrency=8][;timeout=60][;retries=4][;train=PATH]` -> config."""
    url, _, fragment = rest.partition("#")
    model, *options = fragment.split(";") if fragment else ("",)
    fields: dict = {"base_url": url, "model": model}
    for option in options:
        key, has_value, value = option.partition("=")
        if key in FLAGS and not has_value:
            fields[key] = True
        elif key in RANGES and has_value:
            fields[key] = parse_option("openai", key, value, RANGES)
        elif key == "train" and value:
            fields[key] = value
        else:
            known = ", ".join([*FLAGS, *(f"{k}=N" for k in RANGES), "train=PATH"])
            raise UserError(f"openai: unknown option {option!r}; known: {known}")
    return OpenAIConfig(**fields)

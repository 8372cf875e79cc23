"""One JSON-over-HTTP exchange with a deadline on the whole request, standard library only.

A socket timeout bounds each read, not their sum: a server that drips its reply a byte at a
time never trips it. Here a watchdog timer shuts the request's socket down when the request's
time is up (connect, send, headers and body together), so every exchange ends by its deadline.
urllib still does the rest (proxies from the environment, TLS, HTTP errors).
"""

from __future__ import annotations

import functools
import http.client
import json
import math
import socket
import threading
import urllib.error
import urllib.request

from evo.errors import UserError

MAX_REPLY_BYTES = 64 << 20  # a longer reply is a fault, not something to hold in memory


class RetryableError(Exception):
    """A failure worth another attempt (429, 5xx, timeout, connection, malformed reply)."""

    def __init__(self, reason: str, retry_after: float | None = None, refused: bool = False) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.refused = refused  # the connection was refused: nothing listens at the address


class NotJSON(RetryableError):
    """A reply that is not one JSON object (or is too large to read)."""


class Deadline:
    """Shuts the attached socket down `seconds` after `start()`; `expired` says whether it did."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True  # never joined at exit: Ctrl-C does not wait for it

    def __enter__(self) -> "Deadline":
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def attach(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock, expired = sock, self.expired
        if expired:
            _shutdown(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired, sock = True, self._sock
        if sock is not None:
            _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    try:  # the plain socket's shutdown, also for TLS: the blocked read then sees end of file
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed: the request is over


class _Watched:
    """An http.client connection that hands its socket to a Deadline once connected."""

    def __init__(self, *args, deadline: Deadline, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self._deadline.attach(self.sock)  # type: ignore[attr-defined]


class _HTTP(_Watched, http.client.HTTPConnection):
    pass


class _HTTPS(_Watched, http.client.HTTPSConnection):
    pass


class _DeadlineHandler:
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def do_open(self, http_class, req, **kwargs):
        watched = _HTTPS if issubclass(http_class, http.client.HTTPSConnection) else _HTTP
        return super().do_open(functools.partial(watched, deadline=self._deadline), req, **kwargs)


class _HTTPHandler(_DeadlineHandler, urllib.request.HTTPHandler):
    pass


class _HTTPSHandler(_DeadlineHandler, urllib.request.HTTPSHandler):
    pass


def exchange(method: str, url: str, body: dict | None, headers: dict[str, str], timeout: float) -> dict:
    """Send `body` as JSON and return the JSON object replied, all within `timeout` seconds.

    Raises RetryableError for faults worth another attempt, UserError for a refused request.
    """
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    with Deadline(timeout) as deadline:
        opener = urllib.request.build_opener(_HTTPHandler(deadline), _HTTPSHandler(deadline))
        try:
            with opener.open(request, timeout=timeout) as reply:
                raw = reply.read(MAX_REPLY_BYTES + 1)
                missing = reply.length  # bytes the Content-Length promised that never came (None: no length)
        except urllib.error.HTTPError as exc:
            if deadline.expired:
                raise RetryableError(f"timed out after {timeout:g} s") from None
            raise _http_error(exc) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            if deadline.expired:
                raise RetryableError(f"timed out after {timeout:g} s") from None
            reason = getattr(exc, "reason", exc)
            raise RetryableError(f"connection error: {_describe(reason)}",
                                 refused=isinstance(reason, ConnectionRefusedError)) from None
    if deadline.expired:  # a reply without a length, cut short by the deadline
        raise RetryableError(f"timed out after {timeout:g} s")
    if missing and len(raw) <= MAX_REPLY_BYTES:
        raise RetryableError(f"connection error: the reply was cut short ({len(raw)} bytes read, {missing} missing)")
    if len(raw) > MAX_REPLY_BYTES:
        raise NotJSON(f"reply larger than {MAX_REPLY_BYTES >> 20} MiB")
    return _json_object(raw)


def one_line(text: str, limit: int = 200) -> str:
    """Server-sent text fit for a one-line message: whitespace runs (line breaks too) become one space."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(reason: object) -> str:
    """An OS error as its message; an http.client fault (BadStatusLine, IncompleteRead) with its name."""
    text = one_line(str(reason)) or type(reason).__name__
    return text if isinstance(reason, OSError) else f"{type(reason).__name__}: {text}"


def _json_object(raw: bytes) -> dict:
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise NotJSON(f"malformed JSON reply: {raw[:80]!r}") from None
    if not isinstance(parsed, dict):
        raise NotJSON(f"malformed reply (not a JSON object): {raw[:80]!r}")
    return parsed


def _http_error(exc: urllib.error.HTTPError) -> Exception:
    try:
        detail = one_line(exc.read(200).decode("utf-8", "replace"))
    except (OSError, http.client.HTTPException, ValueError):
        detail = ""
    reason = f"HTTP {exc.code}" + (f": {detail}" if detail else "")
    if exc.code == 429 or exc.code >= 500:
        retry_after = exc.headers.get("Retry-After") if exc.headers else None
        try:
            seconds = float(retry_after) if retry_after else None
        except ValueError:
            seconds = None
        return RetryableError(reason, seconds if seconds is not None and 0 <= seconds < math.inf else None)
    return UserError(f"openai: {exc.url} refused the request: {reason}{endpoint_hint(exc.url, exc.code, detail)}")


def endpoint_hint(url: str, code: int, detail: str) -> str:
    """What to change when a 404 (or a 400 about chat) means the wrong endpoint: chat
    models and most hosted APIs serve only /chat/completions (the URI's `;chat`)."""
    chat = url.rstrip("/").endswith("/chat/completions")
    if not url.rstrip("/").endswith("/completions") or not (code == 404 or (code == 400 and "chat" in detail.lower())):
        return ""
    if chat:
        return " (this server may not serve /chat/completions: try the URI without ;chat, or check the URL's /v1)"
    return (" (chat models and most hosted APIs serve only /chat/completions: add ;chat to the URI, "
            "openai:URL#MODEL;chat; also check the model name and the URL's /v1)")

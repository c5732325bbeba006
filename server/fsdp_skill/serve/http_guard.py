"""What keeps `serve --http` alive and bounded when clients misbehave or open files run out.

Under a 256 open-files limit (the macOS default) 300 idle TCP connections made `accept()` fail with
EMFILE; asyncio logged that through the SDK's rich handler, whose lazy `import rich.traceback` failed
too (importing opens a file), the event loop died and the process exited or hung holding the port.
Half-sent headers were held forever, nothing limited concurrent requests, an open GET SSE stream kept
its session from ever idling out, and a client that hung up mid-`verify_example` kept the run.

Here: the soft open-files limit is raised to the hard one; concurrent connections are capped below
it (uvicorn answers 503 beyond the cap); a connection that has not sent complete request headers
within HEADER_TIMEOUT_S is closed; the log path is a plain stream handler that imports nothing and
prints one line per record (repeats of the accept error at most once per ACCEPT_LOG_EVERY_S); a GET
stream lasts at most the session idle timeout; and a POST whose client disconnects before its answer
is cancelled in its session, as if the client had sent `notifications/cancelled`, so a run stops and
frees its slot.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import resource
import sys
import time
from typing import Any

import anyio
from uvicorn.protocols.http.h11_impl import H11Protocol

from fsdp_skill.core.limits import HEADER_TIMEOUT_S, MAX_HTTP_CONNECTIONS, RESERVED_FILES

# The asyncio message for a failed accept() (EMFILE, ENFILE, ENOBUFS, ENOMEM); asyncio retries the
# accept itself a second later.
ACCEPT_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
ACCEPT_LOG_EVERY_S = 10.0
# The largest body whose JSON-RPC id is read to cancel the request if its client hangs up.
MAX_PEEK_BYTES = 1_000_000


def raise_open_files_limit() -> int:
    """Raise the soft open-files limit to the hard one; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # e.g. an unlimited hard limit that the kernel caps lower: keep the soft one
            pass
    return soft


def connection_limit(open_files: int) -> int:
    """How many connections may be open at once with `open_files` file descriptors: RESERVED_FILES stay for
    the index, the log, verify_example's pipes and the listening socket; at most MAX_HTTP_CONNECTIONS."""
    return max(8, min(MAX_HTTP_CONNECTIONS, open_files - RESERVED_FILES))


class PlainLineFormatter(logging.Formatter):
    """One line per record: the message, then the exception's type and text, never a traceback (the
    traceback of a client that went away or a full file table is noise, and rendering one may open files)."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"fsdp-skill serve: {record.levelname.lower()}: {record.getMessage()}"
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            line += f" ({type(error).__name__}: {error})"
        return line.replace("\n", " ")[:2000]


def plain_logging() -> None:
    """Replace the root handlers (the SDK installs rich's, which imports lazily) with a plain stderr stream."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PlainLineFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    logging.raiseExceptions = False  # a failed write to stderr must not print a traceback of its own


class LoopErrors:
    """The event loop's exception handler: a failed accept() is one line at most every ACCEPT_LOG_EVERY_S
    (asyncio retries it each second while the file table is full); anything else goes to the default."""

    def __init__(self) -> None:
        self.last_accept_log = -ACCEPT_LOG_EVERY_S
        self.accept_failures = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if isinstance(error, OSError) and error.errno in ACCEPT_ERRNOS:
            self.accept_failures += 1
            now = time.monotonic()
            if now - self.last_accept_log >= ACCEPT_LOG_EVERY_S:
                self.last_accept_log = now
                try:
                    sys.stderr.write(f"fsdp-skill serve: cannot accept connections ({error.strerror}); retrying "
                                     "each second: close idle clients, or raise the open-files limit (ulimit -n)\n")
                    sys.stderr.flush()
                except (OSError, ValueError):
                    pass
            return
        loop.default_exception_handler(context)


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers are not complete HEADER_TIMEOUT_S
    after it opened or after its previous response (a slowloris client holds a file descriptor each)."""

    header_timeout_s = HEADER_TIMEOUT_S

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm_header_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_header_deadline()

    def _arm_header_deadline(self) -> None:
        armed_for = self.cycle  # a new request replaces the cycle; then its headers did arrive in time

        def overdue() -> None:
            waiting = self.cycle is None or self.cycle.response_complete
            if self.cycle is armed_for and waiting and not self.transport.is_closing():
                self.transport.close()

        self.loop.call_later(self.header_timeout_s, overdue)


def _header(scope: dict[str, Any], name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value)
    return None


def _request_id(body: bytes) -> Any:
    """The id of the JSON-RPC request in `body`, or None (a notification, a batch, not JSON, too long)."""
    if len(body) > MAX_PEEK_BYTES:
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if isinstance(message, dict) and isinstance(message.get("method"), str):
        found = message.get("id")
        return found if isinstance(found, (str, int)) and not isinstance(found, bool) else None
    return None


class SessionBounds:
    """ASGI middleware: a GET (SSE) stream ends after `stream_s` seconds, so it cannot hold its session past
    the idle timeout; a POST whose client disconnects before the answer is cancelled in its session."""

    def __init__(self, app: Any, stream_s: float) -> None:
        self.app = app
        self.stream_s = stream_s

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
        elif scope.get("method") == "GET":
            await self._bounded_stream(scope, receive, send)
        elif scope.get("method") == "POST" and _header(scope, b"mcp-session-id"):
            await self._cancel_on_disconnect(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _bounded_stream(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        state = {"started": False, "ended": False}

        async def tracked(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["ended"] = True
            await send(message)

        with anyio.move_on_after(self.stream_s):
            await self.app(scope, receive, tracked)
        if state["started"] and not state["ended"]:  # the client reconnects the stream if it is still there
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _cancel_on_disconnect(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its request was whole: nothing was dispatched
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        request_id = _request_id(body)
        state = {"replayed": False, "answered": False, "cancelled": False}

        async def replay() -> dict[str, Any]:
            if not state["replayed"]:
                state["replayed"] = True
                return {"type": "http.request", "body": body, "more_body": False}
            message = await receive()
            if message["type"] == "http.disconnect" and not state["answered"] and request_id is not None \
                    and not state["cancelled"]:
                state["cancelled"] = True
                with anyio.move_on_after(5), anyio.CancelScope(shield=True):
                    await self._cancel(scope, request_id)
            return message

        async def tracked(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                state["answered"] = True
            await send(message)

        await self.app(scope, replay, tracked)

    async def _cancel(self, scope: dict[str, Any], request_id: Any) -> None:
        """POST `notifications/cancelled` for `request_id` into the same session, as its client would."""
        body = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": request_id, "reason": "the HTTP client disconnected"}}).encode()
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        sent = False

        async def once() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def discard(message: dict[str, Any]) -> None:
            return None

        await self.app({**scope, "headers": headers}, once, discard)

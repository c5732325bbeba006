"""Streamable HTTP: a socket we bind ourselves (so `--port 0` picks a free port and says which), a log
without tracebacks for clients that simply went away, and an idle timeout for sessions.

uvicorn binds inside the SDK's `run("streamable-http")`, after the point where we could still say
which port it got; binding first and handing uvicorn the socket also removes the window in which
another process could take a port we had checked was free.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket

import anyio
from mcp.server.mcpserver import MCPServer

from fsdp_skill.core.errors import UserError
from fsdp_skill.core.limits import DEFAULT_SESSION_IDLE_S
from fsdp_skill.serve.http_guard import (
    HeaderTimeoutProtocol,
    LoopErrors,
    SessionBounds,
    connection_limit,
    plain_logging,
    raise_open_files_limit,
)

# Where the session idle timeout comes from when --session-idle-timeout is not given (core.limits says why).
IDLE_TIMEOUT_ENV = "FSDP_SKILL_SESSION_IDLE_TIMEOUT"

# Who logs a request whose client hung up: the SDK's transport (logger.exception) and uvicorn.
DISCONNECT_LOGGERS = ("mcp.server.streamable_http", "mcp.server.streamable_http_manager", "uvicorn.error")


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: any free port); UserError saying what to do otherwise."""
    if not 0 <= port <= 65535:
        raise UserError(f"--port must be between 0 (any free port) and 65535, got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, reuse_port=False)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port} ({exc.strerror}): pick another --port (0 picks a free one)") \
            from None


def idle_timeout_s(flag: float | None) -> float:
    """The session idle timeout: the flag, else the environment variable, else the default; UserError
    for a value that is not a positive number of seconds."""
    if flag is not None:
        value, source = flag, "--session-idle-timeout"
    elif os.environ.get(IDLE_TIMEOUT_ENV, "").strip():
        source = f"${IDLE_TIMEOUT_ENV}"
        try:
            value = float(os.environ[IDLE_TIMEOUT_ENV])
        except ValueError:
            raise UserError(f"{source} must be a number of seconds, got {os.environ[IDLE_TIMEOUT_ENV][:80]!r}") \
                from None
    else:
        return DEFAULT_SESSION_IDLE_S
    if not (math.isfinite(value) and value > 0):
        raise UserError(f"{source} must be a positive number of seconds (e.g. 600), got {value:g}")
    return value


class DropClientDisconnects(logging.Filter):
    """Drop the records whose exception only says the client went away (a closed tab, a cancelled
    request): they are not server errors, and each one printed a 100-line traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or not is_disconnect(error)


def is_disconnect(error: BaseException) -> bool:
    from starlette.requests import ClientDisconnect

    grouped = getattr(error, "exceptions", None)  # an exception group (a builtin from Python 3.11)
    if isinstance(grouped, tuple) and grouped:
        return all(is_disconnect(inner) for inner in grouped)
    disconnects = (ClientDisconnect, anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError)
    return isinstance(error, disconnects) or (error.__cause__ is not None and is_disconnect(error.__cause__))


def serve_http(server: MCPServer, sock: socket.socket, host: str, idle_s: float = DEFAULT_SESSION_IDLE_S,
               open_files: int | None = None) -> None:
    """Serve `server` over streamable HTTP on an already listening socket until interrupted; sessions idle
    for `idle_s` seconds are closed; at most connection_limit(open_files) connections at once (http_guard)."""
    import uvicorn

    plain_logging()
    quiet = DropClientDisconnects()
    for name in DISCONNECT_LOGGERS:
        logging.getLogger(name).addFilter(quiet)
    app = SessionBounds(server.streamable_http_app(host=host, session_idle_timeout=idle_s), stream_s=idle_s)
    limit = connection_limit(open_files if open_files is not None else raise_open_files_limit())
    # log_config=None: uvicorn keeps the plain handler above instead of installing its own formatters.
    config = uvicorn.Config(app, log_level=server.settings.log_level.lower(), http=HeaderTimeoutProtocol,
                            limit_concurrency=limit, log_config=None)

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(LoopErrors())
        await uvicorn.Server(config).serve(sockets=[sock])

    anyio.run(run)

"""Streamable HTTP: a socket we bind ourselves (so `--port 0` picks a free port and says which), and
a log without tracebacks for clients that simply went away.

uvicorn binds inside the SDK's `run("streamable-http")`, after the point where we could still say
which port it got; binding first and handing uvicorn the socket also removes the window in which
another process could take a port we had checked was free.
"""

from __future__ import annotations

import logging
import socket

import anyio
from mcp.server.mcpserver import MCPServer

from fsdp_skill.core.errors import UserError

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


def serve_http(server: MCPServer, sock: socket.socket, host: str) -> None:
    """Serve `server` over streamable HTTP on an already listening socket until interrupted."""
    import uvicorn

    quiet = DropClientDisconnects()
    for name in DISCONNECT_LOGGERS:
        logging.getLogger(name).addFilter(quiet)
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level=server.settings.log_level.lower())
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))

"""The stdio transport, answering the requests the SDK's reader cannot parse.

The SDK reads each stdin line with pydantic's strict JSON parser. A line it rejects (a lone UTF-16
surrogate such as "\\ud800" in a string, which Python's json accepts and pydantic does not) reaches
the session as a bare exception that is logged and dropped: the client waits forever for that id.
`AnsweringReadStream` sits between the SDK's reader and the server: it recovers the rejected line
from the parse error, reads its id with Python's json, and sends that id a JSON-RPC error saying
what was wrong, so the client gets an answer and the session goes on.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
)
from pydantic import ValidationError
from typing_extensions import Self

from fsdp_skill.core.quoting import quote


class AnsweringReadStream:
    """A read stream over the SDK's stdio reader that replies to unparseable requests itself."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self._inner = inner
        self._write_stream = write_stream

    @property
    def last_context(self) -> Any:  # the SDK restores the sender's context vars from it
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            reply = error_reply(item) if isinstance(item, Exception) else None
            if reply is None:
                return item
            await self._write_stream.send(SessionMessage(reply))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> bool | None:
        await self.aclose()
        return None


def error_reply(error: Exception) -> JSONRPCError | None:
    """The JSON-RPC error for a request line the SDK could not parse; None when it has no id to answer."""
    line = _rejected_line(error)
    if line is None:
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None  # not JSON at all: there is no id to answer
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None  # a notification: JSON-RPC never answers those
    path = _surrogate_path(message)
    if path is not None:
        code = INVALID_PARAMS if path.startswith("params") else PARSE_ERROR
        text = (f"{path} holds a lone UTF-16 surrogate, which is not valid Unicode text: "
                "send the string as valid UTF-8 (or drop the unpaired \\ud800-\\udfff escape)")
    else:
        code = INVALID_REQUEST
        text = f"the request could not be read as JSON-RPC: {quote(str(error).splitlines()[-1])}"
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=text))


def _rejected_line(error: Exception) -> str | None:
    """The raw line, when the error is the SDK's JSON parser rejecting it (pydantic's json_invalid)."""
    if not isinstance(error, ValidationError):
        return None
    for detail in error.errors():
        if detail.get("type") == "json_invalid" and isinstance(detail.get("input"), str):
            return str(detail["input"])
    return None


def _surrogate_path(value: Any, path: str = "") -> str | None:
    """Where the first string (or key) holding a lone surrogate is, as 'params.arguments.symbol'."""
    if isinstance(value, str):
        return (path or "the request") if any(_is_surrogate(c) for c in value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{_escaped(str(key))}".lstrip(".")
            found = _surrogate_path(key, f"the key {where}") or _surrogate_path(item, where)
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _surrogate_path(item, f"{path}[{index}]")
            if found:
                return found
    return None


def _is_surrogate(char: str) -> bool:
    return 0xD800 <= ord(char) <= 0xDFFF


def _escaped(text: str) -> str:
    """text cut to ~200 characters, surrogates written as \\uXXXX: the reply itself must be valid UTF-8."""
    text = text if len(text) <= 200 else text[:200] + "…"
    return "".join(f"\\u{ord(c):04x}" if _is_surrogate(c) else c for c in text)

"""The stdio transport: our own line reader in front of the SDK's session, so that every line is answered.

Why not the SDK's reader (mcp.server.stdio): it iterates stdin as text in universal-newline mode, so a
raw CR inside a string splits one message into two broken ones; it parses with pydantic's strict
parser, and every line that parser rejects (a raw TAB, a BOM, two messages on one line, a lone
surrogate) reaches the session as a bare exception that is logged and dropped, so the client waits
forever; and it reads a line of any length into memory. Patching after its parse (we did, for lone
surrogates) cannot recover what its line splitting already destroyed. So stdin is read here as bytes,
split on LF only, each line capped at MAX_LINE_BYTES while it is read, and turned into messages and
error replies by `jsonrpc_lines.read_line`, which answers every line (a reply for its id, or a
JSON-RPC error with id null).

What stays the SDK's: the stdout side (`stdio_server` diverts fd 1 to stderr while serving, so stray
prints cannot corrupt the wire, and writes each reply as one line). Its own stdin reader is handed an
input with no lines, so it ends at once and never touches fd 0.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from types import TracebackType
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.lowlevel import EventLoopToken
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
from typing_extensions import Self

from fsdp_skill.serve.jsonrpc_lines import KEEP_HEAD, KEEP_TAIL, MAX_LINE_BYTES, Outcome, oversized_line, read_line

__all__ = ["AnsweredRequests", "DaemonReads", "LineReadStream", "LineReader", "stdio_transport"]

CHUNK_BYTES = 64 * 1024
# At the end of input, how long requests already read may still finish and be answered before the session
# ends (it cancels what is left): `cat requests.jsonl | fsdp-skill serve` gets every reply, and a client
# closing stdin to shut down (the MCP spec's way) waits a few seconds at most before it signals us anyway.
DRAIN_S = 10.0
# Requests read from stdin and not yet answered, at most: past this, no further line is read until one is
# answered (the client's writes then block on the pipe, as for any busy reader). 2,000 calls sent at once were
# all taken in, so a ping behind them waited 64 s and a tools/list burst left 423 MB of RSS; a client that sends
# one call at a time, or a few in parallel, never meets the bound.
MAX_IN_FLIGHT = 64


class DaemonReads:
    """Blocking reads (of stdin) done in a daemon thread of our own. anyio's worker threads are not daemons:
    one blocked on an idle stdin kept the process from exiting on Ctrl-C or SIGTERM until another line came."""

    def __init__(self, read_chunk: Callable[[int], bytes]) -> None:
        self._read_chunk = read_chunk
        self._requests: queue.SimpleQueue[tuple[int, anyio.Event, list[bytes | BaseException]]] = queue.SimpleQueue()
        self._token: EventLoopToken | None = None

    async def read(self, size: int) -> bytes:
        if self._token is None:
            self._token = anyio.lowlevel.current_token()
            threading.Thread(target=self._serve, name="fsdp-skill stdin", daemon=True).start()
        done, box = anyio.Event(), list[bytes | BaseException]()
        self._requests.put((size, done, box))
        await done.wait()  # a cancelled wait (shutdown) leaves the thread blocked: it is a daemon
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def _serve(self) -> None:
        while True:
            size, done, box = self._requests.get()
            try:
                box.append(self._read_chunk(size))
            except BaseException as exc:  # noqa: BLE001 - handed to the reading task, which raises it
                box.append(exc)
            try:
                anyio.from_thread.run_sync(done.set, token=self._token)
            except RuntimeError:  # the event loop has ended
                return


class LineReader:
    """Lines of a byte source, split on LF only, none held beyond MAX_LINE_BYTES: an over-long line comes
    back as `(head, tail, size)` with only its first and last bytes kept."""

    def __init__(self, read_chunk: Callable[[int], Awaitable[bytes]], limit: int = MAX_LINE_BYTES) -> None:
        self._read_chunk = read_chunk
        self._limit = limit
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for LF
        self._eof = False

    async def next_line(self) -> bytes | tuple[bytes, bytes, int] | None:
        """The next line without its LF, an oversized line's (head, tail, size), or None at the end of input."""
        head: bytes | None = None  # set once the line is known to be over the limit
        tail = b""
        size = 0
        while True:
            newline = self._buffer.find(b"\n", self._scanned)
            self._scanned = len(self._buffer)
            if newline >= 0 or (self._eof and self._buffer):
                end = newline if newline >= 0 else len(self._buffer)
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                self._scanned = 0
                if head is None and len(line) <= self._limit:
                    return line
                head = line[:KEEP_HEAD] if head is None else head
                return head, (tail + line)[-KEEP_TAIL:], size + len(line)
            if self._eof:
                return (head, tail, size) if head is not None else None
            if head is not None or len(self._buffer) > self._limit:
                # Over the limit: keep the head and a tail, drop the middle as it streams past.
                head = bytes(self._buffer[:KEEP_HEAD]) if head is None else head
                tail = (tail + bytes(self._buffer))[-KEEP_TAIL:]
                size += len(self._buffer)
                self._buffer.clear()
                self._scanned = 0
            chunk = await self._read_chunk(CHUNK_BYTES)
            if not chunk:
                self._eof = True
            self._buffer.extend(chunk)


class AnsweredRequests:
    """The write stream the session replies on, noting which requests read from stdin are still unanswered."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.unanswered: set[int | str] = set()
        self._all_answered = anyio.Event()

    def expect(self, request_id: int | str) -> None:
        self.unanswered.add(request_id)

    def forget(self, request_id: object) -> None:
        """A request the client cancelled: the session sends no reply for it."""
        if isinstance(request_id, int | str):
            self.unanswered.discard(request_id)
            self._all_answered.set()

    async def send(self, item: SessionMessage) -> None:
        await self._inner.send(item)
        if isinstance(item.message, JSONRPCResponse | JSONRPCError) and item.message.id is not None:
            self.unanswered.discard(item.message.id)
            self._all_answered.set()  # wakes at_most(), which checks the count again

    async def all_answered(self) -> None:
        await self.at_most(0)

    async def at_most(self, count: int) -> None:
        """Return once no more than `count` requests are unanswered."""
        while len(self.unanswered) > count:
            event = self._all_answered = anyio.Event()
            await event.wait()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class LineReadStream:
    """The session's read stream: messages from stdin lines; the error replies a line earns are sent
    straight to the write stream, so the session only ever sees well-formed messages. At the end of
    input it ends only once the requests it delivered are answered (or DRAIN_S has passed). With
    MAX_IN_FLIGHT requests unanswered it reads no further line until one is answered."""

    def __init__(self, lines: LineReader, write_stream: AnsweredRequests, drain_s: float = DRAIN_S,
                 max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self._lines = lines
        self._write_stream = write_stream
        self._drain_s = drain_s
        self._max_in_flight = max_in_flight
        self._pending: deque[Outcome] = deque()
        self.last_context = None  # the SDK restores a sender's context vars from it; stdin has none

    async def receive(self) -> SessionMessage:
        while True:
            while self._pending:
                outcome = self._pending.popleft()
                if isinstance(outcome, JSONRPCError):  # a reply the line earned, never the client's own error
                    await self._write_stream.send(SessionMessage(outcome))
                    continue
                message = outcome.message
                if isinstance(message, JSONRPCRequest):
                    self._write_stream.expect(message.id)
                elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
                    self._write_stream.forget((message.params or {}).get("requestId"))
                return outcome
            await self._write_stream.at_most(self._max_in_flight - 1)  # room for one more before reading on
            line = await self._lines.next_line()
            if line is None:
                with anyio.move_on_after(self._drain_s):
                    await self._write_stream.all_answered()
                raise anyio.EndOfStream
            self._pending.extend(read_line(line) if isinstance(line, bytes) else [oversized_line(*line)])

    async def aclose(self) -> None:
        return None

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage:
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


class _NoLines:
    """An input with no lines, for the SDK's stdin reader (ours reads stdin)."""

    def __aiter__(self) -> _NoLines:
        return self

    async def __anext__(self) -> str:
        raise StopAsyncIteration


@asynccontextmanager
async def stdio_transport() -> AsyncIterator[tuple[LineReadStream, AnsweredRequests]]:
    """(read stream, write stream) over this process's stdin and stdout, for `Server.run`."""
    with _claimed_stdin() as read_chunk:
        async with stdio_server(stdin=_NoLines()) as (sdk_read_stream, sdk_write_stream):  # type: ignore[arg-type]
            await sdk_read_stream.aclose()  # the SDK's reader got no lines; ours reads stdin
            write_stream = AnsweredRequests(sdk_write_stream)
            yield LineReadStream(LineReader(DaemonReads(read_chunk).read), write_stream), write_stream


@contextmanager
def _claimed_stdin() -> Iterator[Callable[[int], bytes]]:
    """A reader of the wire from a private duplicate of fd 0, with fd 0 itself pointed at the null device
    while serving (restored after), so that a child process or a handler reading stdin gets EOF, not
    our messages. The duplicate is never closed: a reading thread abandoned at shutdown may still block
    on it, and a closed descriptor could be reused under it."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # stdin replaced by something without a descriptor
        buffer: Any = sys.stdin.buffer
        yield lambda size: buffer.read1(size)
        return
    private = os.dup(fd)  # not inheritable (PEP 446): no child gets the wire
    diverted = False
    with suppress(OSError):
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, fd)
        os.close(null)
        diverted = True
    try:
        yield lambda size: os.read(private, size)
    finally:
        if diverted:
            with suppress(OSError):
                os.dup2(private, fd)

"""`serve --http` survives running out of open files, closes slowloris connections, and keeps GET streams and
disconnected clients inside the session and run limits (serve.http_guard)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn

from fsdp_skill.cli.bench_limits import _Server, concurrent_clients, first_answer_s, idle_connections
from fsdp_skill.serve.http_guard import (
    HeaderTimeoutProtocol,
    LoopErrors,
    PlainLineFormatter,
    SessionBounds,
    connection_limit,
)
from search_fixture import make_tree

OPEN_FILES, CLIENTS = 256, 300


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    return root


def test_the_http_server_answers_again_after_open_files_ran_out(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: the failed accept() was logged through rich's lazy import, which failed too, and the server exited.
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tree))
    server = _Server(idle_s=60, open_files=OPEN_FILES)
    try:
        assert idle_connections(server.url, CLIENTS) == CLIENTS
        recovered = first_answer_s(server.url, 30)
        assert recovered is not None and recovered < 10
        counts = concurrent_clients(server.url, CLIENTS, within_s=60)
        # Beyond the connection cap clients are told 503 (or wait in the backlog); none is left unanswered.
        assert set(counts) <= {200, 503} and counts.get(200, 0) > 0, counts
        recovered = first_answer_s(server.url, 30)
        assert recovered is not None and recovered < 10
        assert server.proc.poll() is None
    finally:
        server.stop()


def test_the_connection_cap_leaves_room_below_the_open_files_limit() -> None:
    assert connection_limit(256) == 192
    assert connection_limit(20) == 8
    assert connection_limit(1_000_000) == 1024


async def _empty_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def slow_header_server() -> Iterator[tuple[str, int]]:
    """uvicorn with the header-timeout protocol (0.5 s) on a free port, in a thread, stopped afterwards."""
    protocol = type("Quick", (HeaderTimeoutProtocol,), {"header_timeout_s": 0.5})
    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(_empty_app, http=protocol, log_config=None, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield sock.getsockname()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def test_half_sent_headers_are_closed_after_the_header_timeout(slow_header_server: tuple[str, int]) -> None:
    slow = socket.create_connection(slow_header_server, timeout=5)
    slow.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
    started = time.monotonic()
    assert slow.recv(100) == b""  # closed by the server, within the socket timeout
    assert time.monotonic() - started < 4
    # A complete request is answered, and the same connection is kept for the next one.
    good = socket.create_connection(slow_header_server, timeout=5)
    good.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b""
    while not answer.endswith(b"ok"):  # bounded by the socket timeout
        answer += good.recv(1000)
    assert answer.startswith(b"HTTP/1.1 200")
    good.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # half a second request: closed in its turn
    assert good.recv(100) == b""
    slow.close()
    good.close()


def test_a_failed_accept_is_one_line_at_most_every_ten_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    errors = LoopErrors()
    loop = asyncio.new_event_loop()
    try:
        for _ in range(50):
            errors(loop, {"message": "socket.accept() out of system resource", "exception": OSError(24, "Too many")})
    finally:
        loop.close()
    assert errors.accept_failures == 50
    assert capsys.readouterr().err.count("\n") == 1


def test_log_records_are_one_line_without_a_traceback() -> None:
    try:
        raise OSError(24, "Too many open files")
    except OSError as exc:
        record = logging.LogRecord("uvicorn.error", logging.ERROR, "x", 1, "Exception in ASGI\napplication", None,
                                   (type(exc), exc, exc.__traceback__))
    line = PlainLineFormatter().format(record)
    assert "\n" not in line and "Traceback" not in line and "OSError: [Errno 24] Too many open files" in line


def _scope(method: str) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": "/mcp",
            "headers": [(b"mcp-session-id", b"abc"), (b"content-type", b"application/json")]}


def test_a_get_stream_ends_at_the_session_idle_timeout() -> None:
    sent: list[dict[str, Any]] = []

    async def forever(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        while True:
            await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})
            await anyio.sleep(0.05)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()
        return {}

    async def main() -> float:
        started = anyio.current_time()
        with anyio.fail_after(5):
            await SessionBounds(forever, stream_s=0.3)(_scope("GET"), receive, send)
        return anyio.current_time() - started

    assert anyio.run(main) < 2
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_a_post_whose_client_hangs_up_is_cancelled_in_its_session() -> None:
    seen: list[tuple[dict[str, Any], bytes]] = []
    hung_up = anyio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = (await receive())["body"]
        seen.append((scope, body))
        if b"tools/call" in body:  # a long call: its answer never comes before the client leaves
            await send({"type": "http.response.start", "status": 200, "headers": []})
            assert (await receive())["type"] == "http.disconnect"

    async def receive() -> dict[str, Any]:
        if not hung_up.is_set():
            hung_up.set()
            return {"type": "http.request", "body": json.dumps(
                {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}}).encode(), "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        return None

    async def main() -> None:
        with anyio.fail_after(5):
            await SessionBounds(app, stream_s=60)(_scope("POST"), receive, send)

    anyio.run(main)
    assert len(seen) == 2
    scope, body = seen[1]
    assert json.loads(body) == {"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": 7, "reason": "the HTTP client disconnected"}}
    assert (b"mcp-session-id", b"abc") in scope["headers"]


def test_an_open_get_stream_no_longer_keeps_its_session_past_the_idle_timeout(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fsdp_skill.cli.bench_limits import PING, HttpConnection

    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tree))
    server = _Server(idle_s=2)
    try:
        [session] = server.open(1)
        host, port = server.url.split("//")[1].split("/")[0].split(":")
        stream = socket.create_connection((host, int(port)), timeout=10)
        stream.sendall(f"GET /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\nmcp-session-id: "
                       f"{session}\r\nmcp-protocol-version: 2025-06-18\r\n\r\n".encode())
        started, data = time.monotonic(), b""
        while not data.endswith(b"0\r\n\r\n"):  # the chunked stream's end; bounded by the socket timeout
            chunk = stream.recv(4096)
            assert chunk, data
            data += chunk
        assert data.startswith(b"HTTP/1.1 200") and time.monotonic() - started < 8
        stream.close()
        time.sleep(3)  # past the idle timeout, now that no stream holds the session
        conn = HttpConnection(server.url)
        assert conn.post(PING, session)[0] == 404
        conn.close()
    finally:
        server.stop()


def test_a_call_whose_http_client_hangs_up_is_cancelled_in_the_sdk_session() -> None:
    # The SDK kept running a request whose client had gone (a verify_example run kept its slot); SessionBounds
    # sends the session `notifications/cancelled` for it, which the SDK turns into a cancelled handler.
    from mcp.server.mcpserver import MCPServer

    from fsdp_skill.cli.bench_limits import INITIALIZE, HttpConnection

    cancelled = threading.Event()
    started = threading.Event()
    server = MCPServer("t")

    @server.tool()
    async def slow() -> str:
        started.set()
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return "done"

    sock = socket.create_server(("127.0.0.1", 0))
    app = SessionBounds(server.streamable_http_app(host="127.0.0.1"), stream_s=60)
    runner = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="on"))
    thread = threading.Thread(target=runner.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not runner.started and time.monotonic() < deadline:
            time.sleep(0.02)
        url = "http://127.0.0.1:%d/mcp" % sock.getsockname()[1]
        conn = HttpConnection(url)
        session = conn.post(INITIALIZE)[1]["mcp-session-id"]
        conn.post(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), session)
        body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                           "params": {"name": "slow", "arguments": {}}}).encode()
        conn.sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: {conn.host}\r\nAccept: application/json, text/event-stream\r\n"
                          f"Content-Type: application/json\r\nmcp-session-id: {session}\r\nmcp-protocol-version: "
                          f"2025-06-18\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        assert started.wait(10)
        conn.close()  # the client hangs up mid-call
        assert cancelled.wait(10)
    finally:
        runner.should_exit = True
        thread.join(timeout=10)
        sock.close()

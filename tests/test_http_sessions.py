"""Streamable HTTP sessions have an idle timeout: abandoned sessions are released, new clients still get in."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fsdp_skill.core.errors import UserError
from fsdp_skill.core.limits import DEFAULT_SESSION_IDLE_S
from fsdp_skill.serve.http import IDLE_TIMEOUT_ENV, idle_timeout_s
from search_fixture import make_tree

FSDP_SKILL = str(Path(sys.executable).with_name("fsdp-skill"))
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
PING = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
SESSIONS = 2000
IDLE_S = 3.0


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    return root


def start_server(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """`fsdp-skill serve --http --port 0 ARGS…` and its URL, read from the line it prints."""
    proc = subprocess.Popen([FSDP_SKILL, "serve", "--http", "--port", "0", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "FSDP_SKILL_ROOT": str(root), **(env or {})})
    assert proc.stderr
    lines = [proc.stderr.readline() for _ in range(3)]  # URL, search mode, idle timeout; each ends the wait
    url = re.search(r"http://127\.0\.0\.1:\d+/mcp", lines[0])
    assert url, lines
    return proc, url.group(0)


@pytest.fixture
def server(tree: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc, url = start_server(tree, "--session-idle-timeout", str(IDLE_S))
    try:
        yield proc, url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()


class Connection:
    """One keep-alive HTTP/1.1 connection to the server: thousands of requests cost the client little (an
    httpx request costs ~8 ms of client CPU, more than the server spends on it)."""

    def __init__(self, url: str) -> None:
        host, port = re.match(r"http://([^:/]+):(\d+)", url).groups()  # type: ignore[union-attr]
        self.host = f"{host}:{port}"
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.buffer = b""

    def post(self, body: str, session: str | None = None) -> tuple[int, dict[str, str]]:
        """(status, headers) of one POST /mcp (its body is read and dropped)."""
        extra = f"mcp-session-id: {session}\r\nmcp-protocol-version: 2025-06-18\r\n" if session else ""
        data = body.encode()
        self.sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: {self.host}\r\nAccept: application/json, text/event-stream"
                          f"\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(data)}\r\n\r\n"
                          .encode() + data)
        head = self._until(b"\r\n\r\n").decode()
        status = int(head.split(" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in head.split("\r\n")[1:])}
        if headers.get("transfer-encoding") == "chunked":
            self._until(b"\r\n0\r\n\r\n" if not self.buffer.startswith(b"0\r\n\r\n") else b"0\r\n\r\n")
        else:
            self._exactly(int(headers.get("content-length", "0")))
        return status, headers

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            self._fill()
        found, _, self.buffer = self.buffer.partition(marker)
        return found

    def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill()
        found, self.buffer = self.buffer[:size], self.buffer[size:]
        return found

    def _fill(self) -> None:
        data = self.sock.recv(65536)  # bounded by the socket's timeout
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buffer += data

    def close(self) -> None:
        self.sock.close()


def in_parallel(url: str, work: list[str | None], send: str) -> list[tuple[int, dict[str, str]]]:
    """POST `send` once per item of `work` (a session id, or None to open a new session), over 8 connections."""
    def run(part: list[str | None]) -> list[tuple[int, dict[str, str]]]:
        conn = Connection(url)
        try:
            return [conn.post(send, session) for session in part]
        finally:
            conn.close()

    parts = [work[n::8] for n in range(8)]
    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(run, parts))
    return [reply for part in done for reply in part]


def open_sessions(url: str, count: int) -> list[str]:
    """`count` sessions opened (initialize) and abandoned: never closed, never used again."""
    replies = in_parallel(url, [None] * count, INITIALIZE)
    assert all(status == 200 for status, _ in replies), {status for status, _ in replies}
    return [headers["mcp-session-id"] for _, headers in replies]


def statuses(url: str, ids: list[str]) -> list[int]:
    """The HTTP status of a ping in each session."""
    return [status for status, _ in in_parallel(url, list(ids), PING)]


def test_two_thousand_abandoned_http_sessions_are_released_after_the_idle_timeout(
    server: tuple[subprocess.Popen[str], str],
) -> None:
    _, url = server
    ids = open_sessions(url, SESSIONS)
    assert len(set(ids)) == SESSIONS
    # A session in use stays open however long the others sit idle.
    kept = ids[-1]
    for _ in range(int(IDLE_S * 2 / 0.5)):  # bounded: a fixed number of rounds
        assert statuses(url, [kept]) == [200]
        time.sleep(0.5)
    time.sleep(IDLE_S + 1)
    found = statuses(url, ids[:-1])
    assert found == [404] * (SESSIONS - 1), {code: found.count(code) for code in set(found)}
    assert len(open_sessions(url, 1)) == 1  # and a new client still gets in


def test_the_idle_timeout_comes_from_the_flag_then_the_environment_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(IDLE_TIMEOUT_ENV, raising=False)
    assert idle_timeout_s(None) == DEFAULT_SESSION_IDLE_S == 600
    monkeypatch.setenv(IDLE_TIMEOUT_ENV, "90")
    assert idle_timeout_s(None) == 90 and idle_timeout_s(5) == 5
    monkeypatch.setenv(IDLE_TIMEOUT_ENV, "soon")
    with pytest.raises(UserError, match=r"\$FSDP_SKILL_SESSION_IDLE_TIMEOUT must be a number of seconds"):
        idle_timeout_s(None)
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(UserError, match="--session-idle-timeout must be a positive number of seconds"):
            idle_timeout_s(bad)


def test_a_bad_idle_timeout_is_a_one_line_error_before_the_server_listens(tree: Path) -> None:
    result = subprocess.run([FSDP_SKILL, "serve", "--http", "--port", "0", "--session-idle-timeout", "0"],
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                            env={**os.environ, "FSDP_SKILL_ROOT": str(tree)})
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "--session-idle-timeout must be a positive number of seconds (e.g. 600), got 0" in result.stderr

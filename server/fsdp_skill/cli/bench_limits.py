"""`fsdp-skill bench limits`: what the server's input limits cost and save, against in-run baselines.

- get_api with a 1 MB symbol, over MCP (an in-memory `mcp.Client`, so the SDK's argument validation of
  the 1 MB string is counted), against a plain get_api('all_reduce') in the same process; target: the
  refusal under 100 ms. Beside it, the most a name within the cap still costs: closest-name matching
  of an unknown dotted name of MAX_NAME_CHARS characters.
- HTTP sessions: the server's RSS before and after opening N sessions left open (an idle timeout longer
  than the run); then, on a server with a short idle timeout, whether each of N abandoned sessions is
  released (404) after it, the RSS before and after, and what N more sessions add (released memory is
  reused, so it barely grows).

- Open files: under a 256 open-files limit, seconds until a new client is answered after 300 idle
  connections close, and after 300 concurrent clients (and how many of those got 200 or 503).
- A truncated index: seconds until `search` answers from the lexical fallback (target < 30 s), and the
  temporary folders a server stopped with SIGTERM during that build leaves (target: none).

Exit status 1 when a target is missed, the server did not recover, or a session was not released.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fsdp_skill.core.limits import MAX_NAME_CHARS

REFUSAL_TARGET_MS = 100.0
ROUNDS = 5
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
PING = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_get_api() -> bool:
    import anyio
    from mcp import Client

    from fsdp_skill.search.index import open_index
    from fsdp_skill.serve.server import build_server
    from fsdp_skill.serve.tools import closest_api_names

    index = open_index()
    server = build_server(index=index)
    huge = "x" * 1_000_000

    async def timed(call: Callable[[], Awaitable[Any]]) -> list[float]:
        samples = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            await call()
            samples.append(time.perf_counter() - started)
        return samples

    async def main() -> tuple[list[float], list[float], str]:
        async with Client(server) as client:
            await client.call_tool("get_api", {"symbol": "all_reduce"})  # warm
            baseline = await timed(lambda: client.call_tool("get_api", {"symbol": "all_reduce"}))
            refused = await timed(lambda: client.call_tool("get_api", {"symbol": huge}))
            reply = await client.call_tool("get_api", {"symbol": huge})
            return baseline, refused, str(getattr(reply.content[0], "text", ""))

    baseline, refused, text = anyio.run(main)
    base_ms, refused_ms = _median_ms(baseline), _median_ms(refused)
    print(f"get_api('all_reduce') over MCP: {base_ms:.1f} ms (median of {ROUNDS})")
    print(f"get_api(1 MB symbol) over MCP:  {refused_ms:.1f} ms, {refused_ms / base_ms:.2f}x the baseline; "
          f"target < {REFUSAL_TARGET_MS:.0f} ms: {'met' if refused_ms < REFUSAL_TARGET_MS else 'MISSED'}")
    print(f"  reply: {text[:160]}")
    # The most a name under the cap can cost: an unknown dotted name of MAX_NAME_CHARS characters is matched
    # against every qualified name (a 1 MB one took 441 s of CPU before the cap and the quick-ratio bounds).
    names = index.all_names()
    dotted = ("torch.distributed." + "ab_c" * MAX_NAME_CHARS)[:MAX_NAME_CHARS]
    samples = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        closest_api_names(dotted, names)
        samples.append(time.perf_counter() - started)
    print(f"  closest-name matching of an unknown {MAX_NAME_CHARS}-character dotted name (the cap): "
          f"{_median_ms(samples):.0f} ms")
    return refused_ms < REFUSAL_TARGET_MS


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class HttpConnection:
    """One keep-alive HTTP/1.1 connection to the server, blocking: thousands of requests cost the client
    little (an httpx request cost ~8 ms of client CPU, more than the server spends on it)."""

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


def post_many(url: str, work: list[str | None], send: str) -> list[tuple[int, dict[str, str]]]:
    """POST `send` once per item of `work` (a session id, or None to open a new session), over 8 connections;
    a request that fails outright counts as status 0."""
    def run(part: list[str | None]) -> list[tuple[int, dict[str, str]]]:
        conn = HttpConnection(url)
        replies = []
        try:
            for session in part:
                try:
                    replies.append(conn.post(send, session))
                except OSError:  # the connection broke: count it, go on with a new one
                    replies.append((0, {}))
                    conn.close()
                    conn = HttpConnection(url)
            return replies
        finally:
            conn.close()

    parts = [work[n::8] for n in range(8)]
    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(run, parts))
    return [reply for part in done for reply in part]


class _Server:
    """`fsdp-skill serve --http --port 0 --session-idle-timeout IDLE_S` in a subprocess; with `open_files`,
    under that open-files limit (soft and hard, so the server cannot raise it)."""

    def __init__(self, idle_s: float, open_files: int | None = None) -> None:
        command = [sys.executable, "-m", "fsdp_skill", "serve", "--http", "--port", "0",
                   "--session-idle-timeout", str(idle_s)]

        def limit() -> None:
            if open_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=limit)
        assert self.proc.stderr
        found = re.search(r"http://\S+/mcp", self.proc.stderr.readline())
        # Drained from here on: a full pipe would block the server.
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()
        if found is None:
            self.stop()
            raise RuntimeError("the server did not start")
        self.url = found.group(0)
        post_many(self.url, [None] * 10, INITIALIZE)  # warm: the first sessions pay for imports

    def rss_kb(self) -> int:
        return _rss_kb(self.proc.pid)

    def open(self, count: int) -> list[str]:
        return [headers["mcp-session-id"] for status, headers in post_many(self.url, [None] * count, INITIALIZE)
                if status == 200]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def bench_sessions(count: int, idle_s: float) -> bool:
    # Memory per live session: a server whose sessions do not expire while they are being opened.
    server = _Server(idle_s=3600)
    try:
        before = server.rss_kb()
        started = time.perf_counter()
        opened = server.open(count)
        held = server.rss_kb()
    finally:
        server.stop()
    print(f"HTTP sessions: {len(opened)} opened and left open in {time.perf_counter() - started:.1f} s: server RSS "
          f"{before / 1024:.1f} -> {held / 1024:.1f} MB, {(held - before) / max(1, len(opened)):.1f} KB per session")
    # Release: a server with the short idle timeout; every abandoned session must answer 404 afterwards.
    server = _Server(idle_s=idle_s)
    try:
        before = server.rss_kb()
        ids = server.open(count)
        time.sleep(idle_s + 2)
        released = sum(status == 404 for status, _ in post_many(server.url, list(ids), PING))
        after = server.rss_kb()
        server.open(count)
        reopened = server.rss_kb()
    finally:
        server.stop()
    print(f"  with --session-idle-timeout {idle_s:g}: {released} of {len(ids)} abandoned sessions released (404); "
          f"RSS {before / 1024:.1f} MB before, {after / 1024:.1f} MB after (the process keeps freed memory for reuse: "
          f"{count} more sessions then add {(reopened - after) / count:+.1f} KB each)")
    return released == len(ids) == count == len(opened)


def first_answer_s(url: str, within_s: float) -> float | None:
    """Seconds until a new client's initialize is answered 200, trying every 0.2 s; None past `within_s`."""
    started = time.perf_counter()
    while time.perf_counter() - started < within_s:
        try:
            conn = HttpConnection(url)
            try:
                conn.sock.settimeout(max(0.5, within_s - (time.perf_counter() - started)))
                if conn.post(INITIALIZE)[0] == 200:
                    return time.perf_counter() - started
            finally:
                conn.close()
        except OSError:
            pass
        time.sleep(0.2)
    return None


def _address(url: str) -> tuple[str, int]:
    host, port = re.match(r"http://([^:/]+):(\d+)", url).groups()  # type: ignore[union-attr]
    return host, int(port)


def idle_connections(url: str, count: int, hold_s: float = 1.0) -> int:
    """Open `count` TCP connections that send nothing, hold them `hold_s` seconds, close them; how many opened."""
    socks = []
    try:
        for _ in range(count):
            try:
                socks.append(socket.create_connection(_address(url), timeout=5))
            except OSError:
                break
        time.sleep(hold_s)
        return len(socks)
    finally:
        for sock in socks:
            sock.close()


def concurrent_clients(url: str, count: int, within_s: float = 60.0) -> dict[int, int]:
    """`count` clients each send initialize on their own connection at once, then read the answer; how many got
    each status (0: no answer, a refused or broken connection)."""
    conns: list[HttpConnection | None] = []
    for _ in range(count):
        try:
            conns.append(HttpConnection(url))
        except OSError:
            conns.append(None)
    data = INITIALIZE.encode()
    request = (f"POST /mcp HTTP/1.1\r\nHost: {':'.join(map(str, _address(url)))}\r\nAccept: application/json, "
               f"text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
               ).encode() + data
    counts: dict[int, int] = {}
    deadline = time.perf_counter() + within_s
    try:
        for conn in conns:
            try:
                if conn is not None:
                    conn.sock.sendall(request)
            except OSError:
                pass
        for conn in conns:
            status = 0
            if conn is not None:
                try:
                    conn.sock.settimeout(max(0.1, deadline - time.perf_counter()))
                    status = int(conn._until(b"\r\n\r\n").decode().split(" ", 2)[1])
                except (OSError, ValueError, IndexError):
                    pass
            counts[status] = counts.get(status, 0) + 1
    finally:
        for conn in conns:
            if conn is not None:
                conn.close()
    return counts


def bench_open_files(open_files: int, count: int) -> bool:
    """Under an `open_files` limit: a new client is answered within seconds after `count` idle connections
    close, and after `count` concurrent clients."""
    server = _Server(idle_s=60, open_files=open_files)
    try:
        opened = idle_connections(server.url, count)
        idle_s = first_answer_s(server.url, 30)
        clients = concurrent_clients(server.url, count)
        clients_s = first_answer_s(server.url, 30)
        alive = server.proc.poll() is None
    finally:
        server.stop()

    def shown(seconds: float | None) -> str:
        return f"answers again in {seconds:.2f} s" if seconds is not None else "NO answer within 30 s"

    print(f"HTTP under a {open_files} open-files limit: {opened} idle connections opened and closed: {shown(idle_s)}")
    print(f"  {count} concurrent clients: " + ", ".join(f"{n} got {status or 'no answer'}"
                                                      for status, n in sorted(clients.items()))
          + f"; then {shown(clients_s)}; server {'still running' if alive else 'EXITED'}")
    return alive and idle_s is not None and clients_s is not None


def bench_truncated_index(within_s: float = 30.0) -> bool:
    """A copy of the skill's data with its index cut to a third: seconds until `search` answers (target: within
    `within_s`), and whether a server stopped with SIGTERM while it builds its fallback leaves its temp folder."""
    import os
    import shutil
    import tempfile

    from fsdp_skill.core.paths import repo_root

    root = repo_root()
    with tempfile.TemporaryDirectory(prefix="fsdp-skill-bench-") as scratch:
        tree, temp = Path(scratch) / "tree", Path(scratch) / "tmp"
        temp.mkdir()
        shutil.copytree(root / "references", tree / "references")
        shutil.copy(root / "SKILL.md", tree / "SKILL.md")
        if (root / "assets").is_dir():
            shutil.copytree(root / "assets", tree / "assets")
        index = tree / "references" / "index.sqlite"
        index.write_bytes(index.read_bytes()[: index.stat().st_size // 3])
        env = {**os.environ, "FSDP_SKILL_ROOT": str(tree), "TMPDIR": str(temp)}
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "fsdp_skill", "search", "all_reduce", "--json"], env=env,
                                capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
        search_s = time.perf_counter() - started
        answered = result.returncode == 0 and "all_reduce" in result.stdout
        proc = subprocess.Popen([sys.executable, "-m", "fsdp_skill", "serve"], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            deadline = time.monotonic() + 60
            while not list(temp.glob("fsdp-skill-index-*")) and time.monotonic() < deadline:
                time.sleep(0.01)
            proc.terminate()
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        left = [entry.name for entry in temp.iterdir()]
    met = answered and search_s < within_s
    print(f"truncated index: `search all_reduce` {'answered' if answered else 'FAILED'} in {search_s:.1f} s "
          f"(target < {within_s:.0f} s: {'met' if met else 'MISSED'}); SIGTERM during the fallback build leaves "
          f"{len(left)} temporary folder(s)")
    return met and not left


def cli_bench_limits(args: argparse.Namespace) -> int:
    ok = bench_get_api()
    ok = bench_truncated_index() and ok
    if not args.skip_sessions:
        ok = bench_open_files(256, 300) and ok
    if not args.skip_sessions:
        ok = bench_sessions(args.sessions, args.idle) and ok
    return 0 if ok else 1

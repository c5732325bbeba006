"""`fsdp-skill serve` over raw stdio lines, so a test can send what no SDK client would encode.

A thread reads the server's stdout into a queue, so every wait is a bounded `get` (a selector on a
buffered pipe misses lines already read into the buffer), and `close` always ends the process.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

FSDP_SKILL = str(Path(sys.executable).with_name("fsdp-skill"))

INITIALIZE = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def stop(proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if the process has not gone within the timeout; always reaped."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)


class StdioSession:
    def __init__(self, root: Path, *args: str, initialize: bool = True, command: list[str] | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(command or [FSDP_SKILL, "serve", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, "FSDP_SKILL_ROOT": str(root), **(env or {})})
        self.lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if initialize:
            self.send(json.dumps(INITIALIZE))
            assert (self.reply() or {}).get("id") == "init", "no reply to initialize"
            self.send(json.dumps(INITIALIZED))

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: str | bytes) -> None:
        assert self.proc.stdin
        self.proc.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout_s: float = 30.0) -> dict[str, Any] | None:
        """The next message the server writes, or None when none comes within the timeout."""
        try:
            return json.loads(self.lines.get(timeout=timeout_s))
        except queue.Empty:
            return None

    def call(self, request_id: int | str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return its reply (other messages that come first are dropped)."""
        self.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                              **({"params": params} if params is not None else {})}))
        while (reply := self.reply()) is not None:
            if reply.get("id") == request_id:
                return reply
        raise AssertionError(f"no reply to {method} {request_id!r}")

    def close(self) -> str:
        """Close stdin, wait for the server to exit (killing it if it does not), and return its stderr."""
        assert self.proc.stdin and self.proc.stderr
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            stop(self.proc)
        self._reader.join(timeout=10)
        stderr = self.proc.stderr.read().decode(errors="replace")
        self.proc.stderr.close()
        if self.proc.stdout:
            self.proc.stdout.close()
        return stderr

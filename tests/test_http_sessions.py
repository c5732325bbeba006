"""Streamable HTTP sessions have an idle timeout: abandoned sessions are released, new clients still get in."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fsdp_skill.cli.bench_limits import INITIALIZE, PING, post_many
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.limits import DEFAULT_SESSION_IDLE_S
from fsdp_skill.serve.http import IDLE_TIMEOUT_ENV, idle_timeout_s
from search_fixture import make_tree
from stdio_session import stop

FSDP_SKILL = str(Path(sys.executable).with_name("fsdp-skill"))
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
        stop(proc)
        if proc.stderr:
            proc.stderr.close()


def open_sessions(url: str, count: int) -> list[str]:
    """`count` sessions opened (initialize) and abandoned: never closed, never used again."""
    replies = post_many(url, [None] * count, INITIALIZE)
    assert all(status == 200 for status, _ in replies), {status for status, _ in replies}
    return [headers["mcp-session-id"] for _, headers in replies]


def statuses(url: str, ids: list[str]) -> list[int]:
    """The HTTP status of a ping in each session."""
    return [status for status, _ in post_many(url, list(ids), PING)]


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

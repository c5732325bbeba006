"""The real `fsdp-skill serve` process: one stdio session and one streamable-HTTP session on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from search_fixture import make_tree

FSDP_SKILL = str(Path(sys.executable).with_name("fsdp-skill"))


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, deadline_s: float = 60.0) -> None:
    """Until the server accepts a connection; fails if it exits or the deadline passes."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)  # bounded by the deadline above
    pytest.fail(f"server did not listen on {port} within {deadline_s} s")


@pytest.fixture
def http_server(tree: Path) -> Iterator[tuple[int, subprocess.Popen]]:
    port = free_port()
    proc = subprocess.Popen([FSDP_SKILL, "serve", "--http", "--port", str(port)],
                            env={**os.environ, "FSDP_SKILL_ROOT": str(tree)},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_port(port, proc)
        yield port, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stderr:
            proc.stderr.close()


async def a_session(client: Client) -> None:
    tools = {t.name for t in (await client.list_tools()).tools}
    assert {"search_docs", "get_api", "read_reference"} <= tools
    result = await client.call_tool("search_docs", {"query": "MixedPrecisionPolicy", "limit": 2})
    assert (
        not result.is_error
        and result.structured_content["results"][0]["id"] == "torch.distributed.fsdp.MixedPrecisionPolicy"
    )
    error = await client.call_tool("read_reference", {"name": "../../etc/passwd"})
    assert error.is_error and "not a reference name" in error.content[0].text
    entry = await client.call_tool("get_api", {"symbol": "dist.all_reduce"})
    assert entry.structured_content["qualified_name"] == "torch.distributed.all_reduce"


def test_stdio_session_with_the_fsdp_skill_serve_command(tree: Path) -> None:
    params = StdioServerParameters(command=FSDP_SKILL, args=["serve"], env={**os.environ, "FSDP_SKILL_ROOT": str(tree)})

    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(params) as client:
                await a_session(client)
    anyio.run(main)


def test_streamable_http_session_on_loopback(http_server: tuple[int, subprocess.Popen]) -> None:
    port, _ = http_server

    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                await a_session(client)
            # A second, concurrent pair of sessions on the same server.
            async with Client(f"http://127.0.0.1:{port}/mcp") as one, Client(f"http://127.0.0.1:{port}/mcp") as two:
                async with anyio.create_task_group() as group:
                    group.start_soon(a_session, one)
                    group.start_soon(a_session, two)
    anyio.run(main)


def test_serve_http_on_a_busy_port_is_a_one_line_error(tree: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        result = subprocess.run([FSDP_SKILL, "serve", "--http", "--port", str(port)], capture_output=True, text=True,
                                env={**os.environ, "FSDP_SKILL_ROOT": str(tree)}, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and f"cannot listen on 127.0.0.1:{port}" in result.stderr


def test_serve_without_catalog_or_index_is_a_one_line_error(tmp_path: Path) -> None:
    result = subprocess.run([FSDP_SKILL, "serve"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                            env={**os.environ, "FSDP_SKILL_ROOT": str(tmp_path)}, timeout=60)
    assert result.returncode == 2 and "regenerate" in result.stderr and "Traceback" not in result.stderr

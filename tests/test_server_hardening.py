"""What a hostile user threw at the server: huge arguments, unknown prompts and resources, compact replies."""

from __future__ import annotations

import json
import logging
import os
import re
import selectors
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from fsdp_skill.serve.server import build_server
from search_fixture import make_tree

HUGE = "x" * 100_000
REPLY_LIMIT = 4_000

# Every string argument of every tool, 100 KB long (verify_example needs --allow-run).
HUGE_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search_docs", {"query": HUGE}),
    ("search_docs", {"query": "fsdp", "kind": HUGE}),
    ("get_api", {"symbol": HUGE}),
    ("get_api", {"symbol": "torch." + HUGE}),
    ("read_reference", {"name": HUGE}),
    ("read_reference", {"name": HUGE + "/x"}),
    ("read_reference", {"name": "fsdp2.md", "section": HUGE}),
    ("list_references", {"unexpected": HUGE}),
    ("list_references", {HUGE: 1}),
    ("list_examples", {"symbol": HUGE}),
    ("list_examples", {"status": HUGE}),
    ("get_example", {"name": HUGE}),
    ("list_patterns", {"unexpected": HUGE}),
    ("get_pattern", {"name": HUGE}),
    ("api_history", {"symbol": HUGE}),
    ("what_changed", {"from_version": HUGE}),
    ("what_changed", {"from_version": "2.8", "to_version": HUGE}),
    ("verify_example", {"name": HUGE}),
    ("verify_example", {"name": "torch.distributed.all_reduce#1", "backend": HUGE}),
    (HUGE, {}),
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    return root


def with_client(root: Path, body: Callable[[Client], Awaitable[Any]], allow_run: bool = False) -> Any:
    async def main() -> Any:
        with anyio.fail_after(60):
            async with Client(build_server(root, allow_run=allow_run)) as client:
                return await body(client)
    return anyio.run(main)


def reply_size(result: Any) -> int:
    text = sum(len(block.text) for block in result.content if hasattr(block, "text"))
    return text + len(json.dumps(result.structured_content or {}))


@pytest.mark.parametrize(("tool", "arguments"), HUGE_CALLS, ids=[f"{t[:20]}-{'-'.join(a)}" for t, a in HUGE_CALLS])
def test_a_100_kb_argument_to_any_tool_gets_a_reply_under_4000_characters(
    tree: Path, tool: str, arguments: dict[str, Any]
) -> None:
    async def body(client: Client) -> None:
        result = await client.call_tool(tool, arguments)
        assert reply_size(result) < REPLY_LIMIT, (tool, reply_size(result), result.content[0].text[:300])
        assert "Traceback" not in result.content[0].text
    with_client(tree, body, allow_run=True)


def test_an_unknown_prompt_is_an_invalid_params_error_naming_the_prompts_and_logs_no_traceback(
    tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body(client: Client) -> None:
        with pytest.raises(MCPError) as raised:
            await client.get_prompt("nope" + HUGE, {})
        error = raised.value.error
        assert error.code == -32602 and "unknown prompt" in error.message and len(error.message) < 1000
        assert "debug-distributed-hang, migrate-fsdp1-to-fsdp2" in error.message
        # The session goes on.
        assert (await client.get_prompt("debug-distributed-hang", {})).messages
    with caplog.at_level(logging.DEBUG):
        with_client(tree, body)
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]


def test_an_unknown_prompt_argument_is_an_invalid_params_error_naming_the_arguments_it_takes(
    tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body(client: Client) -> None:
        with pytest.raises(MCPError) as raised:
            await client.get_prompt("migrate-fsdp1-to-fsdp2", {"bogus" + HUGE: "1"})
        error = raised.value.error
        assert error.code == -32602 and len(error.message) < 1000, error.message
        assert "unknown argument" in error.message and "takes: code" in error.message
        with pytest.raises(MCPError) as raised:
            await client.get_prompt("debug-distributed-hang", {"symptom": "x", "backend": "gloo", "extra": "1"})
        assert "'extra'" in raised.value.error.message and "symptom, backend" in raised.value.error.message
    with caplog.at_level(logging.DEBUG):
        with_client(tree, body)
    assert not [r for r in caplog.records if r.exc_info]


def test_prompt_arguments_have_descriptions(tree: Path) -> None:
    async def body(client: Client) -> None:
        for prompt in (await client.list_prompts()).prompts:
            assert prompt.arguments, prompt.name
            for argument in prompt.arguments:
                assert argument.description and len(argument.description) > 20, (prompt.name, argument.name)
    with_client(tree, body)


def test_an_unknown_resource_is_a_short_error_listing_the_resources(tree: Path) -> None:
    async def body(client: Client) -> None:
        with pytest.raises(MCPError) as raised:
            await client.read_resource("fsdp-skill://references/" + HUGE)
        error = raised.value.error
        assert error.code == -32602 and "fsdp-skill://references/fsdp2.md" in error.message
        assert len(error.message) + len(json.dumps(error.data)) < REPLY_LIMIT, len(error.message)
    with_client(tree, body)


def test_an_argument_a_tool_does_not_take_is_an_error_naming_the_ones_it_does(tree: Path) -> None:
    async def body(client: Client) -> None:
        result = await client.call_tool("list_examples", {"sybmol": "all_reduce"})
        assert result.is_error
        assert result.content[0].text == ("unknown argument 'sybmol' for list_examples; "
                                          "it takes: symbol, status, start_index, limit")
        result = await client.call_tool("list_patterns", {"x": 1})
        assert result.is_error and "it takes: no arguments" in result.content[0].text
    with_client(tree, body)


def test_tool_text_content_is_compact_json_equal_to_the_structured_content(tree: Path) -> None:
    async def body(client: Client) -> None:
        result = await client.call_tool("get_api", {"symbol": "all_reduce"})
        text = result.content[0].text
        assert json.loads(text) == result.structured_content
        assert text == json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False)
    with_client(tree, body)


FSDP_SKILL = str(Path(sys.executable).with_name("fsdp-skill"))


# ---------------------------------------------------------------- small ones, on the repository's own catalog

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("spelling", ["fsdp2-training", "fsdp2_training", "fsdp2_training.py",
                                      "assets/patterns/fsdp2_training.py", " FSDP2-Training "])
def test_get_pattern_accepts_the_name_the_file_name_and_its_stem(spelling: str) -> None:
    async def body(client: Client) -> None:
        result = await client.call_tool("get_pattern", {"name": spelling})
        assert not result.is_error, result.content[0].text
        assert result.structured_content["name"] == "fsdp2-training"
    with_client(REPO, body)


def test_an_unknown_pattern_lists_the_valid_names_sorted() -> None:
    async def body(client: Client) -> None:
        result = await client.call_tool("get_pattern", {"name": "nope"})
        listing = result.content[0].text.split("pass one of: ", 1)[1].split(" (")[0].split(", ")
        assert listing == sorted(listing) and "fsdp2-training" in listing and "mixed-precision" in listing
    with_client(REPO, body)


def test_status_reasons_are_cut_at_a_word_and_marked_never_mid_word() -> None:
    from fsdp_skill.serve.results import VerificationStatus
    from fsdp_skill.serve.verification import summarize

    reason = "fragment: uses MyModule, defined neither by the example nor in the globals of torch.distributed"
    line = summarize([VerificationStatus(backend="gloo", world_size=1, status="skipped", reason=reason)])
    shown = line.split("1 rank: ", 1)[1].removesuffix(")")
    assert shown.endswith("…") and reason.startswith(shown.removesuffix("…")) and reason[len(shown) - 1] == " "

    async def body(client: Client) -> None:
        entry = await client.call_tool("get_api", {"symbol": "dcp.save"})
        for example in entry.structured_content["examples"]:
            assert "of to)" not in example["status"], example["status"]
    with_client(REPO, body)


def test_get_example_folds_comment_lines_into_the_step_they_introduce() -> None:
    async def body(client: Client) -> None:
        detail = (await client.call_tool("get_example", {"name": "torch.distributed.fsdp.FullyShardedDataParallel#1"}))
        steps = detail.structured_content["steps"]
        assert steps and not [s for s in steps if all(ln.lstrip().startswith("#") or not ln.strip()
                                                       for ln in s["source"].splitlines())]
        assert "".join(s["source"] for s in steps).count("# Configure a custom `min_num_params`") == 1
    with_client(REPO, body)


def test_a_passed_example_is_never_described_as_needing_what_it_passed_without() -> None:
    async def body(client: Client) -> None:
        listing = (await client.call_tool("list_examples", {"status": "passed", "limit": 200})).structured_content
        cuda = [e for e in listing["examples"] if "cuda" in e["line"]]
        assert cuda, "expected passed examples written for CUDA"
        for example in listing["examples"]:
            assert "needs" not in example["line"], example
        assert any("written for cuda" in e["line"] and "passed on gloo" in e["line"] for e in cuda), cuda[:2]
    with_client(REPO, body)


# ---------------------------------------------------------------- HTTP: --port 0, clients that hang up


class HttpServer:
    """`fsdp-skill serve --http --port 0`: the port is read from the line the server prints."""

    def __init__(self, root: Path) -> None:
        # Unbuffered (bufsize=0): a raw pipe reads a line byte by byte, so nothing waits in a buffer the
        # selector cannot see when the notice and the address line come together.
        self.proc = subprocess.Popen([FSDP_SKILL, "serve", "--http", "--port", "0"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, bufsize=0,
                                     env={**os.environ, "FSDP_SKILL_ROOT": str(root)})
        assert self.proc.stderr
        banner = re.compile(r"fsdp-skill serve: streamable HTTP on http://127\.0\.0\.1:(\d+)/mcp\n")
        match = None
        # The address line may come after the one-time lexical-mode notice (this tree's index has no vectors).
        for _ in range(3):
            with selectors.DefaultSelector() as selector:
                selector.register(self.proc.stderr, selectors.EVENT_READ)
                assert selector.select(60), "the server printed nothing within 60 s"
            self.banner = self.proc.stderr.readline().decode()
            match = banner.fullmatch(self.banner)
            if match or not self.banner.startswith("fsdp-skill serve: search mode"):
                break
        assert match, self.banner
        self.port = int(match.group(1))

    def post(self, body: bytes, headers: dict[str, str], content_length: int | None = None,
             read: bool = True) -> bytes:
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as conn:
            lines = "".join(f"{k}: {v}\r\n" for k, v in {"Host": f"127.0.0.1:{self.port}", **headers}.items())
            length = len(body) if content_length is None else content_length
            conn.sendall(f"POST /mcp HTTP/1.1\r\n{lines}Content-Length: {length}\r\n\r\n".encode() + body)
            reply = b""
            while read and not reply.endswith(b"\r\n0\r\n\r\n"):  # the last chunk; each recv bounded by the timeout
                data = conn.recv(65536)
                if not data:
                    break
                reply += data
            return reply

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        assert self.proc.stderr
        log = self.proc.stderr.read().decode()
        self.proc.stderr.close()
        return log


JSON_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_serve_http_port_0_listens_on_a_free_port_and_prints_it(tree: Path) -> None:
    server = HttpServer(tree)
    try:
        async def main() -> None:
            with anyio.fail_after(60):
                async with Client(f"http://127.0.0.1:{server.port}/mcp") as client:
                    result = await client.call_tool("get_api", {"symbol": "all_reduce"})
                    assert result.structured_content["qualified_name"] == "torch.distributed.all_reduce"
        anyio.run(main)
    finally:
        server.stop()


def test_a_client_that_hangs_up_mid_request_leaves_no_traceback_in_the_server_log(tree: Path) -> None:
    server = HttpServer(tree)
    try:
        init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        reply = server.post(init.encode(), JSON_HEADERS)
        session = re.search(rb"mcp-session-id: (\S+)", reply, re.IGNORECASE)
        assert session, reply[:300]
        headers = {**JSON_HEADERS, "mcp-session-id": session.group(1).decode(), "mcp-protocol-version": "2025-06-18"}
        for _ in range(3):  # the body never arrives in full: the client went away
            server.post(b'{"jsonrpc":', headers, content_length=1000, read=False)
        # The server is still fine.
        call = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                           "params": {"name": "get_api", "arguments": {"symbol": "all_reduce"}}})
        assert b"torch.distributed.all_reduce" in server.post(call.encode(), headers)
    finally:
        log = server.stop()
    assert "Traceback" not in log and "ClientDisconnect" not in log, log[-3000:]

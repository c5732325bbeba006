"""What a hostile user threw at the server: huge arguments, unknown prompts and resources, compact replies."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from fsdp_skill.serve.server import build_server
from mcp import Client
from mcp.shared.exceptions import MCPError
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
    ("list_examples", {"symbol": HUGE}),
    ("list_examples", {"status": HUGE}),
    ("get_example", {"name": HUGE}),
    ("list_patterns", {"unexpected": HUGE}),
    ("get_pattern", {"name": HUGE}),
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


def test_tool_text_content_is_compact_json_equal_to_the_structured_content(tree: Path) -> None:
    async def body(client: Client) -> None:
        result = await client.call_tool("get_api", {"symbol": "all_reduce"})
        text = result.content[0].text
        assert json.loads(text) == result.structured_content
        assert text == json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False)
    with_client(tree, body)

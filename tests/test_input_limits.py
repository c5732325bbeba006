"""Arguments refused before any work: names over the length cap (never matched), and arguments of the
wrong type (a short line naming the argument and the type, not pydantic's text)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from fsdp_skill.cli.main import main
from fsdp_skill.core.limits import MAX_NAME_CHARS
from fsdp_skill.search.index import DocsIndex
from fsdp_skill.serve import tools
from fsdp_skill.serve.server import build_server
from search_fixture import make_tree

ONE_MB = "x" * 1_000_000


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    return root


def with_client(root: Path, body: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        with anyio.fail_after(60):
            async with Client(build_server(root, allow_run=True)) as client:
                return await body(client)
    return anyio.run(main)


@pytest.fixture
def no_matching(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any name matching or lookup fails the test: a refused name must not reach it."""
    def matched(*args: object, **kwargs: object) -> None:
        raise AssertionError("name matching ran on an over-long name")
    monkeypatch.setattr(tools, "closest_api_names", matched)
    monkeypatch.setattr(tools, "_closest", matched)
    for method in ("resolve_name", "payload", "payloads", "anchors", "ids"):
        monkeypatch.setattr(DocsIndex, method, matched)


NAME_CALLS = [
    ("get_api", {"symbol": ONE_MB}, "symbol"),
    ("get_api", {"symbol": "torch." + ONE_MB}, "symbol"),
    ("list_api", {"module": ONE_MB}, "module"),
    ("read_reference", {"name": ONE_MB}, "name"),
    ("read_reference", {"name": "fsdp2.md", "section": ONE_MB}, "section"),
    ("list_examples", {"symbol": ONE_MB}, "symbol"),
    ("get_example", {"name": ONE_MB}, "name"),
    ("get_pattern", {"name": ONE_MB}, "name"),
    ("verify_example", {"name": ONE_MB}, "name"),
]


@pytest.mark.parametrize(("tool", "arguments", "argument"), NAME_CALLS, ids=[f"{t}-{a}" for t, _, a in NAME_CALLS])
def test_a_1_mb_name_is_refused_naming_the_argument_and_the_limit_before_any_matching(
    tree: Path, no_matching: None, tool: str, arguments: dict[str, Any], argument: str
) -> None:
    async def body(client: Client) -> None:
        result = await client.call_tool(tool, arguments)
        text = result.content[0].text
        assert result.is_error and f"{argument} is {len(arguments[argument]):,} characters long" in text, text[:300]
        assert f"the limit is {MAX_NAME_CHARS}" in text and len(text) < 400
    with_client(tree, body)


def test_a_name_at_the_limit_is_still_looked_up(tree: Path) -> None:
    async def body(client: Client) -> None:
        result = await client.call_tool("get_api", {"symbol": "x" * MAX_NAME_CHARS})
        assert result.is_error and "no API entry named" in result.content[0].text
    with_client(tree, body)


def test_fsdp_skill_show_refuses_an_over_long_symbol_in_one_line_before_any_matching(
    tree: Path, no_matching: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tree))
    # 100 KB: one argv string may not be longer than 128 KB on Linux, so a 1 MB symbol cannot reach the CLI.
    assert main(["show", "x" * 100_000]) == 2
    err = capsys.readouterr().err
    assert "symbol is 100,000 characters long; the limit is 500" in err and err.count("\n") == 1, err[:300]


WRONG_TYPES = [
    ("search_docs", {"query": 5}, "search_docs: query must be a string, got the number 5"),
    ("search_docs", {"query": "x", "limit": "five"}, "search_docs: limit must be an integer, got the string 'five'"),
    ("search_docs", {"query": "x", "limit": 2.5}, "search_docs: limit must be an integer, got the number 2.5"),
    ("search_docs", {"query": "x", "kind": "bogus"},
     "search_docs: kind must be one of 'section', 'api', 'example', 'pattern', 'skill', 'release' (or null, or leave "
     "it out), got the string 'bogus'"),
    ("get_api", {"symbol": ["all_reduce"]}, "get_api: symbol must be a string, got a list of 1 item"),
    ("get_api", {}, "get_api: symbol is required: pass a string"),
    ("read_reference", {"name": None}, "read_reference: name must be a string, got null"),
    ("read_reference", {"name": "fsdp2.md", "max_chars": {"n": 1}, "start_index": "x" * 500},
     "read_reference: start_index must be an integer, got the string 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…' "
     "(500 characters); max_chars must be an integer, got an object"),
    ("verify_example", {"name": "x", "backend": "mpi"},
     "verify_example: backend must be one of 'gloo', 'nccl', got the string 'mpi'"),
    ("verify_example", {"name": "x", "world_size": True, "timeout": "soon"},
     "verify_example: timeout must be a number, got the string 'soon'"),
]


@pytest.mark.parametrize(("tool", "arguments", "message"), WRONG_TYPES, ids=[f"{t}-{'-'.join(a)}" for t, a, _ in
                                                                           WRONG_TYPES])
def test_an_argument_of_the_wrong_type_is_a_short_error_naming_it_and_the_type_it_must_be(
    tree: Path, tool: str, arguments: dict[str, Any], message: str
) -> None:
    async def body(client: Client) -> None:
        result = await client.call_tool(tool, arguments)
        assert result.is_error and result.content[0].text == message
        assert "pydantic" not in result.content[0].text and "validation error" not in result.content[0].text
    with_client(tree, body)

"""`fsdp-skill serve --log-queries FILE`: one JSON line per tool call, off by default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from fsdp_skill.serve.query_log import MAX_ARGUMENT_CHARS, QueryLogError, result_ids
from fsdp_skill.serve.server import build_server
from search_fixture import make_tree


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    return root


def calls(root: Path, log: Path | None, *requests: tuple[str, dict[str, Any]]) -> list[Any]:
    async def main() -> list[Any]:
        with anyio.fail_after(60):
            async with Client(build_server(root, log_queries=log)) as client:
                return [await client.call_tool(tool, arguments) for tool, arguments in requests]

    return anyio.run(main)


def lines(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def test_each_tool_call_is_one_json_line_with_tool_arguments_latency_and_result_ids(tree: Path, tmp_path: Path) -> None:
    log = tmp_path / "queries.jsonl"
    search, api = calls(
        tree, log, ("search_docs", {"query": "mixed precision", "limit": 3}), ("get_api", {"symbol": "all_reduce"})
    )
    first, second = lines(log)
    assert first["tool"] == "search_docs" and first["arguments"] == {"query": "mixed precision", "limit": 3}
    assert first["result_ids"] == [r["id"] for r in search.structured_content["results"]] and first["result_ids"]
    assert first["is_error"] is False and first["latency_ms"] >= 0
    assert second["tool"] == "get_api" and second["result_ids"][0] == api.structured_content["qualified_name"]


def test_a_failed_call_is_logged_as_an_error_with_no_results(tree: Path, tmp_path: Path) -> None:
    log = tmp_path / "queries.jsonl"
    (result,) = calls(tree, log, ("search_docs", {"query": "   "}))
    assert result.is_error
    assert lines(log) == [
        {"tool": "search_docs", "arguments": {"query": "   "}, "latency_ms": lines(log)[0]["latency_ms"],
         "is_error": True, "result_ids": []}
    ]


def test_calls_append_to_an_existing_log_and_long_arguments_are_cut(tree: Path, tmp_path: Path) -> None:
    log = tmp_path / "queries.jsonl"
    log.write_text('{"earlier": true}\n', encoding="utf-8")
    calls(tree, log, ("search_docs", {"query": "fully_shard " * 200}))
    earlier, logged = lines(log)
    assert earlier == {"earlier": True}
    assert len(logged["arguments"]["query"]) < MAX_ARGUMENT_CHARS + 40 and "characters)" in logged["arguments"]["query"]


def test_without_the_option_nothing_is_logged(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    calls(tree, None, ("search_docs", {"query": "mixed precision"}))
    assert list(tmp_path.iterdir()) == []


def test_a_log_path_that_cannot_be_written_is_refused_at_start_saying_so(tree: Path, tmp_path: Path) -> None:
    with pytest.raises(QueryLogError, match="cannot append to the query log .*--log-queries"):
        build_server(tree, log_queries=tmp_path / "missing-folder" / "queries.jsonl")


def test_result_ids_come_from_the_result_and_its_listed_items() -> None:
    assert result_ids({"qualified_name": "torch.distributed.all_reduce"}) == ["torch.distributed.all_reduce"]
    assert result_ids({"results": [{"id": "a"}, {"id": "b"}], "query": "q"}) == ["a", "b"]
    assert result_ids({"patterns": [{"name": "dcp-checkpoint"}]}) == ["dcp-checkpoint"]
    assert result_ids(None) == []


def test_an_unknown_tools_name_and_argument_keys_are_cut_in_the_log(tree: Path, tmp_path: Path) -> None:
    log = tmp_path / "queries.jsonl"
    calls(tree, log, ("x" * 100_000, {"k" * 100_000: "v"}))
    [logged] = lines(log)
    assert logged["is_error"] and len(logged["tool"]) < MAX_ARGUMENT_CHARS + 40
    assert all(len(key) < MAX_ARGUMENT_CHARS + 40 for key in logged["arguments"])

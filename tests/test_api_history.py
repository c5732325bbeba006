"""The API timeline: built from per-release facts (build.api_history), asked by name and by release range
(core.api_history), through the CLI and the MCP tools. Small synthetic releases make each rule visible;
the committed timeline answers the issue's three examples."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from fsdp_skill.build.api_history import build_history, render_versions
from fsdp_skill.cli.main import main
from fsdp_skill.core.api_history import (
    HISTORY_FILE,
    dump_history,
    load_history,
    normalize_release,
    since_line,
    what_changed,
)
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.limits import MAX_NAME_CHARS
from fsdp_skill.serve.server import build_server
from search_fixture import make_tree

F = "function"


def fn(origin: str, *params: tuple[str, str, str | None], dep: list[Any] | None = None) -> dict[str, Any]:
    fact: dict[str, Any] = {"kind": F, "origin": origin, "params": [list(p) for p in params], "doc": ""}
    if dep:
        fact["deprecated"] = dep
    return fact


C10D = "torch.distributed.distributed_c10d"
OLD_FSDP = "torch.distributed._composable.fsdp.fully_shard"
RELEASES: dict[str, dict[str, Any]] = {
    "2.4.1": {
        "torch.distributed.all_gather_into_tensor": fn(f"{C10D}:all_gather_into_tensor", ("out", "", None)),
        "torch.distributed._composable.fsdp.fully_shard": fn(f"{OLD_FSDP}:fully_shard", ("module", "", None),
                                                             ("mesh", "kw", "None")),
        "torch.distributed._tensor.api.old_helper": fn("torch.distributed._tensor.api:old_helper", ("x", "", None)),
        "torch.distributed.barrier": fn(f"{C10D}:barrier", ("group", "", "None")),
        "torch.distributed.gone": fn(f"{C10D}:gone"),
        "torch.distributed._tensor": {"kind": "module", "origin": "torch.distributed._tensor"},
    },
    "2.5.1": {
        "torch.distributed.all_gather_into_tensor": fn(f"{C10D}:all_gather_into_tensor", ("out", "", None)),
        "torch.distributed._composable.fsdp.fully_shard": fn(f"{OLD_FSDP}:fully_shard", ("module", "", None),
                                                             ("mesh", "kw", "None")),
        "torch.distributed.tensor.api.old_helper": fn("torch.distributed.tensor.api:old_helper", ("x", "", None)),
        "torch.distributed.barrier": fn(f"{C10D}:barrier", ("group", "", "None"), ("timeout", "kw", "None")),
        "torch.distributed._tensor": {"kind": "module", "origin": "torch.distributed._tensor"},
        "torch.distributed.tensor": {"kind": "module", "origin": "torch.distributed.tensor"},
    },
    "2.6.0": {
        "torch.distributed.all_gather_into_tensor": fn(f"{C10D}:all_gather_into_tensor", ("out", "", None),
                                                       dep=["`all_gather_into_tensor` is deprecated, use "
                                                            "`torch.distributed.all_gather_single`.",
                                                            "torch.distributed.all_gather_single"]),
        "torch.distributed.distributed_c10d.all_gather_into_tensor": fn(
            f"{C10D}:all_gather_into_tensor", ("out", "", None),
            dep=["deprecated", "torch.distributed.all_gather_single"]),
        "torch.distributed.all_gather_single": fn(f"{C10D}:all_gather_single", ("out", "", None)),
        "torch.distributed._composable.fsdp.fully_shard": fn("torch.distributed.fsdp._fully_shard:fully_shard",
                                                             ("module", "", None), ("mesh", "kw", "None")),
        "torch.distributed.fsdp.fully_shard": fn("torch.distributed.fsdp._fully_shard:fully_shard",
                                                 ("module", "", None), ("mesh", "kw", "None")),
        "torch.distributed.tensor.api.old_helper": fn("torch.distributed.tensor.api:old_helper", ("x", "", None)),
        "torch.distributed.barrier": fn(f"{C10D}:barrier", ("group", "kw", "None"), ("device_ids", "kw", "[]")),
        "torch.distributed._tensor": {"kind": "module", "origin": "torch.distributed._tensor"},
        "torch.distributed.tensor": {"kind": "module", "origin": "torch.distributed.tensor"},
    },
}


@pytest.fixture(scope="module")
def history() -> Any:
    return build_history(RELEASES, "2.6.0")


def test_a_name_added_in_a_release_exists_from_it_on(history: Any) -> None:
    entry = history.names["torch.distributed.all_gather_single"]
    assert entry.versions == ["2.6.0"] and entry.moved_from == [] and entry.removed_in is None
    assert since_line(entry, history) == "since 2.6"
    changes = what_changed(history, "2.5.1", "2.6.0")
    assert [c.name for c in changes.added] == ["torch.distributed.all_gather_single"]
    # A new spelling of an object whose definition did not move is an alias, not a move.
    alias = history.names["torch.distributed.distributed_c10d.all_gather_into_tensor"]
    assert alias.moved_from == [] and alias.aliases == ["torch.distributed.all_gather_into_tensor"]
    assert "torch.distributed.distributed_c10d.all_gather_into_tensor" not in [c.name for c in changes.moved]


def test_a_deprecation_records_the_first_release_and_the_replacement(history: Any) -> None:
    entry = history.names["torch.distributed.all_gather_into_tensor"]
    assert entry.deprecated_since == "2.6.0" and entry.replacement == "torch.distributed.all_gather_single"
    assert entry.versions == ["2.4.1", "2.5.1", "2.6.0"]
    deprecated = what_changed(history, "2.4.1", "2.6.0").deprecated
    assert len(deprecated) == 1, "dist.x and distributed_c10d.x are one object, one change"
    assert deprecated[0].name == "torch.distributed.all_gather_into_tensor"
    assert deprecated[0].aliases == ["torch.distributed.distributed_c10d.all_gather_into_tensor"]
    assert what_changed(history, "2.4.1", "2.5.1").deprecated == []


def test_a_move_is_recorded_both_ways_when_the_old_path_reexports_the_new_object(history: Any) -> None:
    new = history.names["torch.distributed.fsdp.fully_shard"]
    old = history.names["torch.distributed._composable.fsdp.fully_shard"]
    assert new.moved_from == ["torch.distributed._composable.fsdp.fully_shard"]
    assert old.moved_to == ["torch.distributed.fsdp.fully_shard"] and old.removed_in is None
    assert since_line(new, history) == "since 2.6 (2.4–2.5: torch.distributed._composable.fsdp.fully_shard)"
    moved = what_changed(history, "2.5.1", "2.6.0").moved
    assert [(c.name, c.detail) for c in moved if c.area == "fsdp"] == [
        ("torch.distributed.fsdp.fully_shard", "from torch.distributed._composable.fsdp.fully_shard")]
    assert moved[0].name == "torch.distributed.fsdp.fully_shard", "fsdp is listed first"


def test_a_name_that_vanishes_as_one_with_the_same_tail_and_parameters_appears_moved(history: Any) -> None:
    moved = history.names["torch.distributed.tensor.api.old_helper"]
    assert moved.moved_from == ["torch.distributed._tensor.api.old_helper"]
    assert history.names["torch.distributed._tensor.api.old_helper"].removed_in == "2.5.1"
    assert history.names["torch.distributed.tensor"].moved_from == ["torch.distributed._tensor"]


def test_signature_changes_list_added_removed_default_and_kind_changes(history: Any) -> None:
    changes = history.names["torch.distributed.barrier"].signature_changes
    assert [c.model_dump() for c in changes] == [
        {"version": "2.5.1", "added": ["timeout"], "removed": [], "defaults_changed": [], "kinds_changed": []},
        {"version": "2.6.0", "added": ["device_ids"], "removed": ["timeout"], "defaults_changed": [],
         "kinds_changed": ["group"]},
    ]
    changed = what_changed(history, "2.4.1", "2.6.0").signature_changed
    assert [c.version for c in changed] == ["2.5.1", "2.6.0"]
    assert "added: device_ids; removed: timeout; kind changed: group" == changed[1].detail


def test_a_removed_name_says_in_which_release_it_went(history: Any) -> None:
    entry = history.names["torch.distributed.gone"]
    assert entry.versions == ["2.4.1"] and entry.removed_in == "2.5.1"
    assert "removed in 2.5" in since_line(entry, history)
    assert [c.name for c in what_changed(history, "2.4.1", "2.6.0").removed] == [
        "torch.distributed._tensor.api.old_helper", "torch.distributed.gone"]


def test_releases_are_normalized_and_bad_ranges_refused(history: Any) -> None:
    releases = history.releases
    assert normalize_release("2.6.0+cpu", releases) == ("2.6.0", None)
    assert normalize_release("2.5", releases) == ("2.5.1", None)
    assert normalize_release("2.5.0", releases)[1] == "torch 2.5.0 is read as 2.5.1, the patch release of 2.5 " \
        "the timeline holds"
    with pytest.raises(UserError, match="not in the API timeline.*2.4.1, 2.5.1, 2.6.0"):
        normalize_release("1.13", releases)
    with pytest.raises(UserError, match="must be older"):
        what_changed(history, "2.6.0", "2.4.1")


def test_the_timeline_file_is_deterministic_and_loads_back(tmp_path: Path, history: Any) -> None:
    text = dump_history(history)
    assert text == dump_history(build_history(dict(reversed(list(RELEASES.items()))), "2.6.0"))
    (tmp_path / HISTORY_FILE).write_text(text)
    assert load_history(tmp_path / HISTORY_FILE) == history
    versions = render_versions(history)
    assert versions.index("## torch 2.6.0 (against 2.5.1)") < versions.index("## torch 2.5.1 (against 2.4.1)")
    assert "- fsdp: `torch.distributed.fsdp.fully_shard`: from torch.distributed._composable.fsdp.fully_shard" \
        in versions


# --- the committed timeline: the three examples ---------------------------------------------------


def history_json(capsys: pytest.CaptureFixture[str], name: str) -> dict[str, Any]:
    assert main(["history", name, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_all_gather_single_exists_from_2_13_only(capsys: pytest.CaptureFixture[str]) -> None:
    entry = history_json(capsys, "dist.all_gather_single")
    assert entry["name"] == "torch.distributed.all_gather_single"
    assert entry["versions"][0] == "2.13.0" and "2.12.1" not in entry["versions"]
    old = history_json(capsys, "all_gather_into_tensor")
    assert old["name"] == "torch.distributed.all_gather_into_tensor"
    assert old["deprecated_since"] == "2.13.0" and old["replacement"] == "torch.distributed.all_gather_single"
    assert old["versions"][0] == "2.4.1"


def test_fully_shard_is_in_torch_distributed_fsdp_from_2_6_and_in_composable_before(
        capsys: pytest.CaptureFixture[str]) -> None:
    entry = history_json(capsys, "fully_shard")
    assert entry["name"] == "torch.distributed.fsdp.fully_shard"
    assert entry["versions"][0] == "2.6.0"
    assert entry["moved_from"][0] == "torch.distributed._composable.fsdp.fully_shard"
    assert entry["since"].startswith("since 2.6 (2.4–2.5: torch.distributed._composable.fsdp.fully_shard)")
    assert main(["history", "fully_shard"]) == 0
    assert "moved from: torch.distributed._composable.fsdp.fully_shard" in capsys.readouterr().out


def test_distributed_nn_functional_is_deprecated_in_recent_releases(capsys: pytest.CaptureFixture[str]) -> None:
    entry = history_json(capsys, "torch.distributed.nn.functional.all_reduce")
    assert entry["deprecated_since"] is not None and entry["versions"][0] == "2.4.1"
    assert entry["replacement"] == "torch.distributed._functional_collectives.all_reduce"
    assert "2.13.0" in entry["versions"]


def test_what_changed_on_the_command_line_names_the_2_13_additions(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["what-changed", "2.12", "2.13", "--area", "collectives"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("torch 2.12.1 -> 2.13.0 (collectives)")
    assert "torch.distributed.all_gather_single" in out and "deprecated" in out
    assert main(["what-changed", "2.13", "2.12"]) == UserError.exit_code
    assert "must be older" in capsys.readouterr().err


# --- MCP ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory, history: Any) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    (root / "references" / HISTORY_FILE).write_text(dump_history(history), encoding="utf-8")
    return root


def with_client(root: Path, body: Callable[[Client], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        with anyio.fail_after(60):
            async with Client(build_server(root)) as client:
                return await body(client)

    return anyio.run(run)


def test_the_history_tools_are_read_only_and_answer_over_mcp(tree: Path) -> None:
    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ("api_history", "what_changed"):
            assert tools[name].annotations.read_only_hint is True and tools[name].output_schema
        result = await client.call_tool("api_history", {"symbol": "fully_shard"})
        assert not result.is_error
        data = result.structured_content
        assert data["name"] == "torch.distributed.fsdp.fully_shard"  # resolved as get_api resolves it
        assert data["moved_from"] == ["torch.distributed._composable.fsdp.fully_shard"]
        result = await client.call_tool("what_changed", {"from_version": "2.4"})  # to the pinned release
        data = result.structured_content
        assert (data["from_version"], data["to_version"]) == ("2.4.1", "2.6.0")
        assert [c["name"] for c in data["moved"]][:1] == ["torch.distributed.fsdp.fully_shard"]
        got = await client.call_tool("get_api", {"symbol": "fully_shard"})
        assert got.structured_content["since"].startswith("since 2.6 (2.4–2.5:")

    with_client(tree, body)


def test_the_history_tools_refuse_bad_input_with_a_message_the_model_reads(tree: Path) -> None:
    async def body(client: Client) -> None:
        for tool, arguments, words in [
            ("api_history", {"symbol": "no_such_api_anywhere"}, "in none of the torch releases read"),
            ("api_history", {"symbol": "x" * (MAX_NAME_CHARS + 1)}, "the limit is"),
            ("what_changed", {"from_version": "1.13"}, "not in the API timeline"),
            ("what_changed", {"from_version": "2.6", "to_version": "2.4"}, "must be older"),
            ("what_changed", {"from_version": "9" * 100_000}, "the limit is"),
        ]:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
            text = result.content[0].text
            assert words in text and len(text) < 1_000, text

    with_client(tree, body)

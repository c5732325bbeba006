"""The MCP server in-process through `mcp.Client`: tools, resources, prompts and bad input."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from fsdp_skill.search.snippets import open_fence_at
from fsdp_skill.serve import runs
from fsdp_skill.serve.server import build_server
from search_fixture import DEBUGGING_MD, make_tree

READ_ONLY_TOOLS = {
    "search_docs",
    "get_api",
    "list_api",
    "read_reference",
    "list_references",
    "list_examples",
    "get_example",
    "list_patterns",
    "get_pattern",
    "api_history",
    "what_changed",
}


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


async def call(client: Client, tool: str, **arguments: Any) -> dict:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def call_error(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool}({arguments}) should fail"
    return result.content[0].text


# ---------------------------------------------------------------- listing


def test_every_tool_is_read_only_with_an_output_schema_and_a_description(tree: Path) -> None:
    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == READ_ONLY_TOOLS
        for tool in tools.values():
            assert tool.annotations and tool.annotations.read_only_hint is True, tool.name
            assert tool.output_schema and tool.output_schema.get("properties"), tool.name
            assert tool.description and len(tool.description) > 40, tool.name

    with_client(tree, body)


def test_the_kind_and_status_filters_offer_exactly_the_shared_vocabulary(tree: Path) -> None:
    from fsdp_skill.core.vocabulary import DOCUMENT_KINDS, STATUS_FILTERS

    def enum_of(schema: dict, name: str) -> list[str]:
        prop = schema["properties"][name]
        return next(option["enum"] for option in prop.get("anyOf", [prop]) if "enum" in option)

    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert enum_of(tools["search_docs"].input_schema, "kind") == list(DOCUMENT_KINDS)
        assert enum_of(tools["list_examples"].input_schema, "status") == list(STATUS_FILTERS)

    with_client(tree, body)


def test_verify_example_is_registered_only_with_allow_run_and_is_not_read_only(tree: Path) -> None:
    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["verify_example"].annotations.read_only_hint is False

    with_client(tree, body, allow_run=True)


# ---------------------------------------------------------------- search and api


def test_search_docs_returns_structured_results_with_snippets_and_links(tree: Path) -> None:
    async def body(client: Client) -> None:
        out = await call(client, "search_docs", query="dist.all_reduce", limit=3)
        assert out["torch_version"] == "2.13.0" and len(out["results"]) == 3
        top = out["results"][0]
        assert top["kind"] == "api" and top["symbol"] == "torch.distributed.all_reduce"
        assert top["reference"] == "collectives.md" and top["anchor"] == "torch.distributed.all_reduce"
        assert top["url"].startswith("https://docs.pytorch.org/")
        assert "all_reduce(tensor" in top["snippet"] and len(top["snippet"]) <= 400
        sections = await call(client, "search_docs", query="mixed precision", kind="section")
        assert {r["kind"] for r in sections["results"]} == {"section"}

    with_client(tree, body)


def test_get_api_accepts_short_names_and_aliases_and_lists_other_meanings(tree: Path) -> None:
    async def body(client: Client) -> None:
        for spelling in ("torch.distributed.all_reduce", "all_reduce", "dist.all_reduce", "all_reduce()"):
            entry = await call(client, "get_api", symbol=spelling)
            assert entry["qualified_name"] == "torch.distributed.all_reduce", spelling
        entry = await call(client, "get_api", symbol="all_reduce")
        assert entry["other_matches"] == ["torch.distributed.nn.functional.all_reduce"]
        assert [e["status"] for e in entry["examples"]] == ["passed (gloo, 2 ranks)", "not verified"]
        assert entry["parameters"][0]["name"] == "tensor" and entry["torch_version"] == "2.13.0"
        assert (await call(client, "get_api", symbol="FSDP"))[
            "qualified_name"
        ] == "torch.distributed.fsdp.FullyShardedDataParallel"
        assert (await call(client, "get_api", symbol="FSDP2"))["qualified_name"] == "torch.distributed.fsdp.fully_shard"
        old = await call(client, "get_api", symbol="torch.distributed._composable.fsdp.fully_shard")
        assert old["qualified_name"] == "torch.distributed.fsdp.fully_shard"
        deprecated = await call(client, "get_api", symbol="reduce_scatter_tensor")
        assert deprecated["deprecation"]["replacement"] == "torch.distributed.reduce_scatter_single"

    with_client(tree, body)


# ---------------------------------------------------------------- references


def test_list_api_pages_cover_every_public_name_once_grouped_by_module(tree: Path) -> None:
    async def body(client: Client) -> tuple[list[dict], dict, str]:
        pages, start = [], 0
        while start is not None:
            page = await call(client, "list_api", start_index=start)
            pages.append(page)
            start = page["next_start_index"]
        return pages, await call(client, "list_api", module="dist"), await call_error(client, "list_api", module="nope")

    pages, dist_page, error = with_client(tree, body)
    names = [line for page in pages for line in page["text"].splitlines() if line.startswith("- ")]
    assert len(names) == pages[0]["total"] and len(set(names)) == len(names)
    assert "## torch.distributed\n" in pages[0]["text"] and "- all_reduce: Reduces the tensor data" in pages[0]["text"]
    assert pages[-1]["text"].rstrip().endswith("the last page. get_api(name) gives a name's full entry.]")
    assert dist_page["total"] <= pages[0]["total"] and "torch.distributed" in dist_page["text"]
    assert "no public names in module 'nope'" in error and "torch.distributed" in error


def test_list_api_pages_stay_near_two_thousand_tokens_and_say_how_to_go_on() -> None:
    from fsdp_skill.serve.api_list import PAGE_CHARS, ApiLine, render_page

    lines = [ApiLine(f"torch.m{i // 50}", f"name_{i}", "does a thing " * 4, False) for i in range(400)]
    text, end, next_start = render_page(lines, None, 0)
    assert len(text) <= PAGE_CHARS + 200 and next_start == end < 400
    assert f"Next page: list_api(start_index={end})" in text
    second, _, _ = render_page(lines, None, end)
    assert second.startswith(f"## {lines[end].module} (continued)") or second.startswith(f"## {lines[end].module}\n")


def test_search_responses_and_the_server_instructions_say_the_search_mode(tree: Path) -> None:
    async def body(client: Client) -> dict:
        return await call(client, "search_docs", query="fully_shard")

    assert with_client(tree, body)["mode"] == "lexical"  # the fixture index has no vectors
    assert "Search mode: lexical" in (build_server(tree).instructions or "")


def test_read_reference_pages_cover_the_file_exactly_and_keep_code_blocks_closed(tree: Path) -> None:
    async def body(client: Client) -> None:
        pages, start = [], 0
        while True:
            page = await call(client, "read_reference", name="debugging.md", start_index=start, max_chars=2000)
            pages.append(page)
            assert page["start_index"] == start
            if page["next_start_index"] is None:
                break
            assert f"start_index={page['next_start_index']})" in page["text"].splitlines()[-1]
            start = page["next_start_index"]
        assert len(pages) > 5
        assert pages[-1]["text"].splitlines()[-1].startswith("[end of debugging.md")
        for page in pages:
            assert open_fence_at(page["text"]) is None, page["text"][-300:]
        # The pages' [start, end) ranges tile the file exactly.
        text = (tree / "references" / "debugging.md").read_text()
        assert pages[0]["start_index"] == 0 and pages[-1]["end_index"] == len(text) == pages[0]["total_chars"]
        assert all(a["end_index"] == b["start_index"] for a, b in zip(pages, pages[1:]))
        # A page that starts inside the long code block reopens it; the one before closed it.
        inside = [i for i, p in enumerate(pages) if p["start_index"] and open_fence_at(text[: p["start_index"]])]
        assert inside
        for i in inside:
            assert pages[i]["text"].startswith("```python\n"), pages[i]["text"][:80]
            assert pages[i - 1]["text"].split("\n[")[0].rstrip().endswith("```")

    with_client(tree, body)


def test_read_reference_by_section_includes_subsections_and_stops_at_the_next_sibling(tree: Path) -> None:
    async def body(client: Client) -> None:
        page = await call(client, "read_reference", name="fsdp2.md", section="mixed-precision")
        assert page["section"] == "mixed-precision"
        assert page["text"].startswith("## Mixed precision") and "### Reduce dtype" in page["text"]
        assert "Gradient accumulation" not in page["text"]
        by_title = await call(client, "read_reference", name="fsdp2", section="Mixed precision")
        assert by_title["text"] == page["text"]

    with_client(tree, body)


def test_list_references_gives_title_description_and_tokens(tree: Path) -> None:
    async def body(client: Client) -> None:
        refs = (await call(client, "list_references"))["references"]
        assert [r["name"] for r in refs] == ["collectives.md", "debugging.md", "fsdp2.md"]
        debugging = refs[1]
        assert debugging["title"] == "Debugging distributed jobs" and debugging["tokens"] == len(DEBUGGING_MD) // 4

    with_client(tree, body)


# ---------------------------------------------------------------- examples and patterns


def test_examples_carry_their_verification_status(tree: Path) -> None:
    async def body(client: Client) -> None:
        listing = await call(client, "list_examples", symbol="all_reduce")
        assert listing["total"] == 2
        detail = await call(client, "get_example", name="torch.distributed.all_reduce#1")
        assert detail["status"] == "passed (gloo, 2 ranks)" and detail["verification"][0]["seconds"] == 0.4
        assert detail["steps"][-1]["expected_by_rank"] == {"0": "tensor([4, 6])", "1": "tensor([4, 6])"}
        unverified = await call(client, "get_example", name="torch.distributed.all_reduce#2")
        assert unverified["status"] == "not verified" and unverified["verification"] == []

    with_client(tree, body)


def test_list_examples_is_compact_and_paged_with_a_note_saying_how_to_go_on(tree: Path) -> None:
    async def body(client: Client) -> None:
        first = await call(client, "list_examples", symbol="all_reduce", limit=1)
        assert first["total"] == 2 and first["next_start_index"] == 1
        assert first["examples"] == [
            {"id": "torch.distributed.all_reduce#1", "status": "passed", "line": "2 ranks, cpu"}
        ]
        assert "Next page: list_examples(start_index=1, symbol='all_reduce')" in first["note"]
        last = await call(client, "list_examples", symbol="all_reduce", start_index=1, limit=1)
        assert [e["id"] for e in last["examples"]] == ["torch.distributed.all_reduce#2"]
        assert last["next_start_index"] is None and "last page" in last["note"]
        assert last["examples"][0]["status"] == "not verified"
        passed = await call(client, "list_examples", status="passed")
        assert [e["id"] for e in passed["examples"]] == ["torch.distributed.all_reduce#1"]
        none = await call(client, "list_examples", status="doc-bug")
        assert none["total"] == 0 and none["examples"] == [] and "no examples match" in none["note"]

    with_client(tree, body)


def test_examples_read_not_verified_when_the_report_is_absent(tmp_path: Path) -> None:
    make_tree(tmp_path)
    (tmp_path / "references" / "verification.json").unlink()

    async def body(client: Client) -> None:
        detail = await call(client, "get_example", name="torch.distributed.all_reduce#1")
        assert detail["status"] == "not verified"

    with_client(tmp_path, body)


def test_patterns_are_listed_and_served_with_their_source(tree: Path) -> None:
    async def body(client: Client) -> None:
        patterns = (await call(client, "list_patterns"))["patterns"]
        assert [p["name"] for p in patterns] == ["fsdp2-train"]
        pattern = await call(client, "get_pattern", name="fsdp2-train")
        assert "from torch.distributed.fsdp import fully_shard" in pattern["source"]
        assert pattern["launch"].startswith("torchrun") and pattern["status"] == "not verified"

    with_client(tree, body)


# ---------------------------------------------------------------- resources and prompts


def test_skill_md_and_every_reference_are_resources(tree: Path) -> None:
    async def body(client: Client) -> None:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert uris == {
            "fsdp-skill://SKILL.md",
            "fsdp-skill://references/collectives.md",
            "fsdp-skill://references/debugging.md",
            "fsdp-skill://references/fsdp2.md",
        }
        skill = await client.read_resource("fsdp-skill://SKILL.md")
        assert skill.contents[0].text.startswith("---\nname: pytorch-fsdp")
        ref = await client.read_resource("fsdp-skill://references/debugging.md")
        assert ref.contents[0].text == DEBUGGING_MD

    with_client(tree, body)


def test_prompts_for_migration_and_hang_debugging_embed_the_users_input(tree: Path) -> None:
    async def body(client: Client) -> None:
        names = {p.name for p in (await client.list_prompts()).prompts}
        assert {"migrate-fsdp1-to-fsdp2", "debug-distributed-hang"} <= names
        migrate = await client.get_prompt("migrate-fsdp1-to-fsdp2", {"code": "model = FSDP(model)"})
        text = migrate.messages[0].content.text
        assert "```python\nmodel = FSDP(model)\n```" in text and "torch 2.13.0" in text
        assert "MixedPrecisionPolicy" in text and "set_requires_gradient_sync" in text
        hang = await client.get_prompt("debug-distributed-hang", {"symptom": "stuck in all_gather", "backend": "nccl"})
        text = hang.messages[0].content.text
        assert (
            "stuck in all_gather" in text and "TORCH_DISTRIBUTED_DEBUG=DETAIL" in text and "monitored_barrier" in text
        )

    with_client(tree, body)


# ---------------------------------------------------------------- bad input


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("search_docs", {"query": ""}, "empty"),
    ("search_docs", {"query": "   \n\t "}, "empty"),
    ("search_docs", {"query": "fsdp " * 2000}, "10000 characters"),
    ("search_docs", {"query": "fsdp", "limit": 0}, "between 1 and 50"),
    ("search_docs", {"query": "fsdp", "limit": -3}, "between 1 and 50"),
    ("search_docs", {"query": "fsdp", "limit": 10_000}, "between 1 and 50"),
    ("search_docs", {"query": "fsdp", "kind": "tutorial"}, "kind must be one of 'section', 'api', 'example'"),
    ("search_docs", {"query": '"*():'}, "no searchable words"),
    ("get_api", {"symbol": "all_reduse"}, "Closest names: torch.distributed.all_reduce"),
    ("get_api", {"symbol": ""}, "symbol is empty"),
    ("read_reference", {"name": "../../etc/passwd"}, "not a reference name"),
    ("read_reference", {"name": "/etc/passwd"}, "not a reference name"),
    ("read_reference", {"name": "fsdp2.md\x00.txt"}, "not a reference name"),
    ("read_reference", {"name": "catalog.json"}, "unknown reference"),
    ("read_reference", {"name": "nope.md"}, "collectives.md, debugging.md, fsdp2.md"),
    ("read_reference", {"name": "fsdp2.md", "section": "no-such-anchor"}, "table of contents"),
    ("read_reference", {"name": "fsdp2.md", "start_index": 10**9}, "past the end"),
    ("read_reference", {"name": "fsdp2.md", "start_index": -1}, "0 or more"),
    ("read_reference", {"name": "fsdp2.md", "max_chars": 0}, "between 200 and 50000"),
    ("get_example", {"name": "torch.distributed.all_reduce#9"}, "torch.distributed.all_reduce#1"),
    ("get_pattern", {"name": "nope"}, "fsdp2-train"),
    ("list_examples", {"limit": 0}, "between 1 and 200"),
    ("list_examples", {"start_index": 2}, "past the end (2 examples match)"),
    ("list_examples", {"start_index": -1}, "0 or more"),
    ("list_examples", {"status": "green"}, "doc-bug"),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"), BAD_CALLS, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(BAD_CALLS)]
)
def test_bad_input_is_a_tool_error_the_model_can_act_on_and_the_server_keeps_answering(
    tree: Path, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    async def body(client: Client) -> None:
        message = await call_error(client, tool, **arguments)
        assert expected in message, message
        assert "Traceback" not in message
        follow_up = await call(client, "search_docs", query="fully_shard")
        assert follow_up["results"][0]["symbol"] == "torch.distributed.fsdp.fully_shard"

    with_client(tree, body)


def test_fts_syntax_in_a_query_is_searched_as_text(tree: Path) -> None:
    async def body(client: Client) -> None:
        for query in [
            'fully_shard"',
            "fully_shard*",
            "NOT fully_shard",
            "(fully_shard",
            "NEAR(fully_shard)",
            "fully_shard:",
            'title:"fully_shard" OR ^',
        ]:
            out = await call(client, "search_docs", query=query)
            assert out["results"][0]["symbol"] == "torch.distributed.fsdp.fully_shard", query

    with_client(tree, body)


# ---------------------------------------------------------------- verify_example (stand-in runner)


STAND_IN_RUNNER = textwrap.dedent("""\
    import argparse, json, time
    p = argparse.ArgumentParser()
    for flag in ("--id", "--backend", "--world-size", "--timeout", "--json"):
        p.add_argument(flag)
    a = p.parse_args()
    if a.id.endswith("#2"):
        time.sleep(120)  # a hung run: the server must kill it
    json.dump({"torch_version": "2.13.0", "date": "x", "results": [{
        "name": a.id, "backend": a.backend, "world_size": int(a.world_size), "status": "passed",
        "reason": None, "seconds": 0.1, "warnings": ["FutureWarning: x"]}]}, open(a.json, "w"))
    print("ran", a.id)
""")


def test_verify_example_runs_only_catalog_examples_in_a_bounded_subprocess(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "stand_in_runner.py").write_text(STAND_IN_RUNNER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(runs, "RUNNER_MODULE", "stand_in_runner")
    monkeypatch.setattr(runs, "STARTUP_GRACE_S", 0.0)

    async def body(client: Client) -> None:
        result = await call(client, "verify_example", name="torch.distributed.all_reduce#1")
        assert result["world_size"] == 2 and result["results"][0]["status"] == "passed"
        assert result["results"][0]["warnings"] == ["FutureWarning: x"] and "ran" in result["log_tail"]
        message = await call_error(client, "verify_example", name="import os; os.system('rm -rf /')")
        assert "no example" in message
        message = await call_error(client, "verify_example", name="torch.distributed.all_reduce#1", world_size=99)
        assert "between 1 and 8" in message
        message = await call_error(client, "verify_example", name="torch.distributed.all_reduce#2", timeout=1)
        assert "was stopped" in message
        assert (await call(client, "list_references"))["references"]

    with_client(tree, body, allow_run=True)


def test_server_module_never_imports_torch(tree: Path) -> None:
    code = (
        "import sys, anyio; from pathlib import Path; from mcp import Client; "
        # The path `fsdp-skill serve` takes: the CLI parser first (it imports every subcommand's flags).
        "from fsdp_skill.cli.main import build_parser; build_parser().parse_args(['serve'])\n"
        "from fsdp_skill.serve.server import build_server\n"
        f"server = build_server(Path({str(tree)!r}), allow_run=True)\n"
        "async def main():\n"
        "    async with Client(server) as c:\n"
        "        await c.call_tool('search_docs', {'query': 'all_reduce'})\n"
        "        await c.call_tool('get_api', {'symbol': 'fully_shard'})\n"
        "anyio.run(main)\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print('ok')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_closest_api_names_are_close_in_name_not_names_sharing_a_fragment() -> None:
    from fsdp_skill.serve.tools import closest_api_names

    names = [
        "torch.distributed.checkpoint.DefaultLoadPlanner.transform_tensor",
        "torch.distributed.fsdp.wrap.transformer_auto_wrap_policy",
        "torch.distributed.all_reduce",
    ]
    assert closest_api_names("transformer_wrap_policy", names) == [
        "torch.distributed.fsdp.wrap.transformer_auto_wrap_policy"
    ]
    assert closest_api_names("transformer_autowrap", names[:1]) == []
    assert closest_api_names("dist.all_reduc", names) == ["torch.distributed.all_reduce"]


def test_get_example_serves_a_pages_code_block_with_its_status_and_search_says_how_a_sections_code_fared(
    tmp_path: Path,
) -> None:
    import json as _json

    from fsdp_skill.search.index import DocsIndex
    from fsdp_skill.serve.tools import Toolbox, ToolInputError

    catalog = make_tree(tmp_path)
    section = next(s for s in catalog.sections if s.level == 2)
    block_id = f"{section.reference}#{section.anchor}:1"
    path = tmp_path / "references" / "catalog.json"
    data = _json.loads(path.read_text(encoding="utf-8"))
    data["page_code"] = [
        {
            "id": block_id,
            "reference": section.reference,
            "anchor": section.anchor,
            "section": section.title,
            "position": 1,
            "line": 3,
            "language": "python",
            "kind": "rank-function",
            "origin": "tutorial",
            "code": "def run(rank, size):\n    pass\n",
        }
    ]
    path.write_text(_json.dumps(data), encoding="utf-8")
    report = tmp_path / "references" / "verification.json"
    rows = _json.loads(report.read_text(encoding="utf-8"))
    rows["results"].append(
        {
            "name": block_id,
            "backend": "gloo",
            "world_size": 2,
            "status": "passed",
            "reason": None,
            "seconds": 1.0,
            "warnings": [],
            "kind": "rank-function",
        }
    )
    report.write_text(_json.dumps(rows), encoding="utf-8")
    toolbox = Toolbox(DocsIndex(tmp_path / "references" / "index.sqlite"), root=tmp_path)
    detail = toolbox.get_example(block_id)
    assert (detail.kind, detail.status, detail.world_size) == ("rank-function", "passed (gloo, 2 ranks)", 2)
    assert detail.code.startswith("def run(rank, size)")
    hits = toolbox.search_docs(section.title, limit=10).results
    hit = next(h for h in hits if h.id == f"{section.reference}#{section.anchor}")
    assert hit.code == "1 code block: 1 passed"
    with pytest.raises(ToolInputError, match=r"no code block .*Closest ids: " + re.escape(block_id)):
        toolbox.get_example(block_id.replace(":1", ":7"))


def test_every_skill_result_opens_with_read_reference() -> None:
    # Before: search results of kind skill pointed at SKILL.md / assets/tuning.md, which read_reference refused.
    from fsdp_skill.search.index import open_index
    from fsdp_skill.serve.tools import Toolbox, ToolInputError

    box = Toolbox(open_index())
    ids = box.index.ids("skill")
    assert any(i.startswith("SKILL.md#pitfall-") for i in ids) and any(i.startswith("assets/tuning.md#") for i in ids)
    for query in ("pitfall no_grad forward root unsharded", "gradient accumulation tuning", "decide backend"):
        for hit in box.search_docs(query, 10, "skill").results:
            assert hit.reference and hit.anchor
            page = box.read_reference(hit.reference, section=hit.anchor)
            assert page.name == hit.reference and page.section == hit.anchor and page.text.strip(), hit.id
    whole = box.read_reference("SKILL.md", max_chars=200)
    assert whole.text.startswith("---\nname: pytorch-fsdp") and whole.next_start_index
    with pytest.raises(ToolInputError, match="no part 'pitfall-999' in SKILL.md. Closest: pitfall-"):
        box.read_reference("SKILL.md", section="pitfall-999")
    with pytest.raises(ToolInputError, match="is not a reference name"):
        box.read_reference("assets/other.md")  # only the skill's own pages, never any file under the root

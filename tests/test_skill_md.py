"""SKILL.md's content: what an agent needs is there, the code it shows exists in the pinned torch, and its
maps (references, patterns, MCP tools) match what the repository actually ships."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import yaml

from fsdp_skill.cli.validate import split_frontmatter
from fsdp_skill.core.markdown import markdown_parser

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project supports 3.10 through tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SKILL = (ROOT / "SKILL.md").read_text(encoding="utf-8")
PARTS = split_frontmatter(SKILL)
assert PARTS is not None, "SKILL.md has no frontmatter"
FRONTMATTER = yaml.safe_load(PARTS[0])
BODY = PARTS[2]


def _fences(language: str) -> list[str]:
    return [t.content for t in markdown_parser().parse(BODY) if t.type == "fence" and t.info.strip() == language]


def _linked_targets() -> set[str]:
    targets: set[str] = set()
    for token in markdown_parser().parse(BODY):
        for child in token.children or []:
            if child.type == "link_open":
                targets.add(str(child.attrGet("href")).split("#")[0])
    return targets


def test_frontmatter_keeps_versions_under_metadata_and_uses_only_spec_keys() -> None:
    assert set(FRONTMATTER) <= {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
    assert FRONTMATTER["name"] == "pytorch-fsdp"
    assert FRONTMATTER["metadata"]["torch-version"] == "2.15.0"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in FRONTMATTER["metadata"].items())


@pytest.mark.parametrize(
    "trigger",
    ["fully_shard", "FSDP2", "FSDP", "sharded data parallel", "mixed precision", "CPU offload", "DCP",
     "checkpoint", "init_process_group", "gloo", "NCCL", "hangs", "torchrun"],
)
def test_description_names_what_should_trigger_the_skill(trigger: str) -> None:
    assert trigger.lower() in FRONTMATTER["description"].lower()


def test_description_says_what_it_does_and_when_to_use_it() -> None:
    description = FRONTMATTER["description"]
    assert len(description) <= 1024
    assert description.startswith("Guides ") and "Use when" in description


@pytest.mark.torch
def test_the_metadata_torch_version_is_the_installed_one() -> None:
    import torch
    assert torch.__version__.split("+")[0] == FRONTMATTER["metadata"]["torch-version"]


@pytest.mark.torch
def test_the_core_recipe_imports_exist_in_the_pinned_torch() -> None:
    [recipe] = [code for code in _fences("python") if "fully_shard" in code]
    imports = [node for node in ast.parse(recipe).body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert imports, "the recipe shows its imports"
    exec(compile(ast.Module(body=imports, type_ignores=[]), "SKILL.md recipe", "exec"), {})


def test_the_core_recipe_shards_blocks_then_root_and_builds_the_optimizer_after() -> None:
    [recipe] = [code for code in _fences("python") if "fully_shard" in code]
    recipe = recipe[recipe.index("device = "):]  # the steps, after the init_weights helper they call
    order = ["init_process_group", 'torch.device("meta")', "fully_shard(block", "fully_shard(model",
             "to_empty(device=", "init_weights(model)", "torch.optim.AdamW(model.parameters()"]
    positions = [recipe.index(step) for step in order]
    assert positions == sorted(positions), "recipe steps out of order"


def test_every_reference_topic_is_in_the_map() -> None:
    topics = tomllib.loads((ROOT / "assets" / "topics.toml").read_text(encoding="utf-8"))["topics"]
    expected = {f"references/{topic['name']}.md" for topic in topics} | {"references/api-drift.md"}
    assert expected <= _linked_targets(), sorted(expected - _linked_targets())


def test_every_mcp_tool_the_server_registers_is_explained() -> None:
    """Tool names are read from the server's source (decorated with server.tool), not a list kept here."""
    tree = ast.parse((ROOT / "server" / "fsdp_skill" / "serve" / "server.py").read_text(encoding="utf-8"))
    tools = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and any("tool" in ast.unparse(d) for d in node.decorator_list)
    }
    assert {"search_docs", "get_api", "get_pattern", "verify_example"} <= tools
    for tool in tools:
        assert re.search(rf"`{tool}\(", BODY), f"SKILL.md does not explain the MCP tool {tool}"


def test_the_scripts_it_points_to_exist() -> None:
    for script in re.findall(r"scripts/[\w.]+\.py", BODY):
        assert (ROOT / script).is_file(), script
    assert "--allow-run" in BODY  # verify_example is only registered with it

"""`fsdp-skill search` and `fsdp-skill show`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsdp_skill.cli.main import main
from search_fixture import make_tree


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    return root


@pytest.fixture(autouse=True)
def serve_tree(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tree))


def test_search_prints_a_table_with_the_best_result_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "how do I average a tensor across ranks with allreduce", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    first_row = next(line for line in out.splitlines() if line.startswith("│ 1 "))
    assert "api" in first_row and "torch.distributed.all_reduce " in first_row
    assert "collectives.md" in out


def test_search_json_is_the_tool_response(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "mixed precision", "--kind", "section", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["query"] == "mixed precision" and data["torch_version"] == "2.13.0"
    assert data["results"][0]["id"] == "fsdp2.md#mixed-precision"
    assert {r["kind"] for r in data["results"]} == {"section"}


def test_search_with_bad_input_prints_one_line_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "   "]) == 2
    assert main(["search", "fsdp", "--limit", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("fsdp-skill search: error: the query is empty")
    assert "limit must be between 1 and 50" in err[1]


def test_show_renders_signature_parameters_and_examples_with_status(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "dist.all_reduce"]) == 0
    out = capsys.readouterr().out
    for expected in [
        "torch.distributed.all_reduce",
        "async_op=False",
        "Parameters",
        "tensor",
        "passed (gloo, 2 ranks)",
        "not verified",
        "references/collectives.md#torch.distributed.all_reduce",
    ]:
        assert expected in out, expected


def test_show_marks_deprecated_entries(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "reduce_scatter_tensor"]) == 0
    out = capsys.readouterr().out
    assert "deprecated" in out and "reduce_scatter_single" in out


def test_show_json_and_unknown_symbol(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "FSDP2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["qualified_name"] == "torch.distributed.fsdp.fully_shard"
    assert main(["show", "fully_shrad"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Closest names: torch.distributed.fsdp.fully_shard" in err

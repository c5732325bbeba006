"""`--world-size`: a size the runner cannot start is refused up front, and at a size the docs were not
written for, an example whose outputs go uncompared is not reported as passed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsdp_skill.verify.cli import main as verify_main

CATALOG = Path(__file__).resolve().parents[1] / "references" / "catalog.json"


@pytest.mark.parametrize("size", [9, 64])
def test_a_world_size_over_8_without_torchrun_is_refused_with_what_to_do(
    size: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TORCHELASTIC_RUN_ID", "LOCAL_RANK", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert verify_main(["--catalog", str(CATALOG), "--world-size", str(size), "--no-patterns", "-k", "all_reduce"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--world-size {size}: this runner starts at most 8 processes on one machine" in err
    assert "torchrun --nnodes" in err


@pytest.mark.torch
@pytest.mark.timeout(240)
def test_at_a_world_size_the_docs_did_not_use_uncompared_outputs_are_not_a_pass(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    code = verify_main(["--catalog", str(CATALOG), "--id", "torch.distributed.all_reduce#1", "--no-patterns",
                        "--world-size", "3", "--timeout", "120", "--json", str(report)])
    row = json.loads(report.read_text())["results"][0]
    assert code == 0 and row["world_size"] == 3
    assert row["status"] == "skipped", row
    assert row["reason"].startswith("ran without error at world size 3, but its outputs are documented for 2 rank(s) "
                                    "and were not compared")

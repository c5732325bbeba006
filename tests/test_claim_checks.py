"""Each claim check in assets/checks/ run under torchrun at its world size (gloo; a GPU-only check is
skipped without GPUs, naming the torch line it rests on): a failure means SKILL.md says something the
installed torch no longer does."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp_skill.verify.claims import check_files, read_check, run_check

ROOT = Path(__file__).resolve().parents[1]
CHECKS = check_files(ROOT / "assets" / "checks")


@pytest.mark.torch
@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", CHECKS, ids=lambda p: p.stem)
def test_each_claim_check_holds_on_this_torch(path: Path) -> None:
    row = run_check(read_check(path), timeout_s=240)
    if row["status"] == "skipped":
        assert "rests on torch/" in row["reason"], row["reason"]
        pytest.skip(row["reason"])
    assert row["status"] == "passed", f"{row['reason']}\n{row.get('output', '')[-4000:]}"

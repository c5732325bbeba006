"""Runner report files: a path that cannot be written is a one-line error before the run (never a
traceback after it), no folders appear uninvited, and reports get ordinary file modes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from fsdp_skill.core.atomic import write_atomic
from fsdp_skill.verify.cli import main as verify_main

CATALOG = Path(__file__).resolve().parents[1] / "references" / "catalog.json"


@pytest.mark.parametrize(("where", "expected"), [
    ("missing/dir/out.json", "the folder {tmp}/missing/dir does not exist: create it first or pass another path"),
    ("a-file/out.json", "{tmp}/a-file is not a folder: pass a path inside a folder"),
    ("a-folder", "{tmp}/a-folder is a folder: pass a file path"),
], ids=["missing-folder", "parent-is-a-file", "path-is-a-folder"])
def test_verify_json_to_a_path_that_cannot_be_written_fails_at_once_in_one_line_creating_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, expected: str
) -> None:
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "a-folder").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    code = verify_main(["--catalog", str(CATALOG), "--id", "torch.distributed.all_reduce#1", "--no-patterns",
                        "--json", str(tmp_path / where)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.strip() == f"verify: error: --json {tmp_path / where}: " + expected.format(tmp=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_verify_json_on_a_filesystem_that_refuses_writes_fails_before_the_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = verify_main(["--catalog", str(CATALOG), "--id", "torch.distributed.all_reduce#1", "--no-patterns",
                        "--json", "/proc/fsdp-skill-report.json"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("verify: error: --json /proc/fsdp-skill-report.json: cannot write in /proc")


def test_reports_are_written_with_the_mode_open_would_give_not_0600(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "verification.json", "{}\n")
        assert stat.S_IMODE((tmp_path / "verification.json").stat().st_mode) == 0o644
        (tmp_path / "kept.md").write_text("x")
        os.chmod(tmp_path / "kept.md", 0o640)
        write_atomic(tmp_path / "kept.md", "y\n")
        assert stat.S_IMODE((tmp_path / "kept.md").stat().st_mode) == 0o640
    finally:
        os.umask(old_umask)

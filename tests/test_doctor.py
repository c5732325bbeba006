"""`fsdp-skill doctor`: one line per check, what to do about each problem, exit 1 on a problem; it never
imports torch itself (a broken torch is reported, not fatal). Real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FSDP_SKILL = str(Path(sys.executable).with_name("fsdp-skill"))


def doctor(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("FSDP_SKILL_ROOT", "FSDP_SKILL_SEMANTIC")}
    clean["HOME"] = str(tmp_path)  # no installed skill there
    return subprocess.run([FSDP_SKILL, "doctor", *args], capture_output=True, text=True, timeout=240,
                          env={**clean, **env}, cwd=tmp_path)


def statuses(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {check["name"]: check["status"] for check in json.loads(result.stdout)["checks"]}


def test_a_working_checkout_passes_every_check_and_names_the_data_index_and_torch(tmp_path: Path) -> None:
    result = doctor(tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"ok       data: {ROOT} (checkout)" in out
    assert "generated from torch 2.15.0 docs" in out and "index.sqlite" in out
    assert "torch: torch 2.15" in out and "what `fsdp-skill verify` would run with" in out
    assert "Agent Skill: not installed" in out and "-> fsdp-skill skill install" in out
    assert out.rstrip().endswith("everything a user needs works")


def test_json_lists_every_check(tmp_path: Path) -> None:
    result = doctor("--json", "--no-torch", tmp_path=tmp_path, FSDP_SKILL_SEMANTIC="0")
    assert result.returncode == 0
    found = statuses(result)
    assert list(found) == ["data", "catalog", "index", "search mode", "MCP server", "command", "Agent Skill"]
    assert found["search mode"] == "note"  # lexical, switched off: a note saying how to switch it on
    search = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "search mode")
    assert "unset FSDP_SKILL_SEMANTIC" in search["fix"]


def test_data_without_references_is_a_problem_with_what_to_do_and_exit_1(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "SKILL.md").write_text("---\nname: pytorch-fsdp\n---\n", encoding="utf-8")
    result = doctor("--no-torch", tmp_path=tmp_path, FSDP_SKILL_ROOT=str(data))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"problem  data: {data} ($FSDP_SKILL_ROOT) lacks references, assets/patterns" in result.stdout
    assert "-> point FSDP_SKILL_ROOT at" in result.stdout and "1 problem(s)" in result.stdout


def test_a_corrupt_index_is_a_problem_naming_the_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for item in ("references", "assets"):
        shutil.copytree(ROOT / item, data / item)
    shutil.copy(ROOT / "SKILL.md", data / "SKILL.md")
    (data / "references" / "index.sqlite").write_bytes(b"not a database" * 100)
    result = doctor("--json", "--no-torch", tmp_path=tmp_path, FSDP_SKILL_ROOT=str(data))
    assert result.returncode == 1
    index = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "index")
    assert index["status"] == "problem" and "index.sqlite" in index["detail"] and index["fix"]


@pytest.mark.parametrize(
    ("raises", "status", "said"),
    [("ModuleNotFoundError(\"No module named 'torch'\")", "note", "not installed in"),
     ("OSError('libtorch_cpu.so: cannot open shared object file')", "problem", "`import torch` fails in")],
    ids=["missing", "broken"],
)
def test_torch_missing_or_broken_is_reported_and_doctor_itself_never_needs_it(
    tmp_path: Path, raises: str, status: str, said: str
) -> None:
    shadow = tmp_path / "shadow" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(f"raise {raises}\n", encoding="utf-8")
    result = doctor("--json", tmp_path=tmp_path, PYTHONPATH=str(shadow.parent))
    torch = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "torch")
    assert torch["status"] == status and said in torch["detail"], torch
    assert "pip install torch" in torch["fix"]
    assert result.returncode == (1 if status == "problem" else 0)
    assert statuses(result)["MCP server"] == "ok"  # the rest ran without torch

"""`fsdp-skill verify` runs the catalog's patterns after the examples: selection flags, rows, report.

The real patterns are each run once by tests/test_patterns.py (through `run_pattern`); here a fake
repository holds a catalog with tiny one-rank pattern scripts, so the CLI wiring is checked in seconds.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from fsdp_skill.verify.catalog_patterns import PatternSpec, patterns_from_catalog, run_one
from fsdp_skill.verify.cli import main
from fsdp_skill.verify.examples import CatalogReadError
from fsdp_skill.verify.report import build_report, render_markdown, write_report

HEADER = '"""\nname: {name}\ntitle: {name}\nworld_size: 1\n\nA tiny pattern for the wiring tests.\n"""\n'
SCRIPTS = {
    "tiny-ok": "import os\nprint('tiny ok on rank', os.environ['RANK'])\n",
    "tiny-boom": "raise ValueError('boom in a pattern')\n",
}
EXAMPLE = {
    "id": "torch.distributed.get_rank#1",
    "world_size": 1,
    "steps": [{"source": "x = 1 + 1", "expected": None, "expected_by_rank": {}, "line": 1}],
}


@pytest.fixture
def fake_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository root with references/catalog.json (one example, two patterns) and the pattern files."""
    folder = tmp_path / "assets" / "patterns"
    folder.mkdir(parents=True)
    patterns = []
    for name, body in SCRIPTS.items():
        file = f"assets/patterns/{name.replace('-', '_')}.py"
        (tmp_path / file).write_text(HEADER.format(name=name) + body)
        patterns.append({"name": name, "file": file, "world_size": 1, "requires": [], "title": name, "summary": "s"})
    (tmp_path / "references").mkdir()
    catalog = {"torch_version": "2.13.0", "examples": [EXAMPLE], "patterns": patterns}
    (tmp_path / "references" / "catalog.json").write_text(json.dumps(catalog))
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tmp_path))
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR"):  # this test process is not a torchrun rank
        monkeypatch.delenv(key, raising=False)
    return tmp_path


@pytest.mark.torch
@pytest.mark.timeout(180)
def test_k_selects_one_pattern_through_the_cli_and_its_row_reaches_the_json_and_the_report(
    fake_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = fake_repo / "out.json"
    assert main(["-k", "tiny-ok", "--json", str(out), "--write-report"]) == 0
    rows = json.loads(out.read_text())["results"]
    assert len(rows) == 1
    row = rows[0]
    assert {k: row[k] for k in ("name", "backend", "world_size", "status", "reason", "warnings")} == {
        "name": "pattern:tiny-ok",
        "backend": "gloo",
        "world_size": 1,
        "status": "passed",
        "reason": None,
        "warnings": [],
    }
    assert isinstance(row["seconds"], float) and row["seconds"] > 0
    stdout = capsys.readouterr().out
    assert "verify: patterns: 1 passed, 0 skipped, 0 failed (1 patterns)" in stdout
    assert "verify: examples:" not in stdout  # -k matched no example, so none ran
    md = (fake_repo / "references" / "verification.md").read_text()
    assert "## Patterns" in md and "| `tiny-ok` | gloo | 1 | passed |  |" in md
    committed = json.loads((fake_repo / "references" / "verification.json").read_text())["results"]
    assert [r["name"] for r in committed] == ["pattern:tiny-ok"] and committed[0]["seconds"] == float(
        round(row["seconds"])
    )


@pytest.mark.torch
@pytest.mark.timeout(180)
def test_a_failing_pattern_selected_by_id_fails_the_run_with_its_exception_and_output(
    fake_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = fake_repo / "out.json"
    assert main(["--id", "pattern:tiny-boom", "--json", str(out)]) == 1
    (row,) = json.loads(out.read_text())["results"]
    assert (row["name"], row["status"], row["reason"]) == (
        "pattern:tiny-boom",
        "failed",
        "ValueError: boom in a pattern",
    )
    assert "boom in a pattern" in row["output"]
    stdout = capsys.readouterr().out
    assert "verify: patterns: 0 passed, 0 skipped, 1 failed (1 patterns)" in stdout
    assert "-- output (tail):" in stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--no-patterns", "-k", "tiny"], "no example id contains 'tiny'"),
        (["--only-patterns", "-k", "get_rank"], "no pattern id contains 'get_rank'"),
        (
            ["--id", "pattern:nope"],
            "no pattern with id 'pattern:nope' in the catalog (patterns: pattern:tiny-ok, pattern:tiny-boom)",
        ),
        (["--only-patterns", "--id", "torch.distributed.get_rank#1"], "--only-patterns runs no examples"),
        (["--no-patterns", "--id", "pattern:tiny-ok"], "--no-patterns runs no patterns"),
    ],
)
def test_pattern_selection_mistakes_are_one_line_errors_with_exit_2(
    fake_repo: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_under_torchrun_only_patterns_is_refused_because_each_pattern_starts_its_own_torchrun(
    fake_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(key, value)
    assert main(["--only-patterns"]) == 2
    assert "each pattern starts its own torchrun" in capsys.readouterr().err


def test_a_malformed_patterns_entry_in_the_catalog_is_a_one_line_error(
    fake_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fake_repo / "references" / "catalog.json"
    catalog = json.loads(path.read_text())
    catalog["patterns"][0]["world_size"] = "two"
    path.write_text(json.dumps(catalog))
    assert main(["--only-patterns"]) == 2
    assert (
        "pattern 'tiny-ok' has world_size 'two', not a positive integer; regenerate the catalog"
        in capsys.readouterr().err
    )


def test_a_catalog_without_patterns_has_none_and_relative_files_resolve_against_the_root(tmp_path: Path) -> None:
    assert patterns_from_catalog({"examples": []}, tmp_path) == []
    (spec,) = patterns_from_catalog(
        {"patterns": [{"name": "a", "file": "assets/patterns/a.py", "world_size": 2}]}, tmp_path
    )
    assert (spec.id, spec.path, spec.requires) == ("pattern:a", tmp_path / "assets/patterns/a.py", ())
    with pytest.raises(CatalogReadError, match="pattern name 'a' appears twice"):
        patterns_from_catalog({"patterns": [{"name": "a", "file": "x.py", "world_size": 1}] * 2}, tmp_path)


def test_a_pattern_file_missing_from_disk_fails_without_launching_anything(tmp_path: Path) -> None:
    spec = PatternSpec(
        name="gone", file="assets/patterns/gone.py", path=tmp_path / "gone.py", world_size=2, requires=()
    )
    row = run_one(spec, "gloo", 10.0)
    assert row["status"] == "failed" and "assets/patterns/gone.py does not exist" in row["reason"]


ROWS = [
    {
        "name": "b#1",
        "backend": "gloo",
        "world_size": 2,
        "status": "passed",
        "reason": None,
        "seconds": 0.01,
        "warnings": [],
    },
    {
        "name": "pattern:hsdp",
        "backend": "gloo",
        "world_size": 4,
        "status": "passed",
        "reason": None,
        "seconds": 21.4,
        "warnings": [],
    },
    {
        "name": "pattern:offload",
        "backend": "gloo",
        "world_size": 1,
        "status": "skipped",
        "reason": "needs CUDA",
        "seconds": 0.0,
        "warnings": [],
    },
]


def test_the_report_has_a_separate_patterns_table_with_its_own_summary() -> None:
    md = render_markdown(build_report(ROWS, "2.13.0", datetime.date(2025, 1, 2)))
    examples, patterns = md.split("## Patterns")
    assert (
        "Summary of the examples: 1 passed, 0 passed-with-stand-ins, 0 doc-bug, 0 checked, 0 skipped, 0 failed "
        "(1 runs)."
        in examples
    )
    assert "pattern:" not in examples
    assert "Summary: 1 passed, 1 skipped, 0 failed (2 runs)." in patterns
    assert (
        "| `hsdp` | gloo | 4 | passed |  |" in patterns
        and "| `offload` | gloo | 1 | skipped | needs CUDA |" in patterns
    )
    assert "b#1" not in patterns


def test_a_run_without_patterns_keeps_their_rows_in_the_committed_report(tmp_path: Path) -> None:
    day = datetime.date(2025, 1, 2)
    known = {"b#1", "pattern:hsdp", "pattern:offload"}
    write_report(
        build_report(ROWS, "2.13.0", day), tmp_path / "v.json", tmp_path / "v.md", known, documented_sizes=True
    )
    merged = write_report(
        build_report(ROWS[:1], "2.13.0", day), tmp_path / "v.json", tmp_path / "v.md", known, documented_sizes=True
    )
    assert [r["name"] for r in merged["results"]] == ["b#1", "pattern:hsdp", "pattern:offload"]
    assert merged["results"][1]["seconds"] == 21.0

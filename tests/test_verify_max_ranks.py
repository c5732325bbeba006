"""`--max-ranks N`: on a machine with fewer GPUs than an item's ranks (NCCL refuses two ranks on one GPU),
run it at N ranks instead of skipping it, say so in its row, and never call a failure there the docs' bug;
and the NCCL report that folds a GPU pass into references/verification-nccl.{json,md}."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsdp_skill.serve.verification import VerificationReport, summarize
from fsdp_skill.verify.catalog_patterns import PatternSpec, run_one
from fsdp_skill.verify.cli import main as verify_main
from fsdp_skill.verify.compare import Verdict, _skip_for_error
from fsdp_skill.verify.examples import ExampleSpec
from fsdp_skill.verify.nccl_report import NcclReportError, combine, render_markdown
from fsdp_skill.verify.patterns import fitted_reason, fitted_size
from fsdp_skill.verify.runner import RunOptions, _at_other_size

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "references" / "catalog.json"


def test_an_item_stated_for_more_ranks_runs_at_the_cap_unless_it_needs_every_stated_rank() -> None:
    assert fitted_size(2, (), None) == (2, None)
    assert fitted_size(2, (), 4) == (2, None)
    assert fitted_size(4, ("cuda",), 1) == (1, None)
    size, skip = fitted_size(4, ("stated-ranks",), 2)
    assert size == 4 and skip == "needs all 4 of its stated ranks (requires: stated-ranks), and --max-ranks is 2"
    assert RunOptions(max_ranks=1).fitted(2) == 1 and RunOptions().fitted(2) == 2


def test_a_row_run_below_its_stated_size_says_so_before_its_own_reason() -> None:
    assert fitted_reason(2, 2, "passed", None) is None
    assert fitted_reason(1, 2, "passed", None) == "ran at 1 of its 2 stated ranks (--max-ranks 1)"
    assert fitted_reason(1, 2, "failed", "AssertionError: x") == "ran at 1 of its 2 stated ranks (--max-ranks 1): " \
        "AssertionError: x"
    assert fitted_reason(1, 2, "skipped", "needs CUDA") == "needs CUDA"


def test_a_pattern_that_needs_its_stated_ranks_is_skipped_under_max_ranks_without_launching(tmp_path: Path) -> None:
    script = tmp_path / "p.py"
    script.write_text("raise SystemExit('launched')\n")
    spec = PatternSpec(name="two-ranks", file="p.py", path=script, world_size=2, requires=("stated-ranks",))
    row = run_one(spec, "gloo", 30.0, max_ranks=1)
    assert row["status"] == "skipped" and row["world_size"] == 2 and "requires: stated-ranks" in row["reason"]


def test_a_gloo_only_pattern_is_skipped_on_nccl_without_launching(tmp_path: Path) -> None:
    script = tmp_path / "p.py"
    script.write_text("raise SystemExit('launched')\n")
    spec = PatternSpec(name="cpu-path", file="p.py", path=script, world_size=1, requires=("gloo",))
    row = run_one(spec, "nccl", 30.0)
    assert row["status"] == "skipped" and row["reason"].startswith("written for gloo on CPU")


def _spec(world_size: int) -> ExampleSpec:
    return ExampleSpec(id="x#1", symbol="torch.distributed.all_reduce", units=(), world_size=world_size,
                       device="cpu", requires=(), skip=None, source=None, line=None)


def test_an_exception_at_fewer_ranks_than_documented_is_a_skip_not_a_doc_bug() -> None:
    raised = Verdict("doc-bug", "the documented code raises ValueError on every rank at line 3: size 2", raised=True)
    verdict = _at_other_size(raised, _spec(2), 1)
    assert verdict.status == "skipped"
    assert verdict.reason.startswith("raised at world size 1, but it is documented for 2 rank(s)")
    static = Verdict("doc-bug", "the documented code is not valid Python: line 4")
    assert _at_other_size(static, _spec(2), 1).status == "doc-bug"  # not a matter of ranks
    at_size = Verdict("doc-bug", "raises", raised=True)
    assert _at_other_size(at_size, _spec(2), 2).status == "doc-bug"


def test_cpu_tensors_on_an_nccl_only_group_are_a_skip_that_says_so() -> None:
    error = {"type": "RuntimeError", "message": "No backend type associated with device type cpu", "line": 3}
    verdict = _skip_for_error(_spec(1), {0: error}, "nccl")
    assert verdict is not None and verdict.status == "skipped"
    assert verdict.reason.startswith("written with CPU tensors, which an NCCL-only group does not take")
    assert _skip_for_error(_spec(1), {0: error}, "gloo") is None


def test_max_ranks_out_of_range_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert verify_main(["--catalog", str(CATALOG), "--max-ranks", "0", "--no-patterns", "-k", "all_reduce"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-ranks must be between 1 and 8, got 0" in err


@pytest.mark.torch
@pytest.mark.timeout(240)
def test_a_two_rank_pattern_runs_at_one_rank_under_max_ranks_and_its_row_says_so(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    # activation-checkpointing asserts nothing about communication (gradient-accumulation counts reduce-scatters,
    # which FSDP2 does not issue on one rank), so it passes on fewer ranks too.
    code = verify_main(["--catalog", str(CATALOG), "--id", "pattern:activation-checkpointing", "--max-ranks", "1",
                        "--json", str(report)])
    row = json.loads(report.read_text())["results"][0]
    assert code == 0 and row["status"] == "passed" and row["world_size"] == 1 and row["stated_world_size"] == 2
    assert row["reason"] == "ran at 1 of its 2 stated ranks (--max-ranks 1)"


# ------------------------------------------------------------------------------------------ NCCL report


def _pass_folder(tmp_path: Path, parts: dict[str, list[dict[str, object]]]) -> Path:
    environment = {"date": "2026-11-30", "torch": "2.11.0+cu130", "cuda": "13.0", "nccl": "2.28.9",
                   "gpus": ["NVIDIA H200"], "capability": "9.0", "python": "3.12.3"}
    (tmp_path / "environment.json").write_text(json.dumps(environment))
    for part, rows in parts.items():
        (tmp_path / f"{part}.json").write_text(json.dumps({"torch_version": "2.11.0", "results": rows}))
    probe = {"question": "two ranks on GPU 0?", "formed": False, "timed_out": False,
             "key_lines": ["x NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60"]}
    (tmp_path / "probe.json").write_text(json.dumps(probe))
    return tmp_path


def _row(name: str, status: str, reason: str | None = None) -> dict[str, object]:
    return {"name": name, "backend": "nccl", "world_size": 1, "status": status, "reason": reason,
            "seconds": 1.4, "warnings": []}


def test_the_nccl_report_folds_the_parts_and_names_a_missing_one(tmp_path: Path) -> None:
    folder = _pass_folder(tmp_path, {"patterns": [_row("pattern:b", "passed"), _row("pattern:a", "failed", "boom")],
                                     "claims": [_row("claim:c", "passed")]})
    report = combine(folder, notes=["fixed a after the run"])
    assert report["torch_version"] == "2.11.0" and report["date"] == "2026-11-30"
    assert [r["name"] for r in report["results"]] == ["claim:c", "pattern:a", "pattern:b"]
    assert report["results"][0]["seconds"] == 1.0  # rounded like the committed CPU report
    assert report["parts"]["examples"].startswith("missing")
    text = render_markdown({**report, "pinned_torch": "2.13.0"})
    assert "| patterns | 1 | 0 | 0 | 0 | 0 | 1 | 2 |" in text and "NCCL refused: `Duplicate GPU detected" in text
    assert "pinned to torch 2.13.0" in text and "- fixed a after the run" in text
    assert "examples: missing" in text


def test_the_nccl_report_tallies_the_claim_mutants_and_lists_survivors_first(tmp_path: Path) -> None:
    claims = [_row("claim:c", "passed"), _row("mutant:claim:c:b-killed", "killed", "AssertionError: 0"),
              _row("mutant:claim:c:a-survived", "survived", "the mutant's run passed"),
              _row("mutant:claim:d:gpu", "skipped", "needs CUDA")]
    report = combine(_pass_folder(tmp_path, {"claims": claims}))
    text = render_markdown({**report, "pinned_torch": "2.11.0"})
    assert "| mutants | killed | survived | skipped | failed | total |" in text
    assert "| claim checks | 1 | 1 | 1 | 0 | 3 |" in text and "**1 survived**" in text
    assert "| claim checks | 1 | 0 | 0 | 0 | 0 | 0 | 1 |" in text  # the checks' own row counts no mutant
    mutants = text.split("## Mutants", 1)[1]
    order = [mutants.index(f"`claim:{n}`") for n in ("c:a-survived", "c:b-killed", "d:gpu")]
    assert order == sorted(order), mutants
    assert "`mutant:" not in text.split("## Mutants", 1)[0], "mutant rows belong in their own table"


def test_a_folder_without_the_pass_environment_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NcclReportError, match="environment.json is missing"):
        combine(tmp_path)


def test_the_server_lists_nccl_rows_beside_gloo_rows_naming_each_torch(tmp_path: Path) -> None:
    gloo, nccl = tmp_path / "verification.json", tmp_path / "verification-nccl.json"
    gloo.write_text(json.dumps({"torch_version": "2.13.0", "results": [{**_row("pattern:a", "passed"),
                                                                         "backend": "gloo", "world_size": 2}]}))
    report = VerificationReport(gloo, nccl)
    assert summarize(report.statuses("pattern:a")) == "passed (gloo, 2 ranks)"  # no NCCL file yet
    nccl.write_text(json.dumps({"torch_version": "2.11.0", "results": [_row("pattern:a", "failed", "boom")]}))
    assert summarize(report.statuses("pattern:a")) == (
        "passed (gloo, 2 ranks, torch 2.13.0); failed (nccl, 1 rank, torch 2.11.0: boom)"
    )


def test_a_reason_quoting_a_bracketed_path_prints_as_text_not_markup(capsys: pytest.CaptureFixture[str]) -> None:
    from fsdp_skill.verify.cli import print_table

    reason = "RuntimeError: [/__w/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed"
    print_table([{**_row("mutant:claim:x:y", "killed", reason), "world_size": 2}], "mutant")
    assert "pair.cc:553" in capsys.readouterr().out

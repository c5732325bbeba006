"""Mutants: the header lines that make a check's or pattern's claim false, applied to a scratch copy and run
as the original runs; validate's rule that every check and pattern has one; the committed report's rows.

The fast subset of the repository's own mutants runs here on every change (a few seconds each); the whole
set runs in `fsdp-skill verify --write-report` and its rows are held to the files by the last tests.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from fsdp_skill.cli.validate import validate
from fsdp_skill.verify.claims import check_files, checks_dir, read_check
from fsdp_skill.verify.cli import main
from fsdp_skill.verify.mutants import (
    Mutant,
    MutantError,
    MutantTarget,
    apply_mutant,
    claim_target,
    classify,
    mutant_problems,
    parse_mutant,
    read_mutants,
    run_mutant,
    run_mutants,
    source_sha256,
)
from fsdp_skill.verify.patterns import pattern_files, read_header

ROOT = Path(__file__).resolve().parents[1]
CHECK = '''"""
name: tiny-claim
claim: Two ones make two.
backs: pitfalls
world_size: 1
mutant: three: `total = one + one` -> `total = one + one + one`

The sum of two ones, asserted.
"""
one = 1
total = one + one
assert total == 2, total
'''


def _write(tmp_path: Path, text: str, name: str = "tiny.py") -> Path:
    folder = tmp_path / "checks"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def test_a_mutant_line_names_its_edits_and_they_apply_outside_the_header(tmp_path: Path) -> None:
    path = _write(tmp_path, CHECK)
    [mutant] = read_mutants(path)
    assert mutant.name == "three" and mutant.line == 6 and len(mutant.edits) == 1
    mutated = apply_mutant(path, CHECK, mutant)
    assert "total = one + one + one\n" in mutated
    assert mutated.count("`total = one + one`") == 1  # the header line that quotes it is left alone


def test_several_edits_apply_in_order_and_new_text_may_be_empty(tmp_path: Path) -> None:
    text = CHECK.replace(
        "mutant: three: `total = one + one` -> `total = one + one + one`",
        "mutant: gone: `one = 1` -> `one = 2`; `assert total == 2, total` -> ``",
    )
    path = _write(tmp_path, text)
    mutated = apply_mutant(path, text, read_mutants(path)[0])
    assert "one = 2\n" in mutated and "assert total" not in mutated.split('"""', 2)[2]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("mutant: three", "is not 'NAME: `OLD` -> `NEW`'"),
        ("mutant: Three: `a` -> `b`", "is not 'NAME: `OLD` -> `NEW`'"),
        ("mutant: three: a -> b", "edit 'a -> b' is not '`OLD` -> `NEW`'"),
        ("mutant: three: `` -> `b`", "an edit's OLD text is empty"),
    ],
)
def test_a_malformed_mutant_line_is_refused_naming_its_line(tmp_path: Path, line: str, message: str) -> None:
    text = CHECK.replace("mutant: three: `total = one + one` -> `total = one + one + one`", line)
    with pytest.raises(MutantError, match=message) as caught:
        read_mutants(_write(tmp_path, text))
    assert caught.value.line == 6


def test_an_edit_must_match_exactly_once_and_the_result_must_parse(tmp_path: Path) -> None:
    cases = {
        "`one` -> `two`": "occurs 4 times (lines 8, 10, 11)",
        "`nowhere` -> `x`": "does not occur",
        "`assert total == 2, total` -> `assert total ==`": "does not parse",
    }
    for edit, message in cases.items():
        text = CHECK.replace("`total = one + one` -> `total = one + one + one`", edit)
        path = _write(tmp_path, text)
        with pytest.raises(MutantError, match=re.escape(message)):
            apply_mutant(path, text, read_mutants(path)[0])
        assert message in mutant_problems(path)[0][1]


def test_two_mutants_of_one_file_may_not_share_a_name(tmp_path: Path) -> None:
    line = "mutant: three: `total = one + one` -> `total = one + one + one`"
    with pytest.raises(MutantError, match="used twice"):
        read_mutants(_write(tmp_path, CHECK.replace(line, line + "\n" + line)))


def test_validate_rejects_a_check_and_a_pattern_without_a_mutant(tmp_path: Path) -> None:
    (tmp_path / "assets" / "checks").mkdir(parents=True)
    (tmp_path / "assets" / "patterns").mkdir(parents=True)
    (tmp_path / "SKILL.md").write_text("---\nname: pytorch-fsdp\ndescription: Tests a validator.\n---\n\n# T\n")
    no_mutant = "\n".join(line for line in CHECK.splitlines() if not line.startswith("mutant:")) + "\n"
    (tmp_path / "assets" / "checks" / "tiny.py").write_text(no_mutant)
    (tmp_path / "assets" / "patterns" / "demo.py").write_text(
        '"""\nname: demo\ntitle: Demo\nworld_size: 1\n\nA demo pattern.\n"""\nprint(1)\n'
    )
    problems = [str(p) for p in validate(tmp_path).problems]
    assert any(p.startswith("assets/checks/tiny.py:1: declares no mutant") for p in problems), problems
    assert any(p.startswith("assets/patterns/demo.py:1: declares no mutant") for p in problems), problems


def _fake(status: str, reason: str | None = None, output: str = "") -> MutantTarget:
    def run(copy: Path) -> dict[str, Any]:
        assert "\ntotal = one + one + one\n" in copy.read_text()  # the mutated copy is what runs
        return {"status": status, "reason": reason, "seconds": 1.5, "output": output,
                "backend": "gloo", "world_size": 1}
    return MutantTarget("claim:tiny-claim", Path(), run)


def test_a_failing_run_kills_a_passing_run_survives_and_a_name_error_is_a_broken_script(tmp_path: Path) -> None:
    path = _write(tmp_path, CHECK)
    mutant = read_mutants(path)[0]
    cases = [
        (("failed", "AssertionError: 3"), "killed", "AssertionError: 3"),
        (("passed", None), "survived", "the check does not test its claim"),
        (("failed", "exit code 1", "[rank0]: NameError: name 'x' is not defined\n"), "failed", "broke the script"),
        (("skipped", "needs 2 CUDA GPU(s)"), "skipped", "needs 2 CUDA GPU(s)"),
    ]
    for args, status, reason in cases:
        target = MutantTarget("claim:tiny-claim", path, _fake(*args).run)
        row = run_mutant(target, mutant)
        assert row["name"] == "mutant:claim:tiny-claim:three"
        assert row["status"] == status and reason in (row["reason"] or ""), row
        assert row["source_sha256"] == source_sha256(path)


def test_a_mutant_of_an_original_that_failed_or_was_skipped_in_this_run_is_skipped(tmp_path: Path) -> None:
    path = _write(tmp_path, CHECK)
    target = MutantTarget("claim:tiny-claim", path, _fake("failed", "AssertionError").run)
    original = {"name": "claim:tiny-claim", "status": "failed", "backend": "gloo", "world_size": 1}
    assert run_mutant(target, read_mutants(path)[0], original)["status"] == "skipped"
    original = {**original, "status": "skipped", "reason": "needs CUDA"}
    row = run_mutant(target, read_mutants(path)[0], original)
    assert (row["status"], row["reason"]) == ("skipped", "needs CUDA")


def test_classify_reads_the_failure_of_the_run() -> None:
    timed_out = {"status": "failed", "reason": "timed out after 120 s; killed torchrun and its ranks"}
    status, reason = classify(timed_out)
    assert status == "failed" and "a timeout is not the failure the mutant names (AssertionError)" in (reason or "")
    assert classify({"status": "failed", "reason": "ModuleNotFoundError: No module named 'x'"})[0] == "failed"


def test_a_mutant_is_killed_only_by_the_failure_its_line_names() -> None:
    assertion = {"status": "failed", "reason": "AssertionError: 3"}
    runtime = {"status": "failed", "reason": "RuntimeError: expected scalar type BFloat16 but found Float"}
    peer = {"status": "failed", "reason": "RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer"}
    abort = {"status": "failed", "reason": "rank 1 killed by SIGABRT (terminate called without an active exception)"}
    assert classify(assertion) == ("killed", "AssertionError: 3")
    status, reason = classify(runtime)
    assert status == "failed" and "add `=> RuntimeError`" in (reason or "")
    assert classify(runtime, ("RuntimeError",))[0] == "killed"
    assert classify(peer)[0] == "failed"  # a disconnect is never what a check asserts
    assert classify(assertion, ("RuntimeError",))[0] == "failed"
    assert classify(abort, ("SIGABRT",))[0] == "killed"
    assert classify({"status": "failed", "reason": "torch.distributed.DistBackendError: x"}, ("DistBackendError",))[0] \
        == "killed"


def test_a_mutant_line_may_name_its_expected_failure(tmp_path: Path) -> None:
    line = "three: `one + one` -> `one + one + one` => RuntimeError | TypeError"
    mutant = parse_mutant(tmp_path / "x.py", 3, line)
    assert mutant.expects == ("RuntimeError", "TypeError") and mutant.edits[0].new == "one + one + one"
    assert parse_mutant(tmp_path / "x.py", 3, "three: `a` -> `b`").expects == ("AssertionError",)
    assert parse_mutant(tmp_path / "x.py", 3, "three: `a => b` -> `c`").edits[0].old == "a => b"


@pytest.mark.torch
@pytest.mark.timeout(300)
def test_a_real_check_kills_its_mutant_and_a_check_that_tests_nothing_lets_it_survive(tmp_path: Path) -> None:
    good = _write(tmp_path, CHECK)
    weak = _write(tmp_path, CHECK.replace("name: tiny-claim", "name: weak-claim").replace(
        "assert total == 2, total", "assert total > 0, total"), "weak.py")
    (tmp_path / "checks" / "_helper.py").write_text("VALUE = 1\n")  # helpers travel with the copy
    rows = run_mutants([claim_target(read_check(good), 120.0), claim_target(read_check(weak), 120.0)])
    assert [(r["name"], r["status"]) for r in rows] == [
        ("mutant:claim:tiny-claim:three", "killed"), ("mutant:claim:weak-claim:three", "survived")]
    assert rows[0]["reason"] == "AssertionError: 3"
    assert {p.name for p in (tmp_path / "checks").iterdir()} == {"tiny.py", "weak.py", "_helper.py"}


@pytest.fixture
def fake_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "assets" / "checks"
    folder.mkdir(parents=True)
    (folder / "tiny.py").write_text(CHECK)
    (tmp_path / "references").mkdir()
    (tmp_path / "references" / "catalog.json").write_text(
        json.dumps({"torch_version": "2.13.0", "examples": [], "patterns": []})
    )
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tmp_path))
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(key, raising=False)
    return tmp_path


@pytest.mark.torch
@pytest.mark.timeout(240)
def test_only_mutants_runs_just_the_mutants_and_writes_their_rows(
    fake_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = fake_repo / "out.json"
    assert main(["--only-mutants", "-k", "three", "--json", str(out), "--write-report"]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [(r["name"], r["status"]) for r in rows] == [("mutant:claim:tiny-claim:three", "killed")]
    assert "verify: mutants: 1 killed, 0 survived, 0 skipped, 0 failed (1 mutants)" in capsys.readouterr().out
    md = (fake_repo / "references" / "verification.md").read_text()
    assert "| `claim:tiny-claim:three` | gloo | 1 | killed | AssertionError: 3 |" in md


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only-mutants", "--id", "mutant:claim:tiny-claim:nope"], "no mutant with id"),
        (["--only-mutants", "-k", "zzz"], "no mutant id matches"),
        (["--id", "mutant:claim:tiny-claim:three"], "run mutants with --only-mutants"),
        (["--only-mutants", "--only-claims"], "--only-mutants runs the mutants of every"),
    ],
)
def test_mutant_selection_mistakes_are_one_line_errors(
    fake_repo: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


# ----------------------------------------------------------------------- the repository's own checks


def _targets() -> list[Path]:
    return check_files(checks_dir(ROOT)) + pattern_files(ROOT / "assets" / "patterns")


def _row_name(path: Path) -> str:
    if path.parent.name == "checks":
        return read_check(path).id
    return "pattern:" + read_header(path).name


def _committed() -> dict[str, dict[str, Any]]:
    report = json.loads((ROOT / "references" / "verification.json").read_text())
    # A GPU-only check (and its mutants) is reported on nccl, skipped there without GPUs; the rest on gloo.
    rows = {r["name"]: r for r in report["results"] if r["backend"] != "gloo"}
    rows.update({r["name"]: r for r in report["results"] if r["backend"] == "gloo"})
    return rows


@pytest.mark.parametrize("path", _targets(), ids=lambda p: p.name)
def test_every_check_and_pattern_declares_a_mutant_that_applies(path: Path) -> None:
    assert mutant_problems(path) == []


@pytest.mark.parametrize("path", _targets(), ids=lambda p: p.name)
def test_the_committed_report_holds_a_killed_row_for_every_mutant_of_the_file_as_it_is(path: Path) -> None:
    """Edit a check or a pattern and this fails until its mutants are rerun: `fsdp-skill verify --only-mutants
    -k NAME --write-report` (a GPU-only one is skipped here, and says so)."""
    rows = _committed()
    for mutant in read_mutants(path):
        name = f"mutant:{_row_name(path)}:{mutant.name}"
        assert name in rows, f"{name} has no row in references/verification.json"
        row = rows[name]
        assert row["status"] in ("killed", "skipped"), row
        assert row.get("source_sha256") == source_sha256(path), f"{name}: the report predates the file's last edit"


def _fast_subset(count: int = 3) -> list[tuple[Path, Mutant]]:
    """The quickest killed claim-check mutants in the committed report (one per check): a few seconds each."""
    rows = _committed()
    picked: list[tuple[float, str, Path, Mutant]] = []
    for path in check_files(checks_dir(ROOT)):
        check = read_check(path)
        if check.requires:
            continue
        for mutant in read_mutants(path):
            row = rows.get(f"mutant:{check.id}:{mutant.name}")
            if row and row["status"] == "killed":
                picked.append((row["seconds"], check.name, path, mutant))
                break
    return [(p, m) for _, _, p, m in sorted(picked)[:count]]


@pytest.mark.torch
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("path", "mutant"), _fast_subset(), ids=lambda v: getattr(v, "name", None))
def test_the_fast_subset_of_the_repository_mutants_is_killed_on_this_torch(path: Path, mutant: Mutant) -> None:
    row = run_mutant(claim_target(read_check(path), 120.0), mutant)
    assert row["status"] == "killed", row

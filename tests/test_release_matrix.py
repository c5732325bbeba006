"""The release matrix (verify.releases, `fsdp-skill releases`): every claim check and pattern per torch release,
resumable by file digest, with the committed matrix held to what the issue promises (10 releases, a reason for
every row that did not pass, min_torch from the runs). Runs here go through an injected runner: no venv, no pip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fsdp_skill.cli.main import main
from fsdp_skill.cli.releases import matrix_releases
from fsdp_skill.verify import releases
from fsdp_skill.verify.patterns import read_header

ROOT = Path(__file__).resolve().parents[1]
MATRIX = json.loads((ROOT / releases.MATRIX_JSON).read_text(encoding="utf-8"))
WANTED = ["2.6.0", "2.7.1", "2.8.0", "2.9.1", "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0"]


def _checkout(tmp_path: Path) -> Path:
    """A checkout with two checks and one pattern (copies of the real ones) and no matrix yet."""
    root = tmp_path / "repo"
    (root / "assets" / "checks").mkdir(parents=True)
    (root / "assets" / "patterns").mkdir(parents=True)
    (root / "references").mkdir()
    for name in ("_dist.py", "root_only_shard.py", "tied_weights.py"):
        shutil.copy(ROOT / "assets" / "checks" / name, root / "assets" / "checks" / name)
    shutil.copy(ROOT / "assets" / "patterns" / "fsdp2_training.py", root / "assets" / "patterns")
    return root


class FakeRunner:
    """Stands in for installing a release: every target passes, except `fail` ids; records what it was asked."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.fail = fail

    def __call__(self, root: Path, release: str, todo: list[releases.Target], progress: object) -> tuple[dict, list]:
        self.calls.append((release, [t.id for t in todo]))
        record = {"release": release, "build": f"{release}+cpu (CPU build; no GPU on this host)", "python": "3.11",
                  "date": "2026-12-04", "install_s": 1.0, "run_s": 2.0, "venv_bytes": 10, "ran": len(todo)}
        rows = [releases._row(t, release, {"status": "failed" if t.id in self.fail else "passed",
                                           "reason": "AssertionError: boom" if t.id in self.fail else None})
                for t in todo]
        return record, rows


def test_a_finished_release_is_not_run_again_and_an_edited_check_reruns_only_its_rows(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    runner = FakeRunner()
    releases.run_matrix(root, ["2.14.1", "2.15.0"], runner=runner, progress=lambda _: None)
    assert [release for release, _ in runner.calls] == ["2.14.1", "2.15.0"]
    assert len(runner.calls[0][1]) == 3
    releases.run_matrix(root, ["2.14.1", "2.15.0"], runner=runner, progress=lambda _: None)
    assert len(runner.calls) == 2  # resumed: both releases current, nothing installed
    check = root / "assets" / "checks" / "tied_weights.py"
    check.write_text(check.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    releases.run_matrix(root, ["2.14.1", "2.15.0"], runner=runner, progress=lambda _: None)
    assert runner.calls[2:] == [("2.14.1", ["claim:tied-weights"]), ("2.15.0", ["claim:tied-weights"])]
    matrix = releases.read_matrix(root)
    assert len(matrix["rows"]) == 6 and {r["release"] for r in matrix["releases"]} == {"2.14.1", "2.15.0"}


def test_a_shared_helper_edit_makes_the_rows_of_its_importers_stale_and_only_theirs(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    runner = FakeRunner()
    releases.run_matrix(root, ["2.15.0"], runner=runner, progress=lambda _: None)
    (root / "assets" / "checks" / "_unused.py").write_text("X = 1\n", encoding="utf-8")  # no check imports it
    releases.run_matrix(root, ["2.15.0"], runner=runner, progress=lambda _: None)
    assert len(runner.calls) == 1
    helper = root / "assets" / "checks" / "_dist.py"
    helper.write_text(helper.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    releases.run_matrix(root, ["2.15.0"], runner=runner, progress=lambda _: None)
    assert sorted(runner.calls[1][1]) == ["claim:root-only-shard", "claim:tied-weights"]


def test_the_json_view_has_exactly_the_documented_keys_and_rows_of_deleted_checks_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _checkout(tmp_path)
    releases.run_matrix(root, ["2.15.0"], runner=FakeRunner(fail=("claim:tied-weights",)), progress=lambda _: None)
    (root / "assets" / "checks" / "root_only_shard.py").unlink()
    releases.run_matrix(root, ["2.14.1"], runner=FakeRunner(), progress=lambda _: None)
    view = releases.public_view(releases.read_matrix(root))
    assert set(view) == {"releases", "rows"}
    assert all(set(r) == {"release", "build", "python", "date"} for r in view["releases"])
    assert all(set(r) == {"id", "release", "status", "reason"} for r in view["rows"])
    assert "claim:root-only-shard" not in {r["id"] for r in view["rows"]}
    failed = [r for r in view["rows"] if r["status"] == "failed"]
    assert failed == [{"id": "claim:tied-weights", "release": "2.15.0", "status": "failed",
                       "reason": "AssertionError: boom"}]
    markdown = (root / releases.MATRIX_MD).read_text(encoding="utf-8")
    assert "`claim:tied-weights` on 2.15.0: failed: AssertionError: boom" in markdown


def test_prune_drops_the_rows_of_an_edited_file_and_a_release_left_empty(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    releases.run_matrix(root, ["2.15.0"], runner=FakeRunner(), progress=lambda _: None)
    matrix = releases.read_matrix(root)
    matrix["rows"].append({"id": "claim:tied-weights", "release": "2.8.0", "status": "passed", "reason": None,
                           "source_sha256": "0" * 64})
    matrix["releases"].insert(0, {"release": "2.8.0", "build": "b", "python": "3.11", "date": "d"})
    pruned, dropped = releases.prune(matrix, releases.targets(root))
    assert dropped == 1 and [r["release"] for r in pruned["releases"]] == ["2.15.0"] and len(pruned["rows"]) == 3


def test_first_passing_is_the_start_of_the_newest_unbroken_run_of_passes() -> None:
    rows = [{"id": "p", "release": r, "status": s} for r, s in
            [("2.6.0", "failed"), ("2.7.1", "passed"), ("2.8.0", "failed"), ("2.9.1", "passed"), ("2.10.0", "passed")]]
    assert releases.first_passing({"rows": rows}, "p") == "2.9.1"
    rows[-1]["status"] = "skipped"
    assert releases.first_passing({"rows": rows}, "p") is None


def test_a_release_without_a_row_ends_the_range_instead_of_being_skipped_over() -> None:
    matrix = {"releases": [{"release": r} for r in ("2.7.1", "2.8.0", "2.9.1", "2.10.0")],
              "rows": [{"id": "p", "release": r, "status": "passed"} for r in ("2.7.1", "2.9.1", "2.10.0")]}
    assert releases.first_passing(matrix, "p") == "2.9.1"  # 2.8.0 never ran p: no range across it
    # A release declared but not run at all ends the range too.
    only_ends = {"releases": [{"release": "2.7.1"}, {"release": "2.10.0"}], "rows": [
        {"id": "p", "release": r, "status": "passed"} for r in ("2.7.1", "2.10.0")]}
    assert releases.first_passing(only_ends, "p", ["2.7.1", "2.8.0", "2.9.1", "2.10.0"]) == "2.10.0"
    assert not releases.covers(matrix, "p", ["2.7.1", "2.8.0"]) and releases.covers(matrix, "p", ["2.9.1"])


def test_an_unreadable_matrix_is_one_line_naming_how_to_restore_it(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    (root / releases.MATRIX_JSON).write_text("{not json", encoding="utf-8")
    with pytest.raises(releases.MatrixError, match="git checkout references/verification-releases.json"):
        releases.read_matrix(root)


def test_releases_json_prints_the_committed_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["releases", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == releases.public_view(MATRIX)


def test_an_unknown_release_is_refused_naming_the_declared_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["releases", "--run", "--release", "9.9.9"]) == 2
    err = capsys.readouterr().err
    assert "release '9.9.9' is not in the matrix" in err and "2.15.0" in err and "Traceback" not in err


# ---------------------------------------------------------------------------- the committed matrix


def test_the_matrix_declares_the_ten_releases_from_2_6_to_the_pin() -> None:
    assert matrix_releases(ROOT) == WANTED


def _missing_rows() -> list[tuple[str, str]]:
    report = json.loads((ROOT / "references" / "verification.json").read_text(encoding="utf-8"))
    ids = {r["name"] for r in report["results"] if r["name"].startswith(("claim:", "pattern:"))}
    have = {(r["id"], r["release"]) for r in MATRIX["rows"]}
    return sorted((i, r) for i in ids for r in WANTED if (i, r) not in have)


def test_the_pins_release_is_in_the_matrix_and_none_of_its_rows_failed() -> None:
    """No 2.15.0 row fails without the skill saying so: here, none fails at all."""
    assert MATRIX["releases"][-1]["release"] == WANTED[-1]
    pin_rows = [r for r in MATRIX["rows"] if r["release"] == WANTED[-1]]
    assert pin_rows and not [r["id"] for r in pin_rows if r["status"] == "failed"]


def test_the_committed_matrix_covers_every_release_for_every_check_and_pattern_of_the_report() -> None:
    missing = _missing_rows()
    assert not missing, f"{len(missing)} rows missing, e.g. {missing[:5]}: run `fsdp-skill releases --run`"
    assert [r["release"] for r in MATRIX["releases"]] == WANTED


def test_every_row_of_the_committed_matrix_is_current_and_every_unpassed_row_has_a_reason() -> None:
    digests = {t.id: t.digest for t in releases.targets(ROOT)}
    stale = sorted({r["id"] for r in MATRIX["rows"] if digests.get(r["id"]) != r["source_sha256"]})
    assert not stale, f"rows made from another version of {stale[:5]}: rerun `fsdp-skill releases --run`"
    assert all(r["reason"] for r in MATRIX["rows"] if r["status"] != "passed")


def test_every_pattern_the_matrix_ran_on_every_release_has_min_torch_where_its_passes_start() -> None:
    for path in sorted((ROOT / "assets" / "patterns").glob("*.py")):
        header = read_header(path)
        ident = "pattern:" + header.name
        ran_from = releases.first_passing(MATRIX, ident)
        if ran_from is not None and releases.covers(MATRIX, ident, WANTED):
            assert header.min_torch == ".".join(ran_from.split(".")[:2]), (path.name, header.min_torch, ran_from)


def test_every_build_is_named() -> None:
    assert all(("CUDA" in r["build"] or "CPU build" in r["build"]) and "GPU" in r["build"] for r in MATRIX["releases"])


def test_bench_releases_prints_each_timed_release_against_the_newest_and_the_peak_disk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _checkout(tmp_path)
    releases.run_matrix(root, ["2.14.1", "2.15.0"], runner=FakeRunner(), progress=lambda _: None)
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(root))
    assert main(["bench", "releases"]) == 0
    out = capsys.readouterr().out
    assert "2.14.1" in out and "2.15.0" in out and "1.00x" in out
    assert "peak disk 0.00 GB (one venv at a time)" in out

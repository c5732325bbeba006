"""Claim checks (assets/checks/): their headers, the pitfall -> check rule of `fsdp-skill validate`, the
`claim:<name>` rows of the runner, and SKILL.md's recipe being the one its check runs.

The real checks run in tests/test_claim_checks.py (each a torchrun job); here a fake repository with
one-rank scripts checks the wiring in seconds."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from fsdp_skill.cli.validate import validate
from fsdp_skill.cli.validate_claims import pitfall_items
from fsdp_skill.verify.claims import (
    ClaimCheck,
    check_files,
    load_checks,
    parse_check,
    read_check,
    rests_on_line,
    rests_on_problem,
    run_check,
)
from fsdp_skill.verify.cli import main
from fsdp_skill.verify.patterns import PatternHeaderError
from fsdp_skill.verify.report import build_report, render_markdown

ROOT = Path(__file__).resolve().parents[1]
CHECK = '''"""
name: tiny-claim
claim: One plus one is two.
backs: pitfalls
world_size: 1
mutant: plus-two: `assert 1 + 1` -> `assert 1 + 2`

Asserts arithmetic.
"""
assert 1 + 1 == 2
'''
SKILL = """---
name: pytorch-fsdp
description: Explains a tiny thing. Use when testing the validator.
---

# Tiny

## Pitfalls

1. **First**: shown by a [check](assets/checks/tiny.py).
2. **Second**: has none yet.
   - a nested bullet with a [link](assets/checks/tiny.py) still belongs to pitfall 2

## Next
"""


def test_a_check_header_parses_with_its_claim_section_and_world_size(tmp_path: Path) -> None:
    check = parse_check(tmp_path / "tiny.py", CHECK)
    assert (check.name, check.claim, check.backs, check.world_size, check.requires) == (
        "tiny-claim",
        "One plus one is two.",
        "pitfalls",
        1,
        (),
    )
    assert check.id == "claim:tiny-claim"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("backs: pitfalls", "backs: folklore"), "is not a SKILL.md section"),
        (("claim: One plus one is two.\n", ""), "header has no 'claim'"),
        (("world_size: 1", "world_size: 1\nrequires: cuda"), "a cuda check needs 'rests_on"),
        (("world_size: 1", "world_size: 1\nrequires: cuda\nrests_on: somewhere"), "is not 'torch/FILE.py:LINE"),
    ],
)
def test_a_malformed_check_header_is_refused_naming_the_problem(
    tmp_path: Path, edit: tuple[str, str], message: str
) -> None:
    with pytest.raises(PatternHeaderError, match=message):
        parse_check(tmp_path / "tiny.py", CHECK.replace(*edit))


def test_every_check_in_the_repository_has_a_valid_header_and_a_unique_name() -> None:
    checks = load_checks(ROOT)
    assert len(checks) == len(check_files(ROOT / "assets" / "checks")) >= 20
    assert {c.backs for c in checks} >= {"pitfalls", "decide-first", "core-recipe", "migration-map"}


@pytest.mark.torch
def test_every_gpu_check_rests_on_a_line_that_the_installed_torch_really_has() -> None:
    gpu = [c for c in load_checks(ROOT) if "cuda" in c.requires]
    assert gpu, "no GPU-only check: pitfalls 4 and 14 need one"
    for check in gpu:
        assert check.rests_on and rests_on_problem(check.rests_on) is None, (
            check.name,
            rests_on_problem(check.rests_on or ""),
        )
    assert "does not contain" in (rests_on_problem("torch/distributed/distributed_c10d.py:1 `no such text`") or "")


@pytest.mark.torch
def test_a_cuda_check_without_gpus_is_skipped_naming_where_its_text_is_in_this_torch(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the check would run")
    check = ClaimCheck(
        path=tmp_path / "x.py",
        name="x",
        claim="c",
        backs="pitfalls",
        world_size=2,
        requires=("cuda",),
        # A wrong line number on purpose: the text is found wherever it is in this release's file.
        rests_on="torch/distributed/distributed_c10d.py:1 `def monitored_barrier(`",
    )
    line, problem = rests_on_line(check.rests_on or "")
    assert problem is None and line and line > 1
    row = run_check(check)
    assert row["status"] == "skipped" and f"rests on torch/distributed/distributed_c10d.py:{line} " in row["reason"]
    # A citation whose text this release lacks still skips on a CPU host (it cannot run here), saying so;
    # the pin's own test above (every GPU check's text is in the installed torch) is what fails on it.
    stale = ClaimCheck(**{**check.__dict__, "rests_on": "torch/distributed/distributed_c10d.py:1 `gone`"})
    row = run_check(stale)
    assert row["status"] == "skipped" and "its cited source is not in this torch" in row["reason"]


def test_pitfall_items_are_the_top_level_items_of_the_pitfalls_list() -> None:
    body = SKILL.split("---\n", 2)[2]
    items = pitfall_items(body)
    assert [(n, targets) for n, _, targets in items] == [(1, ["assets/checks/tiny.py"]), (2, ["assets/checks/tiny.py"])]


def _skill(tmp_path: Path, text: str) -> Path:
    (tmp_path / "assets" / "checks").mkdir(parents=True)
    (tmp_path / "assets" / "checks" / "tiny.py").write_text(CHECK)
    (tmp_path / "SKILL.md").write_text(text)
    return tmp_path


def test_validate_fails_on_a_pitfall_without_a_check_link_and_names_it(tmp_path: Path) -> None:
    root = _skill(
        tmp_path,
        SKILL.replace("   - a nested bullet with a [link](assets/checks/tiny.py) still belongs to pitfall 2\n", ""),
    )
    problems = [str(p) for p in validate(root).problems]
    expected = (
        "SKILL.md:11: pitfall 2 links no check: add a script to assets/checks/ that demonstrates it "
        "and link it, e.g. ([check](assets/checks/NAME.py))"
    )
    assert problems == [expected]


def test_validate_reports_a_check_with_a_bad_header_and_does_not_count_its_link(tmp_path: Path) -> None:
    root = _skill(tmp_path, SKILL)
    (root / "assets" / "checks" / "tiny.py").write_text(CHECK.replace("backs: pitfalls", "backs: nowhere"))
    problems = [str(p) for p in validate(root).problems]
    assert any(p.startswith("assets/checks/tiny.py:4: backs 'nowhere'") for p in problems), problems
    assert sum("links no check" in p for p in problems) == 2


def test_the_repository_links_a_check_from_every_pitfall() -> None:
    body = (ROOT / "SKILL.md").read_text().split("---\n", 2)[2]
    items = pitfall_items(body)
    assert len(items) >= 18
    for number, _, targets in items:
        assert any(t.startswith("assets/checks/") for t in targets), f"pitfall {number}"


def _function_source(code: str, name: str) -> str:
    tree = ast.parse(code)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(code, node) or ""


# Every file that runs the recipe's init_weights: the checks that back it, and the patterns that use it.
INIT_WEIGHTS_COPIES = [
    "assets/checks/core_recipe_real_model.py",
    "assets/checks/init_any_mesh.py",
    "assets/checks/init_cuda_rng_tracker.py",
    "assets/checks/init_weights_parent_inits.py",
    "assets/checks/mha_out_proj_bias.py",
    "assets/checks/tied_weights.py",
    "assets/patterns/fsdp2_training.py",
    "assets/patterns/hsdp_2d_mesh.py",
    "assets/patterns/tp_fsdp2_2d.py",
]


@pytest.mark.parametrize("path", INIT_WEIGHTS_COPIES)
def test_skill_md_recipe_init_is_the_function_the_checks_and_patterns_run(path: str) -> None:
    skill = (ROOT / "SKILL.md").read_text()
    recipe = skill.split("```python\n", 1)[1].split("```", 1)[0]
    copy = (ROOT / path).read_text()
    assert _function_source(recipe, "init_weights") == _function_source(copy, "init_weights")


@pytest.fixture
def fake_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "assets" / "checks"
    folder.mkdir(parents=True)
    (folder / "tiny.py").write_text(CHECK)
    (folder / "_helper.py").write_text("HELPER = 1\n")  # not a check
    (folder / "wrong.py").write_text(CHECK.replace("tiny-claim", "wrong-claim").replace("1 + 1 == 2", "1 + 1 == 3"))
    (tmp_path / "references").mkdir()
    catalog = {"torch_version": "2.13.0", "examples": [], "patterns": []}
    (tmp_path / "references" / "catalog.json").write_text(json.dumps(catalog))
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tmp_path))
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR"):
        monkeypatch.delenv(key, raising=False)
    return tmp_path


@pytest.mark.torch
@pytest.mark.timeout(240)
def test_only_claims_prints_one_row_per_check_and_writes_claim_rows(
    fake_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = fake_repo / "out.json"
    assert main(["--only-claims", "--json", str(out), "--write-report"]) == 1  # wrong-claim fails
    rows = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    # --write-report runs the checks' mutants too: a failing original's mutant proves nothing, so it is skipped.
    assert set(rows) == {"claim:tiny-claim", "claim:wrong-claim", "mutant:claim:tiny-claim:plus-two",
                         "mutant:claim:wrong-claim:plus-two"}
    assert rows["claim:tiny-claim"]["status"] == "passed" and rows["claim:wrong-claim"]["status"] == "failed"
    assert rows["claim:wrong-claim"]["reason"] == "AssertionError"
    assert rows["mutant:claim:tiny-claim:plus-two"]["status"] == "killed"
    assert rows["mutant:claim:wrong-claim:plus-two"]["status"] == "skipped"
    stdout = capsys.readouterr().out
    assert "verify: claims: 1 passed, 0 skipped, 1 failed (2 claims)" in stdout
    assert "verify: mutants: 1 killed, 0 survived, 1 skipped, 0 failed (2 mutants)" in stdout
    md = (fake_repo / "references" / "verification.md").read_text()
    assert "## Claim checks" in md and "| `tiny-claim` | gloo | 1 | passed |  |" in md
    assert "## Mutants" in md and "| `claim:tiny-claim:plus-two` | gloo | 1 | killed | AssertionError |" in md


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--id", "claim:nope"], "no claim check with id 'claim:nope'"),
        (["--no-claims", "--id", "claim:tiny-claim"], "--no-claims runs no claim checks"),
        (["--only-claims", "--id", "pattern:x"], "--only-claims runs only claim checks"),
        (["--only-claims", "-k", "zzz"], "no claim id contains 'zzz'"),
    ],
)
def test_claim_selection_mistakes_are_one_line_errors(
    fake_repo: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_the_report_puts_claim_rows_in_their_own_table() -> None:
    rows = [
        {
            "name": "a#1",
            "backend": "gloo",
            "world_size": 2,
            "status": "passed",
            "reason": None,
            "seconds": 0.1,
            "warnings": [],
        },
        {
            "name": "claim:x",
            "backend": "nccl",
            "world_size": 2,
            "status": "skipped",
            "reason": "needs 2 CUDA GPU(s)",
            "seconds": 0.0,
            "warnings": [],
        },
    ]
    md = render_markdown(build_report(rows, "2.13.0"))
    assert "Summary of the examples: 1 passed" in md
    assert "## Claim checks" in md and "| `x` | nccl | 2 | skipped | needs 2 CUDA GPU(s) |" in md
    assert "`claim:x`" not in md


def test_the_hang_prompt_puts_rendezvous_and_network_before_mismatched_collectives() -> None:
    from fsdp_skill.serve.prompts import hang_prompt

    text = hang_prompt("stuck at the first all_reduce across nodes", "nccl", "2.13.0")
    setup, mismatch = text.index("1. Setup"), text.index("Mismatched collectives")
    assert setup < mismatch
    for needle in ("NCCL_SOCKET_IFNAME", "firewall", "--rdzv-endpoint", "device_id=device"):
        assert setup < text.index(needle) < mismatch, needle


@pytest.mark.torch
@pytest.mark.parametrize("present", [False, True])
def test_a_check_about_a_name_this_torch_lacks_is_skipped_with_its_reason_never_passed(
    tmp_path: Path, present: bool
) -> None:
    import shutil

    from fsdp_skill.verify.patterns import SKIP_MARKER

    shutil.copy(ROOT / "assets" / "checks" / "_dist.py", tmp_path / "_dist.py")
    check_file = tmp_path / "needs_new_name.py"
    check_file.write_text(
        '"""\nname: needs-new-name\nclaim: c\nbacks: what-changed\nworld_size: 2\n'
        'mutant: m: `import torch` -> `import torch `\n"""\n'
        "import torch\nfrom _dist import init, shutdown, skip_unless\n"
        f"skip_unless({present}, 'torch.distributed.no_such_name is new in 2.99')\n"
        "init()\nshutdown()\n",
        encoding="utf-8",
    )
    row = run_check(read_check(check_file))
    if present:
        assert row["status"] == "passed", row
    else:
        assert row["status"] == "skipped", row
        assert row["reason"].startswith("torch.distributed.no_such_name is new in 2.99 (torch 2.")
    # The helper spells the runner's marker (checks are standalone scripts and cannot import it).
    assert f'SKIP_MARKER = "{SKIP_MARKER}"' in (ROOT / "assets" / "checks" / "_dist.py").read_text(encoding="utf-8")

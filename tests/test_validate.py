"""`fsdp-skill validate`: the repository passes, and each kind of breakage in a small skill is reported as
one `file:line: problem` line with a non-zero exit."""

from __future__ import annotations

import argparse
import math
import shutil
from pathlib import Path

import pytest

from fsdp_skill.cli import main as fsdp_skill
from fsdp_skill.cli.validate import anchors_of, cli_validate, validate

ROOT = Path(__file__).resolve().parents[1]

PATTERN = '''"""
name: tiny-demo
min_torch: 2.12
title: A tiny demo
world_size: 2
requires:
tags: demo
mutant: silent: `print("done")` -> `pass`

Shows nothing, quickly.
"""
print("hello")
print("done")
'''

# The API timeline validate checks min_torch against: two releases, all_gather_single only in the newer one.
HISTORY = """{"pinned": "2.13.0", "releases": ["2.12.1", "2.13.0"], "schema_version": 1,
"names": {
"torch.distributed": {"kind": "module", "versions": ["2.12.1", "2.13.0"]},
"torch.distributed.all_gather_single": {"kind": "function", "versions": ["2.13.0"]}
}}
"""

FRONTMATTER = """---
name: pytorch-fsdp
description: Explains a tiny thing. Use when testing the validator.
license: BSD-3-Clause
metadata:
  torch-version: "2.13.0"
---
"""

BODY = """
# Tiny skill

Read [the topic](references/topic.md), its [setup section](references/topic.md#setup-and-teardown),
the [second intro](references/topic.md#intro-1) and [an API](references/topic.md#torch.distributed.all_reduce).

```python
import torch
print(torch.__version__)
```

| Pattern | What |
|---|---|
| [`tiny-demo`](assets/patterns/tiny_demo.py) | nothing |

Fetch it with `get_pattern("tiny-demo")`.
"""

TOPIC = """# Topic

## Intro

## Setup and teardown

## Intro

<a id="torch.distributed.all_reduce"></a>

### torch.distributed.all_reduce

Back to [the skill](../SKILL.md#tiny-skill).
"""


@pytest.fixture()
def skill(tmp_path: Path) -> Path:
    """A minimal skill that passes every check; each test breaks one thing."""
    (tmp_path / "references").mkdir()
    (tmp_path / "assets" / "patterns").mkdir(parents=True)
    (tmp_path / "SKILL.md").write_text(FRONTMATTER + BODY)
    (tmp_path / "references" / "topic.md").write_text(TOPIC)
    (tmp_path / "assets" / "patterns" / "tiny_demo.py").write_text(PATTERN)
    (tmp_path / "references" / "api-history.json").write_text(HISTORY)
    return tmp_path


def _problems(root: Path) -> list[str]:
    return [str(p) for p in validate(root).problems]


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().split("\n"), 1) if needle in line)


def test_the_repository_skill_passes_validation() -> None:
    report = validate(ROOT)
    assert report.problems == [], "\n".join(map(str, report.problems))
    assert 0 < report.body_lines <= 500 and 0 < report.body_tokens <= 5000
    assert report.patterns >= 13 and report.python_blocks >= 1 and report.links > 20


def test_the_fixture_skill_passes_so_each_failure_below_is_the_injected_one(skill: Path) -> None:
    report = validate(skill)
    assert report.problems == []
    assert (report.links, report.anchors, report.python_blocks, report.patterns) == (6, 4, 1, 1)


def test_a_frontmatter_key_outside_the_spec_is_reported_on_its_line(skill: Path) -> None:
    _edit(skill / "SKILL.md", "license: BSD-3-Clause\n", "license: BSD-3-Clause\nversion: 1.0.0\n")
    assert _problems(skill) == [
        f"SKILL.md:{_line_of(skill / 'SKILL.md', 'version:')}: frontmatter key 'version' is not allowed by the Agent "
        "Skills spec (allowed: name, description, license, compatibility, metadata, allowed-tools): move it under "
        "'metadata'"
    ]


def test_a_description_over_1024_characters_is_reported(skill: Path) -> None:
    description = "Explains a tiny thing. Use when testing. " + "x" * 1000
    _edit(skill / "SKILL.md", "Explains a tiny thing. Use when testing the validator.", description)
    assert _problems(skill) == [f"SKILL.md:3: description is {len(description)} characters, the limit is 1024"]


def test_a_description_in_the_second_person_is_reported(skill: Path) -> None:
    _edit(skill / "SKILL.md", "Explains a tiny thing.", "Helps you with a tiny thing.")
    assert _problems(skill) == [
        "SKILL.md:3: description uses 'you': write it in the third person ('Explains ...; use when ...')"
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("PyTorch-FSDP", "must be lowercase letters and digits joined by single hyphens"),
        ("pytorch--fsdp", "must be lowercase letters and digits joined by single hyphens"),
        ("fsdp", "must be the skill's folder name 'pytorch-fsdp'"),
        ("a" * 65, "65 characters, the limit is 64"),
    ],
)
def test_a_bad_skill_name_is_reported(skill: Path, name: str, message: str) -> None:
    _edit(skill / "SKILL.md", "name: pytorch-fsdp", f"name: {name}")
    problems = _problems(skill)
    assert problems and all(p.startswith("SKILL.md:2: ") for p in problems)
    assert any(message in p for p in problems), problems


def test_frontmatter_that_is_not_yaml_gives_one_line_not_a_traceback(skill: Path) -> None:
    _edit(skill / "SKILL.md", "Explains a tiny thing.", "Explains: a tiny thing.")
    [problem] = _problems(skill)
    assert problem.startswith("SKILL.md:3: frontmatter is not valid YAML (mapping values are not allowed here)")


def test_a_non_string_metadata_value_is_reported(skill: Path) -> None:
    _edit(skill / "SKILL.md", 'torch-version: "2.13.0"', "torch-version: 2.13")
    assert _problems(skill) == [
        "SKILL.md:5: metadata 'torch-version': 2.13 must map a string to a string: quote the value"
    ]


def test_missing_frontmatter_is_reported(skill: Path) -> None:
    (skill / "SKILL.md").write_text(BODY)
    assert _problems(skill) == ["SKILL.md:1: no frontmatter: start the file with '---', the YAML keys, and '---'"]


def test_a_link_to_a_missing_file_is_reported_on_its_line(skill: Path) -> None:
    _edit(skill / "SKILL.md", "references/topic.md)", "references/missing.md)")
    line = _line_of(skill / "SKILL.md", "missing.md")
    assert _problems(skill) == [f"SKILL.md:{line}: link 'references/missing.md': references/missing.md does not exist"]


def test_a_link_to_a_missing_anchor_is_reported(skill: Path) -> None:
    _edit(skill / "SKILL.md", "#setup-and-teardown", "#setup")
    line = _line_of(skill / "SKILL.md", "#setup")
    assert _problems(skill) == [
        f"SKILL.md:{line}: link 'references/topic.md#setup': no heading or <a id> 'setup' in references/topic.md"
    ]


def test_links_in_reference_files_are_checked_too(skill: Path) -> None:
    _edit(skill / "references" / "topic.md", "../SKILL.md#tiny-skill", "../SKILL.md#nope")
    assert _problems(skill) == [
        "references/topic.md:13: link '../SKILL.md#nope': no heading or <a id> 'nope' in SKILL.md"
    ]


def test_a_link_out_of_the_skill_folder_is_reported(skill: Path) -> None:
    _edit(skill / "references" / "topic.md", "../SKILL.md#tiny-skill", "../../elsewhere.md")
    assert _problems(skill) == ["references/topic.md:13: link '../../elsewhere.md' points outside the skill folder"]


def test_anchors_are_github_slugs_deduplicated_plus_html_ids() -> None:
    assert anchors_of(TOPIC) == {
        "topic",
        "intro",
        "setup-and-teardown",
        "intro-1",
        "torch.distributed.all_reduce",
        "torchdistributedall_reduce",
    }


def test_a_pattern_whose_min_torch_disagrees_with_the_api_timeline_is_reported(skill: Path) -> None:
    pattern = skill / "assets" / "patterns" / "tiny_demo.py"
    _edit(pattern, 'print("hello")', 'import torch.distributed as dist\ndist.all_gather_single(out, inp)')
    problems = [p for p in _problems(skill) if "min_torch" in p]
    assert problems == ["assets/patterns/tiny_demo.py:3: min_torch: 2.12 but the API timeline gives 2.13 "
                        "(torch.distributed.all_gather_single needs 2.13): write 'min_torch: 2.13'"]
    _edit(pattern, "min_torch: 2.12", "min_torch: 2.13")
    assert [p for p in _problems(skill) if "min_torch" in p] == []


def test_a_python_block_that_does_not_parse_is_reported_at_the_bad_line(skill: Path) -> None:
    _edit(skill / "SKILL.md", "print(torch.__version__)", "print(torch.__version__")
    line = _line_of(skill / "SKILL.md", "print(torch.__version__")
    [problem] = _problems(skill)
    assert problem.startswith(f"SKILL.md:{line}: python block does not parse: ")


def test_a_pattern_that_does_not_parse_is_reported(skill: Path) -> None:
    _edit(skill / "assets" / "patterns" / "tiny_demo.py", 'print("hello")', 'print("hello"')
    [problem] = _problems(skill)
    assert problem.startswith("assets/patterns/tiny_demo.py:12: does not parse")


def test_a_shell_template_with_a_syntax_error_is_reported(skill: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    (skill / "assets" / "patterns" / "launch.sh").write_text(
        "#!/usr/bin/env bash\n# name: launch\n# min_torch: 2.12\n# title: t\n# world_size: 2\n"
        "# mutant: never: `true` -> `false`\n#\n# Launches.\n"
        "if true; then\n"
    )
    _edit(skill / "SKILL.md", "| nothing |", "| nothing |\n| [`launch`](assets/patterns/launch.sh) | launch |")
    [problem] = _problems(skill)
    assert problem.startswith("assets/patterns/launch.sh:10: bash -n: ") and "syntax error" in problem


def test_a_pattern_skill_md_does_not_list_is_reported(skill: Path) -> None:
    _edit(skill / "SKILL.md", "| [`tiny-demo`](assets/patterns/tiny_demo.py) | nothing |\n", "")
    _edit(skill / "SKILL.md", 'get_pattern("tiny-demo")', "get_pattern")
    line = _line_of(skill / "SKILL.md", "# Tiny skill") - 1  # the body's first line
    assert _problems(skill) == [
        f"SKILL.md:{line}: pattern 'tiny-demo' (assets/patterns/tiny_demo.py) is not linked from SKILL.md"
    ]


def test_a_pattern_named_by_the_wrong_name_is_reported(skill: Path) -> None:
    _edit(skill / "SKILL.md", "[`tiny-demo`]", "[`tiny`]")
    line = _line_of(skill / "SKILL.md", "[`tiny`]")
    assert _problems(skill) == [
        f"SKILL.md:{line}: link text `tiny` but assets/patterns/tiny_demo.py is pattern 'tiny-demo'"
    ]


def test_get_pattern_with_an_unknown_name_is_reported(skill: Path) -> None:
    _edit(skill / "SKILL.md", 'get_pattern("tiny-demo")', 'get_pattern("no-such")')
    line = _line_of(skill / "SKILL.md", "no-such")
    assert _problems(skill) == [
        f"SKILL.md:{line}: get_pattern names 'no-such', which is not a pattern (have: tiny-demo)"
    ]


def test_a_body_over_the_line_and_token_limits_is_reported(skill: Path) -> None:
    body = BODY.replace("# Tiny skill\n", "# Tiny skill\n" + "word " * 4000 + "\n" + "\n" * 500)
    (skill / "SKILL.md").write_text(FRONTMATTER + body)
    lines, tokens = len(body.splitlines()), math.ceil(len(body) / 4)
    assert lines > 500 and tokens > 5000
    body_line = 8  # the line after the closing "---" of the 7-line frontmatter
    assert _problems(skill) == [
        f"SKILL.md:{body_line}: body is {lines} lines, the limit is 500: move detail to references/",
        f"SKILL.md:{body_line}: body is ~{tokens} tokens, the limit is 5000: move detail to references/",
    ]


def test_cli_prints_one_line_per_problem_and_the_body_size_and_exits_non_zero(
    skill: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit(skill / "SKILL.md", "license: BSD-3-Clause\n", "license: BSD-3-Clause\nauthor: me\n")
    _edit(skill / "SKILL.md", "references/topic.md)", "references/missing.md)")
    assert fsdp_skill(["validate", str(skill)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("SKILL.md:5: frontmatter key 'author' is not allowed")
    assert lines[1].startswith("SKILL.md:") and "references/missing.md does not exist" in lines[1]
    body = (skill / "SKILL.md").read_text().split("---\n", 2)[2]
    body_lines, body_tokens = len(body.splitlines()), math.ceil(len(body) / 4)
    assert (
        lines[2] == f"SKILL.md body: {body_lines} lines (limit 500), ~{body_tokens} tokens (limit 5000, characters / 4)"
    )
    assert lines[3].endswith("2 problem(s)")


def test_cli_exits_zero_on_a_valid_skill(skill: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_validate(argparse.Namespace(root=str(skill))) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("no problems")


def test_cli_names_a_missing_folder_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fsdp_skill(["validate", str(tmp_path / "nope")]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"fsdp-skill validate: error: {tmp_path / 'nope'} is not a directory: "
        "pass the skill's root folder (the one holding SKILL.md)"
    )

"""`fsdp-skill validate`: the release ranges SKILL.md states, against the release matrix.

SKILL.md's pattern table has a "Ran on" column: for each pattern, the releases the matrix
(references/verification-releases.json) has it passing on, as `A–B` (major.minor of the first and the newest
release of the newest unbroken run of passes: `first_passing`), or no range at all for a pattern the matrix
could not run here (GPU, SLURM: its rows are skipped). A range nobody ran is a problem; so is a row without
the column. The matrix is read, never run (`fsdp-skill releases --run` runs it).
"""

from __future__ import annotations

import re
from pathlib import Path

from fsdp_skill.cli.releases import matrix_releases
from fsdp_skill.core.errors import UserError
from fsdp_skill.verify.releases import first_passing, read_matrix

RANGE_RE = re.compile(r"(\d+\.\d+)\s*[–-]\s*(\d+\.\d+)")
_ROW_RE = re.compile(r"^\|\s*\[`([a-z0-9-]+)`\]\(assets/patterns/[^)]+\)\s*\|")


def _minor(release: str) -> str:
    return ".".join(release.split(".")[:2])


def expected_range(matrix: dict, pattern: str, declared: list[str] | None = None) -> str | None:
    """`2.7–2.15` from the matrix, or None where it has no passing run that reaches the newest release (a release
    of `declared` it was not run on ends the range)."""
    first = first_passing(matrix, "pattern:" + pattern, declared)
    if first is None or not matrix["releases"]:
        return None
    return f"{_minor(first)}–{_minor(matrix['releases'][-1]['release'])}"


def pattern_range_problems(skill_text: str, root: Path) -> list[tuple[int, str]]:
    """(line, problem) for each row of SKILL.md's pattern table whose "Ran on" cell is not what the matrix says."""
    matrix = read_matrix(root)
    if not matrix["rows"]:
        return []  # no matrix in this folder (a fixture, a partial copy): nothing to hold the ranges to
    lines = skill_text.split("\n")
    header = next((i for i, line in enumerate(lines) if line.startswith("| Pattern |")), None)
    if header is None:
        return [(1, "SKILL.md has no pattern table (a row '| Pattern | ... | Ran on |')")]
    columns = [cell.strip() for cell in lines[header].strip("|").split("|")]
    if "Ran on" not in columns:
        return [(header + 1, "the pattern table has no 'Ran on' column (the releases the matrix ran each pattern on)")]
    where = columns.index("Ran on")
    try:
        declared = matrix_releases(root)
    except UserError:
        declared = None
    problems = []
    for number in range(header + 2, len(lines)):
        row = _ROW_RE.match(lines[number])
        if not row:
            if not lines[number].startswith("|"):
                break
            continue
        cells = [cell.strip() for cell in lines[number].strip().strip("|").split("|")]
        stated = cells[where] if where < len(cells) else ""
        want = expected_range(matrix, row.group(1), declared)
        found = RANGE_RE.search(stated)
        if want is None and found:
            problems.append((number + 1, f"pattern {row.group(1)!r}: 'Ran on' says {stated!r}, but the release matrix "
                             "has no passing run of it up to the newest release: state no range"))
        elif want is not None and (not found or f"{found.group(1)}–{found.group(2)}" != want):
            problems.append((number + 1, f"pattern {row.group(1)!r}: 'Ran on' says {stated!r}, the release matrix "
                             f"has it passing on {want}: write '{want}'"))
    return problems

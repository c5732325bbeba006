"""The catalog's patterns: read each file's metadata header under assets/patterns/ into `Pattern`s.

The header format and its parser live in `fsdp_skill.verify.patterns` (stdlib only), which the
runner also uses to decide what a pattern needs; this module only turns headers into catalog
models and adds the command line that launches each pattern. Called by `fsdp-skill regenerate`.
"""

from __future__ import annotations

from pathlib import Path

from fsdp_skill.core.catalog import Pattern
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import patterns_dir, repo_root
from fsdp_skill.verify.patterns import PatternHeader, PatternHeaderError, pattern_files, read_header


class PatternError(UserError):
    """A pattern file's header is malformed, or two patterns share a name; the message names file and line."""


def launch_command(header: PatternHeader, relative: str) -> str:
    """The command a user types from the repository root to run the pattern."""
    if header.launch:
        return header.launch
    if header.kind == "python":
        return f"torchrun --standalone --nproc-per-node {header.world_size} {relative}"
    if header.path.suffix == ".sbatch":
        return f"sbatch {relative}"
    return f"NPROC_PER_NODE={header.world_size} bash {relative}"


def load_headers(root: Path | None = None) -> list[PatternHeader]:
    """Every pattern's header, sorted by file name; raises PatternError on the first bad one."""
    headers: list[PatternHeader] = []
    seen: dict[str, Path] = {}
    base = root or repo_root()
    for path in pattern_files(patterns_dir(base)):
        try:
            header = read_header(path)
        except PatternHeaderError as exc:
            raise PatternError(f"{_relative(exc.path, base)}:{exc.line}: {exc.message}") from None
        if header.name in seen:
            raise PatternError(
                f"{_relative(path, base)}:{header.key_lines['name']}: pattern name {header.name!r} "
                f"is already used by {_relative(seen[header.name], base)}: rename one"
            )
        seen[header.name] = path
        headers.append(header)
    return headers


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def to_pattern(header: PatternHeader, root: Path) -> Pattern:
    relative = _relative(header.path, root)
    return Pattern(
        name=header.name,
        title=header.title,
        summary=header.summary,
        file=relative,
        world_size=header.world_size,
        requires=list(header.requires),
        tags=list(header.tags),
        launch=launch_command(header, relative),
        min_torch=header.min_torch,
    )


def load_patterns(root: Path | None = None) -> list[Pattern]:
    """The catalog's `patterns`: one per file under assets/patterns/, in file-name order."""
    base = root or repo_root()
    return [to_pattern(header, base) for header in load_headers(base)]

"""The catalog's patterns as verification runs: read them from catalog.json, select, run, report rows.

`fsdp-skill verify` runs the patterns (assets/patterns/, listed under "patterns" in catalog.json) after
the examples. Each pattern is a whole torchrun job (`patterns.run_pattern`: own session, the process
group killed on a timeout), so there is no pool to share: they run one after another, each at the world
size its header states. A result is a report row like an example's, named `pattern:<name>`, so the
JSON schema, the merge of the committed report and the MCP server's lookup need nothing new.

Stdlib only (the catalog is read with `json`), like the rest of `fsdp_skill.verify`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .examples import CatalogReadError
from .patterns import KNOWN_REQUIREMENTS, fitted_size, launch_row, run_pattern

PATTERN_PREFIX = "pattern:"
# A pattern is a whole training job (torchrun start, rendezvous, a few steps): it gets at least this long
# whatever the per-example --timeout is, so a short example timeout does not fail the patterns.
MIN_PATTERN_TIMEOUT_S = 180.0

Result = dict[str, Any]


@dataclass(frozen=True)
class PatternSpec:
    name: str
    file: str  # as the catalog spells it (relative to the repository root)
    path: Path  # resolved
    world_size: int
    requires: tuple[str, ...]

    @property
    def id(self) -> str:
        return PATTERN_PREFIX + self.name


def is_pattern_id(name: str) -> bool:
    return name.startswith(PATTERN_PREFIX)


def pattern_timeout(timeout_s: float) -> float:
    return max(float(timeout_s), MIN_PATTERN_TIMEOUT_S)


def _spec(entry: Any, root: Path, where: str) -> PatternSpec:
    if not isinstance(entry, dict):
        raise CatalogReadError(f"{where}: a 'patterns' entry is not an object; regenerate the catalog")
    name, file, size, requires = (
        entry.get("name"),
        entry.get("file"),
        entry.get("world_size"),
        entry.get("requires") or [],
    )
    label = name if isinstance(name, str) and name else "?"
    problem = None
    if not isinstance(name, str) or not name:
        problem = "has no 'name'"
    elif not isinstance(file, str) or not file:
        problem = "has no 'file'"
    elif not isinstance(size, int) or isinstance(size, bool) or size < 1:
        problem = f"has world_size {size!r}, not a positive integer"
    elif not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        problem = f"has requires {requires!r}, not a list of names"
    else:
        unknown = [r for r in requires if r not in KNOWN_REQUIREMENTS]
        if unknown:
            problem = f"requires unknown {unknown[0]!r} (known: {', '.join(sorted(KNOWN_REQUIREMENTS))})"
    if problem or not (isinstance(name, str) and isinstance(file, str) and isinstance(size, int)):
        raise CatalogReadError(f"{where}: pattern {label!r} {problem}; regenerate the catalog")
    path = Path(file) if os.path.isabs(file) else root / file
    return PatternSpec(name=name, file=file, path=path, world_size=size, requires=tuple(requires))


def patterns_from_catalog(data: dict[str, Any], root: Path, where: str = "catalog.json") -> list[PatternSpec]:
    """The catalog's patterns, in catalog order; files resolve against `root` (the repository root).

    A catalog built before patterns existed has no "patterns" key: that is no patterns, not an error.
    """
    raw = data.get("patterns", [])
    if not isinstance(raw, list):
        raise CatalogReadError(f"{where}: 'patterns' is not a list; regenerate the catalog")
    specs = [_spec(entry, root, where) for entry in raw]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise CatalogReadError(f"{where}: pattern name {spec.name!r} appears twice; regenerate the catalog")
        seen.add(spec.name)
    return specs


def select_patterns(
    specs: list[PatternSpec], ids: list[str] | None = None, pattern: str | None = None
) -> list[PatternSpec]:
    """Like `examples.select`: exact `pattern:<name>` ids (other ids are examples'), then a substring of the id.

    Ids given but none of them a pattern's means "only those examples": no pattern is selected.
    """
    chosen = specs
    if ids:
        wanted = [i for i in dict.fromkeys(ids) if is_pattern_id(i)]
        by_id = {s.id: s for s in specs}
        unknown = [i for i in wanted if i not in by_id]
        if unknown:
            names = ", ".join(s.id for s in specs) or "none: the catalog lists no patterns"
            raise CatalogReadError(f"no pattern with id {unknown[0]!r} in the catalog (patterns: {names})")
        chosen = [by_id[i] for i in wanted]
    if pattern:
        needle = pattern.lower()
        chosen = [s for s in chosen if needle in s.id.lower()]
    return chosen


def _row(spec: PatternSpec, backend: str, status: str, reason: str | None, seconds: float,
         world_size: int | None = None, output: str = "") -> Result:
    return launch_row(spec.id, backend, spec.world_size, status, reason, seconds, world_size, output)


def run_one(spec: PatternSpec, backend: str, timeout_s: float, max_ranks: int | None = None) -> Result:
    """One pattern under torchrun at its stated world size (at most `max_ranks`); a failed row carries the
    output's tail."""
    if not spec.path.is_file():
        return _row(spec, backend, "failed",
                    f"{spec.file} does not exist: the catalog is out of date, run `fsdp-skill regenerate`", 0.0)
    size, skip = fitted_size(spec.world_size, spec.requires, max_ranks)
    if skip:
        return _row(spec, backend, "skipped", skip, 0.0)
    outcome = run_pattern(spec.path, size, backend=backend, timeout=timeout_s, requires=spec.requires)
    return _row(spec, backend, outcome["status"], outcome["reason"], outcome["seconds"], size, outcome["output"])


def run_patterns(
    specs: list[PatternSpec], backend: str, timeout_s: float, progress: Callable[[Result], None] | None = None,
    max_ranks: int | None = None,
) -> list[Result]:
    """Run each pattern in turn (catalog order); `timeout_s` is the per-pattern limit."""
    results: list[Result] = []
    for spec in specs:
        results.append(run_one(spec, backend, timeout_s, max_ranks))
        if progress:
            progress(results[-1])
    return results

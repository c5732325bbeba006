"""Claim checks: one script per statement SKILL.md makes, run under torchrun like the patterns.

Every numbered pitfall and every factual sentence of SKILL.md's "Decide first", core recipe and the
migration map is backed by a file in `assets/checks/` that demonstrates the behaviour on the installed
torch and asserts it (exit 0: the claim holds; non-zero: it went stale). Its header, like a pattern's:

    name: optimizer-before-shard        lowercase words joined by hyphens, unique
    claim: An optimizer built ...       the sentence the check backs (one line)
    backs: pitfalls                     the SKILL.md section: pitfalls, decide-first, core-recipe,
                                        migration-map, tuning, what-changed; patterns (a statement in a
                                        pattern file), doc-bug (upstream text that is wrong on this torch)
    world_size: 2                       ranks it is launched with
    requires: cuda                      empty when gloo on CPU is enough
    rests_on: torch/x.py:123 `text`     a GPU-only check: the installed torch's source line the claim
                                        rests on, quoted; named in the skip reason on a CPU-only machine
    mutant: NAME: `OLD` -> `NEW`        one or more: an edit that makes the claim false; its run must fail
                                        (`mutants`; `fsdp-skill validate` rejects a check without one)

A check without `requires` always runs on gloo (it states CPU/gloo behaviour); a `cuda` check runs on
nccl with one GPU per rank when this machine has them, else is skipped naming `rests_on`. Rows are
named `claim:<name>` in the report, beside the `pattern:` rows. The checks are read from the folder,
not the catalog: they back SKILL.md, not the generated references. Stdlib only, like `verify`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .patterns import (
    NAME_RE,
    PatternHeaderError,
    fitted_size,
    launch_row,
    parse_requires,
    parse_world_size,
    read_key_block,
    run_pattern,
)

CLAIM_PREFIX = "claim:"
CHECK_KEYS = ("name", "claim", "backs", "world_size")
OPTIONAL_CHECK_KEYS = ("requires", "rests_on")
SECTIONS = ("pitfalls", "decide-first", "core-recipe", "migration-map", "tuning", "what-changed", "patterns", "doc-bug")
# A torchrun start, rendezvous and a few steps; a check that needs longer is too big for CI.
MIN_CHECK_TIMEOUT_S = 120.0
_RESTS_ON_RE = re.compile(r"^(torch/[\w/.]+\.py):(\d+)\s+`([^`]+)`$")

Result = dict[str, Any]


@dataclass(frozen=True)
class ClaimCheck:
    path: Path
    name: str
    claim: str
    backs: str
    world_size: int
    requires: tuple[str, ...] = ()
    rests_on: str | None = None

    @property
    def id(self) -> str:
        return CLAIM_PREFIX + self.name


def is_claim_id(name: str) -> bool:
    return name.startswith(CLAIM_PREFIX)


def parse_check(path: Path, text: str) -> ClaimCheck:
    """A check's header; raises PatternHeaderError naming the file line of the problem."""
    values, key_lines, header_end, _ = read_key_block(path, text, CHECK_KEYS, OPTIONAL_CHECK_KEYS)
    name = values["name"]
    if not NAME_RE.match(name):
        raise PatternHeaderError(path, key_lines["name"], f"name {name!r} must be lowercase words joined by hyphens")
    if values["backs"] not in SECTIONS:
        raise PatternHeaderError(
            path,
            key_lines["backs"],
            f"backs {values['backs']!r} is not a SKILL.md section (one of: {', '.join(SECTIONS)})",
        )
    requires = parse_requires(path, values, key_lines)
    rests_on = values.get("rests_on") or None
    if "cuda" in requires and not rests_on:
        raise PatternHeaderError(
            path, header_end, "a cuda check needs 'rests_on: torch/FILE.py:LINE `quoted text`' for the CPU skip"
        )
    if rests_on and not _RESTS_ON_RE.match(rests_on):
        raise PatternHeaderError(
            path, key_lines["rests_on"], f"rests_on {rests_on!r} is not 'torch/FILE.py:LINE `quoted text`'"
        )
    return ClaimCheck(
        path=path,
        name=name,
        claim=values["claim"],
        backs=values["backs"],
        world_size=parse_world_size(path, values, key_lines),
        requires=requires,
        rests_on=rests_on,
    )


def read_check(path: Path | str) -> ClaimCheck:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PatternHeaderError(path, 1, "no such file") from None
    return parse_check(path, text)


def check_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    # `_*.py` are helpers the checks import (e.g. `_dist.py`), not checks.
    return sorted(p for p in directory.iterdir() if p.is_file() and p.suffix == ".py" and not p.name.startswith("_"))


def checks_dir(root: Path) -> Path:
    return root / "assets" / "checks"


def load_checks(root: Path) -> list[ClaimCheck]:
    """Every check under assets/checks/, by file name; a bad header or a reused name raises."""
    checks: list[ClaimCheck] = []
    seen: dict[str, Path] = {}
    for path in check_files(checks_dir(root)):
        check = read_check(path)
        if check.name in seen:
            raise PatternHeaderError(path, 2, f"check name {check.name!r} is already used by {seen[check.name].name}")
        seen[check.name] = path
        checks.append(check)
    return checks


def rests_on_line(rests_on: str) -> tuple[int | None, str | None]:
    """(line, None) where the quoted text is in the cited file of the installed torch, else (None, what differs).

    The text is looked for in the whole file, not at the cited line: line numbers move between releases
    (`torch/FILE.py:LINE` keeps the line a reader can open; the match is by text)."""
    match = _RESTS_ON_RE.match(rests_on)
    if not match:
        return None, f"{rests_on!r} is not 'torch/FILE.py:LINE `quoted text`'"
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None, "torch is not installed"
    file = Path(spec.origin).parent.parent / match.group(1)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None, f"{match.group(1)} is not in the installed torch"
    quoted = match.group(3)
    found = [number for number, line in enumerate(lines, 1) if quoted in line]
    if not found:
        return None, f"{match.group(1)} does not contain {quoted!r} in the installed torch"
    cited = int(match.group(2))
    return min(found, key=lambda number: abs(number - cited)), None


def rests_on_problem(rests_on: str) -> str | None:
    """None when the quoted text is in the cited file of the installed torch; else what differs."""
    return rests_on_line(rests_on)[1]


def select_checks(
    checks: list[ClaimCheck], ids: list[str] | None = None, pattern: str | None = None
) -> list[ClaimCheck]:
    """Exact `claim:<name>` ids (other ids are examples' or patterns'), then a substring of the id."""
    chosen = checks
    if ids:
        wanted = [i for i in dict.fromkeys(ids) if is_claim_id(i)]
        by_id = {c.id: c for c in checks}
        unknown = [i for i in wanted if i not in by_id]
        if unknown:
            raise ValueError(f"no claim check with id {unknown[0]!r} (have: {', '.join(by_id) or 'none'})")
        chosen = [by_id[i] for i in wanted]
    if pattern:
        chosen = [c for c in chosen if pattern.lower() in c.id.lower()]
    return chosen


def _gpu_count() -> int:
    import torch  # lazily: only cuda checks ask

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _row(check: ClaimCheck, backend: str, status: str, reason: str | None, seconds: float,
         world_size: int | None = None, output: str = "") -> Result:
    return launch_row(check.id, backend, check.world_size, status, reason, seconds, world_size, output)


def run_check(check: ClaimCheck, timeout_s: float = MIN_CHECK_TIMEOUT_S, max_ranks: int | None = None) -> Result:
    """One check under torchrun: gloo, or nccl for a cuda check when there is a GPU per rank. `max_ranks`
    (--max-ranks) runs a check stated for more ranks at that many, one per GPU."""
    timeout_s = max(float(timeout_s), MIN_CHECK_TIMEOUT_S)
    size, skip = fitted_size(check.world_size, check.requires, max_ranks)
    if skip:
        return _row(check, "nccl" if "cuda" in check.requires else "gloo", "skipped", skip, 0.0)
    if "cuda" in check.requires:
        gpus = _gpu_count()
        if gpus < size:
            # A GPU check skips on a CPU host, on every release; the reason says where the claim's source
            # text is in this torch, or that it is not there (the pin's test fails on that: a stale citation).
            line, stale = rests_on_line(check.rests_on or "")
            file = (check.rests_on or "").split(":")[0]
            where = f"rests on {file}:{line} `{check.rests_on.split('`')[1]}`" if line and check.rests_on else (
                f"its cited source is not in this torch ({stale})")
            return _row(check, "nccl", "skipped", f"needs {size} CUDA GPU(s) and nccl, this machine has {gpus}; "
                        f"{where}", 0.0, size)
        backend = "nccl"
    else:
        backend = "gloo"
    outcome = run_pattern(check.path, size, backend=backend, timeout=timeout_s, requires=())
    return _row(check, backend, outcome["status"], outcome["reason"], outcome["seconds"], size, outcome["output"])


def run_checks(
    checks: list[ClaimCheck], timeout_s: float, progress: Callable[[Result], None] | None = None,
    max_ranks: int | None = None,
) -> list[Result]:
    results: list[Result] = []
    for check in checks:
        results.append(run_check(check, timeout_s, max_ranks))
        if progress:
            progress(results[-1])
    return results


def main(argv: list[str] | None = None) -> int:
    """`python -m fsdp_skill.verify.claims [FILE ...]`: run claim checks, one line each."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fsdp_skill.verify.claims", description=main.__doc__)
    parser.add_argument("files", nargs="*", help="check files (default: every file in assets/checks/)")
    parser.add_argument("--timeout", type=float, default=MIN_CHECK_TIMEOUT_S, help="per-check timeout in seconds")
    args = parser.parse_args(argv)
    root = Path(os.environ.get("FSDP_SKILL_ROOT") or Path(__file__).resolve().parents[3])
    files = [Path(f) for f in args.files] or check_files(checks_dir(root))
    failed = 0
    for file in files:
        try:
            check = read_check(file)
        except PatternHeaderError as exc:
            print(f"FAILED   {file.name}: {exc.message}")
            failed += 1
            continue
        row = run_check(check, args.timeout)
        print(
            f"{row['status'].upper():8} {check.name:34} ws={check.world_size} {row['seconds']:6.1f}s  "
            f"{row['reason'] or ''}"
        )
        failed += row["status"] == "failed"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Mutants: small edits that make a claim check's or a pattern's claim false; the run of each must fail.

A check that passes shows nothing unless it would fail were its claim false. So each claim check
(assets/checks/) and each pattern (assets/patterns/) names, in its header, one or more mutants:

    mutant: bf16-reduction: `reduce_dtype=torch.float32` -> `reduce_dtype=torch.bfloat16`
    mutant: no-prefetch: `block.set_modules_to_forward_prefetch(nxt)` -> `pass`; `prefetch_backward(block)` -> `pass`

After the name come one or more edits, `;`-separated: each OLD occurs exactly once in the file outside
the header's key lines and is replaced by NEW (which may be empty). A trailing `=> NAME` (or
`=> NAME | NAME`) names the failure that kills the mutant, when it is not an AssertionError: the exception
the claim is about (`=> RuntimeError`), or a signal (`=> SIGABRT`):

    mutant: bn-in-bf16: `param_dtype=torch.float32` -> `param_dtype=torch.bfloat16` => RuntimeError
 The runner copies the file's folder
(its `_*.py` helpers, or the script a shell template launches) to a scratch folder, applies the edits to
the copy and runs the copy exactly as the original runs: same launcher, world size and backend. Statuses:

    killed     the mutant's run failed by the failure it names (AssertionError unless `=> NAME`), as
               failure_reason reads it: the first failing rank's exception, not a peer's disconnect
    survived   the mutant's run passed: the check does not test its claim (fix the check, never the mutant)
    skipped    the original cannot run here (e.g. it needs GPUs), or failed in this run, so its mutant proves nothing
    failed     the mutant cannot be applied, does not parse, or broke the script instead of the claim
               (a SyntaxError, NameError or ImportError in its run), or its run failed otherwise than
               it names: another exception, or a timeout (a hang proves nothing: make the check fail fast)

Rows are named `mutant:<row name>:<mutant name>`, e.g. `mutant:claim:mixed-precision-policy:bf16-reduction`,
and carry `source_sha256`, the original file's hash, so a test can tell a report that no longer matches its file.
Stdlib only, like the rest of `fsdp_skill.verify`.
"""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .catalog_patterns import PatternSpec, run_one
from .claims import ClaimCheck, run_check
from .patterns import NAME_RE, PatternHeaderError, header_entries

MUTANT_PREFIX = "mutant:"
MUTANT_KEY = "mutant"
_EDIT_RE = re.compile(r"`([^`]*)`\s*->\s*`([^`]*)`")
_VALUE_RE = re.compile(r"^([a-z0-9]+(?:-[a-z0-9]+)*):\s*(.+)$")
_EXPECTS_RE = re.compile(r"^(.*`)\s*=>\s*([A-Za-z_]\w*(?:\s*\|\s*[A-Za-z_]\w*)*)$")
DEFAULT_EXPECTS: tuple[str, ...] = ("AssertionError",)
# What a failure_reason line says killed the run: "torch.x.DistBackendError: ..." -> DistBackendError,
# "rank 1 killed by SIGABRT (...)" -> SIGABRT.
_RAISED_RE = re.compile(r"^(?:[\w.]+\.)?(\w+)(?::|$)|killed by (?:signal \d+ \()?(SIG\w+)")
# A run that dies of one of these broke the script (a typo, a deleted definition), not the claim it checks.
_BROKEN_SCRIPT_RE = re.compile(
    r"^(?:\[(?:rank|default)\d+\]:\s?)?(SyntaxError|IndentationError|NameError|UnboundLocalError|ImportError"
    r"|ModuleNotFoundError)\b.*",
    re.MULTILINE,
)

Result = dict[str, Any]


@dataclass(frozen=True)
class Edit:
    old: str
    new: str


@dataclass(frozen=True)
class Mutant:
    name: str
    edits: tuple[Edit, ...]
    line: int  # 1-based line of its `mutant:` header line
    expects: tuple[str, ...] = DEFAULT_EXPECTS  # the failures that kill it (exception or signal names)


class MutantError(PatternHeaderError):
    """A mutant line that does not parse, or an edit that does not apply to its file."""


def is_mutant_id(name: str) -> bool:
    return name.startswith(MUTANT_PREFIX)


def mutant_id(row_name: str, mutant: Mutant) -> str:
    return f"{MUTANT_PREFIX}{row_name}:{mutant.name}"


def parse_mutant(path: Path, line: int, value: str) -> Mutant:
    """One `mutant:` value: `NAME: `OLD` -> `NEW`[; `OLD` -> `NEW` ...]`."""
    match = _VALUE_RE.match(value.strip())
    if not match:
        raise MutantError(path, line, f"mutant {value[:80]!r} is not 'NAME: `OLD` -> `NEW`' (NAME: lowercase-hyphen)")
    name, rest = match.groups()
    expects: tuple[str, ...] = DEFAULT_EXPECTS
    named = _EXPECTS_RE.match(rest.strip())
    if named:
        rest, expects = named.group(1), tuple(n.strip() for n in named.group(2).split("|"))
    edits: list[Edit] = []
    for part in rest.split(";"):
        part = part.strip()
        edit = _EDIT_RE.fullmatch(part)
        if not edit:
            raise MutantError(path, line, f"mutant {name!r}: edit {part[:80]!r} is not '`OLD` -> `NEW`'")
        if not edit.group(1).strip():
            raise MutantError(path, line, f"mutant {name!r}: an edit's OLD text is empty")
        edits.append(Edit(edit.group(1), edit.group(2)))
    return Mutant(name=name, edits=tuple(edits), line=line, expects=expects)


def read_mutants(path: Path, text: str | None = None) -> list[Mutant]:
    """The mutants a check's or pattern's header declares, in header order; raises on a malformed one."""
    text = path.read_text(encoding="utf-8") if text is None else text
    entries, _, _ = header_entries(path, text)
    mutants: list[Mutant] = []
    seen: set[str] = set()
    for line, key, value in entries:
        if key != MUTANT_KEY:
            continue
        mutant = parse_mutant(path, line, value)
        if mutant.name in seen:
            raise MutantError(path, line, f"mutant name {mutant.name!r} is used twice in this file")
        if not NAME_RE.match(mutant.name):
            raise MutantError(path, line, f"mutant name {mutant.name!r} must be lowercase words joined by hyphens")
        seen.add(mutant.name)
        mutants.append(mutant)
    return mutants


def apply_mutant(path: Path, text: str, mutant: Mutant) -> str:
    """The file's text with the mutant's edits applied in order. Each OLD must occur exactly once outside
    the header's key lines (the mutant lines themselves quote it); raises MutantError otherwise."""
    entries, _, _ = header_entries(path, text)
    key_lines = {line - 1 for line, _, _ in entries}
    lines = text.split("\n")
    for edit in mutant.edits:
        where = [i for i, line in enumerate(lines) if i not in key_lines and edit.old in line]
        count = sum(lines[i].count(edit.old) for i in where)
        if count != 1:
            lines_at = ", ".join(str(i + 1) for i in where)
            found = "does not occur" if count == 0 else f"occurs {count} times (lines {lines_at})"
            raise MutantError(
                path, mutant.line, f"mutant {mutant.name!r}: `{edit.old[:80]}` {found} outside the header; "
                "it must occur exactly once (quote more of the line)"
            )
        index = where[0]
        lines[index] = lines[index].replace(edit.old, edit.new)
    mutated = "\n".join(lines)
    if path.suffix == ".py":
        try:
            ast.parse(mutated, filename=str(path))
        except SyntaxError as exc:
            raise MutantError(
                path, mutant.line, f"mutant {mutant.name!r} does not parse (line {exc.lineno}: {exc.msg}): "
                "a mutant must break the claim, not the syntax"
            ) from None
    return mutated


def mutant_problems(path: Path) -> list[tuple[int, str]]:
    """What `fsdp-skill validate` reports of a check's or pattern's mutants: none declared, a malformed one,
    one that does not apply or does not parse. Empty when every mutant can run."""
    try:
        text = path.read_text(encoding="utf-8")
        mutants = read_mutants(path, text)
    except PatternHeaderError as exc:
        return [(exc.line, exc.message)]
    except OSError as exc:
        return [(1, f"cannot read: {exc.strerror}")]
    if not mutants:
        return [(1, "declares no mutant: add a 'mutant: NAME: `OLD` -> `NEW`' header line, an edit that makes "
                    "its claim false (see fsdp_skill.verify.mutants)")]
    problems: list[tuple[int, str]] = []
    for mutant in mutants:
        try:
            apply_mutant(path, text, mutant)
        except MutantError as exc:
            problems.append((exc.line, exc.message))
    return problems


# A pattern's `min_torch:` header line is derived metadata (the oldest torch the API timeline gives for its code,
# `build.pattern_torch`): rewriting it changes nothing that runs, so it does not make the report's rows stale.
_MIN_TORCH_LINE = re.compile(rb"^(?:# )?min_torch:[^\n]*\n", re.MULTILINE)


def source_sha256(path: Path) -> str:
    """The file's sha256, without its `min_torch:` header line; the report records it per row."""
    return hashlib.sha256(_MIN_TORCH_LINE.sub(b"", path.read_bytes(), count=1)).hexdigest()


@dataclass(frozen=True)
class MutantTarget:
    """A claim check or pattern whose mutants run: its row name and how the original is run."""

    row_name: str  # e.g. claim:mixed-precision-policy
    path: Path
    run: Callable[[Path], Result]  # runs a file exactly as the original runs (launcher, size, backend) -> its row


def _copy_folder(source: Path, scratch: Path) -> Path:
    """The source file's folder, copied (helpers and the scripts a template launches come along)."""
    target = scratch / source.parent.name
    shutil.copytree(source.parent, target, ignore=shutil.ignore_patterns("__pycache__", ".*"))
    return target / source.name


def _row(target: MutantTarget, mutant: Mutant, base: Result | None, status: str, reason: str | None,
         seconds: float = 0.0) -> Result:
    row: Result = {
        "name": mutant_id(target.row_name, mutant),
        "backend": (base or {}).get("backend", "gloo"),
        "world_size": (base or {}).get("world_size", 1),
        "status": status,
        "reason": reason,
        "seconds": round(float(seconds), 3),
        "warnings": [],
        "source_sha256": source_sha256(target.path),
    }
    if base and base.get("stated_world_size"):
        row["stated_world_size"] = base["stated_world_size"]
    return row


def raised(reason: str) -> str | None:
    """The exception or signal name a failure_reason line says the run died of."""
    match = _RAISED_RE.search(reason)
    return (match.group(1) or match.group(2)) if match else None


def classify(run: Result, expects: tuple[str, ...] = DEFAULT_EXPECTS) -> tuple[str, str | None]:
    """(status, reason) of a mutant from the row of its run: killed only by a failure in `expects`."""
    if run["status"] == "skipped":
        return "skipped", run.get("reason")
    if run["status"] == "passed":
        return "survived", "the mutant's run passed: the check does not test its claim (fix the check)"
    broken = _BROKEN_SCRIPT_RE.search(str(run.get("output") or "")) or _BROKEN_SCRIPT_RE.search(
        str(run.get("reason") or "")
    )
    if broken:
        line = broken.group(0).strip()[:240]
        return "failed", f"the mutant broke the script, not its claim: {line}"
    reason = str(run.get("reason") or "the run failed")
    named = " or ".join(expects)
    if reason.startswith("timed out"):
        return "failed", f"{reason}: a timeout is not the failure the mutant names ({named}); make the check fail fast"
    name = raised(reason)
    if name in expects:
        return "killed", reason
    return "failed", (f"killed by {reason[:200]!r}, not the failure the mutant names ({named}): add `=> {name}` "
                      "to its line if that failure is the claim, else make the check assert it")


def run_mutant(target: MutantTarget, mutant: Mutant, original: Result | None = None) -> Result:
    """Run one mutant on a scratch copy; `original` is the original's row from this run, when it ran."""
    if original is not None and original["status"] == "skipped":
        return _row(target, mutant, original, "skipped", original.get("reason"))
    if original is not None and original["status"] == "failed":
        return _row(target, mutant, original, "skipped",
                    f"the original {target.row_name} failed in this run, so a failing mutant proves nothing")
    try:
        text = target.path.read_text(encoding="utf-8")
        mutated = apply_mutant(target.path, text, mutant)
    except (PatternHeaderError, OSError) as exc:
        return _row(target, mutant, original, "failed", str(getattr(exc, "message", exc)))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fsdp-mutant-") as scratch:
        copy = _copy_folder(target.path, Path(scratch))
        copy.write_text(mutated, encoding="utf-8")
        run = target.run(copy)
    status, reason = classify(run, mutant.expects)
    base = run if original is None else original
    return _row(target, mutant, base, status, reason, run.get("seconds") or time.monotonic() - started)


def run_mutants(
    targets: list[MutantTarget], originals: dict[str, Result] | None = None,
    only: Callable[[str], bool] | None = None, progress: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Every mutant of every target (those whose row id `only` accepts), in target then header order."""
    results: list[Result] = []
    for target in targets:
        try:
            mutants = read_mutants(target.path)
        except (PatternHeaderError, OSError) as exc:
            message = str(getattr(exc, "message", exc))
            results.append({
                "name": f"{MUTANT_PREFIX}{target.row_name}:(header)", "backend": "gloo", "world_size": 1,
                "status": "failed", "reason": message, "seconds": 0.0, "warnings": [],
            })
            continue
        for mutant in mutants:
            if only is not None and not only(mutant_id(target.row_name, mutant)):
                continue
            results.append(run_mutant(target, mutant, (originals or {}).get(target.row_name)))
            if progress:
                progress(results[-1])
    return results


def claim_target(check: ClaimCheck, timeout_s: float, max_ranks: int | None = None) -> MutantTarget:
    """A claim check's mutants run like the check: gloo (nccl for a cuda check), its stated world size."""
    return MutantTarget(check.id, check.path, lambda copy: run_check(replace(check, path=copy), timeout_s, max_ranks))


def pattern_target(spec: PatternSpec, backend: str, timeout_s: float, max_ranks: int | None = None) -> MutantTarget:
    """A pattern's mutants run like the pattern: its launcher, world size and this run's backend."""
    return MutantTarget(
        spec.id, spec.path, lambda copy: run_one(replace(spec, path=copy), backend, timeout_s, max_ranks)
    )


def declared_ids(targets: list[MutantTarget]) -> dict[str, str]:
    """mutant id -> the row it mutates, for every readable mutant of these targets (unreadable ones: none)."""
    ids: dict[str, str] = {}
    for target in targets:
        try:
            mutants = read_mutants(target.path)
        except (PatternHeaderError, OSError):
            continue
        ids.update({mutant_id(target.row_name, m): target.row_name for m in mutants})
    return ids


def selector(targets: list[MutantTarget], ids: list[str], pattern: str | None) -> Callable[[str], bool]:
    """Which mutant ids a run selects: exact mutant ids, or every mutant of a named claim/pattern row (--id),
    then a case-insensitive substring of the mutant id (-k). Raises ValueError for an unknown mutant id."""
    declared = declared_ids(targets)
    wanted = {i for i in ids if is_mutant_id(i)}
    unknown = sorted(wanted - set(declared))
    if unknown:
        sample = ", ".join(sorted(declared)[:5]) or "none"
        raise ValueError(f"no mutant with id {unknown[0]!r} (ids look like: {sample}, ...)")
    rows = {i for i in ids if not is_mutant_id(i)}

    def chosen(mid: str) -> bool:
        if (wanted or rows) and not (mid in wanted or declared.get(mid) in rows):
            return False
        return not pattern or pattern.lower() in mid.lower()

    return chosen


def main(argv: list[str] | None = None) -> int:
    """`python -m fsdp_skill.verify.mutants FILE [--name M]`: run a check's or pattern's mutants, one line each."""
    import argparse

    from .claims import read_check
    from .patterns import read_header, run_pattern

    parser = argparse.ArgumentParser(prog="python -m fsdp_skill.verify.mutants", description=main.__doc__)
    parser.add_argument("file", help="a claim check (assets/checks/*.py) or a pattern (assets/patterns/*)")
    parser.add_argument("--name", help="only this mutant")
    parser.add_argument("--timeout", type=float, default=180.0, help="per-run timeout in seconds")
    args = parser.parse_args(argv)
    path = Path(args.file).resolve()
    try:
        if path.parent.name == "checks":
            check = read_check(path)
            row_name = check.id

            def run(copy: Path) -> Result:
                return run_check(replace(check, path=copy), args.timeout)
        else:
            header = read_header(path)
            row_name = "pattern:" + header.name

            def run(copy: Path) -> Result:
                outcome = run_pattern(copy, header.world_size, timeout=args.timeout, requires=header.requires)
                return {**outcome, "backend": "gloo", "world_size": header.world_size}
        mutants = read_mutants(path)
    except PatternHeaderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    target = MutantTarget(row_name, path, run)
    chosen = [m for m in mutants if not args.name or m.name == args.name]
    if not chosen:
        print(f"error: {path.name} has no mutant {args.name!r} (has: {', '.join(m.name for m in mutants) or 'none'})",
              file=sys.stderr)
        return 2
    bad = 0
    for mutant in chosen:
        row = run_mutant(target, mutant)
        print(f"{row['status'].upper():9} {mutant.name:28} {row['seconds']:6.1f}s  {row['reason'] or ''}")
        bad += row["status"] in ("survived", "failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

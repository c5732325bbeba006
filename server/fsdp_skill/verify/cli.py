"""Command line of the runner: `fsdp-skill verify`, `python -m fsdp_skill.verify`, scripts/verify_examples.py.

All three parse the same flags (`add_arguments`) and call `cli_verify`: the catalog's examples first
(pooled ranks), then its patterns (each a torchrun job, rows named `pattern:<name>`), then the claim checks
of assets/checks/ (`claim:<name>`, see `claims`). Exit codes: 0 when nothing failed, 1 when any example,
pattern or claim check failed, 2 for bad input (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsdp_skill.core.atomic import unwritable_reason
from fsdp_skill.core.errors import UserError  # stdlib only, like core.paths
from fsdp_skill.core.paths import repo_root, writable_root
from fsdp_skill.core.streams import stdout_closed
from fsdp_skill.core.vocabulary import EXAMPLE_STATUSES, MUTANT_STATUSES, PATTERN_STATUSES

from . import page_run
from .args import add_arguments
from .catalog_patterns import (
    PATTERN_PREFIX,
    PatternSpec,
    is_pattern_id,
    pattern_timeout,
    patterns_from_catalog,
    run_patterns,
    select_patterns,
)
from .claims import (
    ClaimCheck,
    checks_dir,
    is_claim_id,
    load_checks,
    run_checks,
    select_checks,
)
from .examples import (
    ExampleSpec,
    examples_from_catalog,
    read_catalog,
    select,
)
from .mutants import (
    MutantTarget,
    claim_target,
    declared_ids,
    is_mutant_id,
    pattern_target,
    run_mutants,
    selector,
)
from .page_plan import PageBlock, blocks_from_catalog
from .patterns import PatternHeaderError
from .plan import MAX_LOCAL_RANKS
from .report import (
    build_report,
    counts,
    dumps_json,
    write_atomic,
    write_report,
)
from .runner import Result, RunOptions, launched_by_torchrun, run_launched, run_spawned

_STATUS_STYLE = {"passed": "green", "passed-with-stand-ins": "green", "doc-bug": "yellow", "checked": "cyan",
                 "skipped": "dim", "failed": "bold red", "killed": "green", "survived": "bold red"}


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Run the catalog's documented examples across ranks, then its patterns under torchrun."
    )
    add_arguments(parser)
    return parser


def _options(args: argparse.Namespace) -> RunOptions:
    if not args.timeout or args.timeout <= 0:
        raise UserError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.world_size is not None and not 1 <= args.world_size <= 64:
        raise UserError(f"--world-size must be between 1 and 64, got {args.world_size}")
    if args.world_size is not None and args.world_size > MAX_LOCAL_RANKS and not launched_by_torchrun():
        raise UserError(
            f"--world-size {args.world_size}: this runner starts at most {MAX_LOCAL_RANKS} processes on one machine; "
            f"for more ranks launch it across nodes: torchrun --nnodes N --nproc-per-node M "
            f"scripts/verify_examples.py --world-size {args.world_size}"
        )
    max_ranks = getattr(args, "max_ranks", None)
    if max_ranks is not None and not 1 <= max_ranks <= MAX_LOCAL_RANKS:
        raise UserError(f"--max-ranks must be between 1 and {MAX_LOCAL_RANKS}, got {max_ranks}")
    if max_ranks is not None and launched_by_torchrun():
        raise UserError("--max-ranks is for the runner's own processes; under torchrun, --nproc-per-node sets the size")
    return RunOptions(
        backend=args.backend, world_size=args.world_size, timeout_s=float(args.timeout), max_ranks=max_ranks
    )


@dataclass
class _Selection:
    torch_version: str | None
    examples: list[ExampleSpec]
    patterns: list[PatternSpec]
    claims: list[ClaimCheck]
    known: set[str]  # every example and pattern id in the catalog (the report drops rows of others)
    data: dict[str, Any] = field(default_factory=dict)  # the catalog, for page code (page_run)
    page_blocks: list[PageBlock] = field(default_factory=list)  # the selected code blocks of the pages
    mutants: str = "none"  # "none", "with" (after the selected checks and patterns) or "only"
    mutant_ids: list[str] = field(default_factory=list)  # with --only-mutants: --id values


def _selected(args: argparse.Namespace) -> _Selection:
    path = Path(args.catalog) if getattr(args, "catalog", None) else repo_root() / "references" / "catalog.json"
    data = read_catalog(path)
    only_patterns, no_patterns = getattr(args, "only_patterns", False), getattr(args, "no_patterns", False)
    only_claims, no_claims = getattr(args, "only_claims", False), getattr(args, "no_claims", False)
    only_mutants = getattr(args, "only_mutants", False)
    if only_mutants and (only_patterns or only_claims or no_patterns or no_claims):
        raise UserError("--only-mutants runs the mutants of every claim check and pattern: select them with -k or --id "
                        "instead of --only-/--no-patterns or claims")
    # Parsing the examples costs a second on a full catalog: skip it when only patterns or claims run.
    all_examples = [] if only_patterns or only_claims or only_mutants else examples_from_catalog(data, path)
    every_pattern = patterns_from_catalog(data, repo_root(), where=str(path))
    every_claim = _claim_checks()
    all_patterns = [] if no_patterns or only_claims else every_pattern
    all_claims = [] if only_patterns or no_claims else every_claim
    ids = args.ids or []
    if only_mutants:
        return _mutant_selection(args, data, every_claim, every_pattern)
    if any(is_mutant_id(i) for i in ids):
        named = next(i for i in ids if is_mutant_id(i))
        raise UserError(f"--id {named!r} names a mutant: run mutants with --only-mutants")
    claim_ids = [i for i in ids if is_claim_id(i)]
    example_ids = [i for i in ids if not is_pattern_id(i) and not is_claim_id(i)]
    pattern_ids = [i for i in ids if is_pattern_id(i)]
    if only_claims and (example_ids or pattern_ids):
        named = (example_ids + pattern_ids)[0]
        raise UserError(f"--only-claims runs only claim checks, but --id {named!r} names none: drop one of the two")
    if no_claims and claim_ids:
        raise UserError(f"--no-claims runs no claim checks, but --id {claim_ids[0]!r} names one: drop one of the two")
    if only_patterns and example_ids:
        raise UserError(f"--only-patterns runs no examples, but --id {example_ids[0]!r} names one: drop one of the two")
    if no_patterns and pattern_ids:
        raise UserError(f"--no-patterns runs no patterns, but --id {pattern_ids[0]!r} names one: drop one of the two")
    # Ids that name only patterns select no example (and the reverse): --id is "exactly these".
    # Page code ids are 'file.md#anchor:N' (see page_plan); the rest of example_ids are doctest examples.
    page_ids = [i for i in example_ids if ".md#" in i and i.rsplit(":", 1)[-1].isdigit()]
    example_ids = [i for i in example_ids if i not in page_ids]
    no_page_code = only_patterns or only_claims or getattr(args, "no_page_code", False)
    all_blocks = [] if no_page_code else blocks_from_catalog(data)
    blocks = [] if ids and not page_ids else page_run.select_blocks(all_blocks, page_ids, args.pattern)
    examples = [] if ids and not example_ids else select(all_examples, ids=example_ids, pattern=args.pattern)
    patterns = [] if ids and not pattern_ids else select_patterns(all_patterns, ids=ids, pattern=args.pattern)
    try:
        claims = [] if ids and not claim_ids else select_checks(all_claims, ids=claim_ids, pattern=args.pattern)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not examples and not patterns and not claims and not blocks:
        if only_patterns and not all_patterns:
            raise UserError(f"{path} lists no patterns: regenerate it with `fsdp-skill regenerate`")
        if only_claims and not all_claims:
            raise UserError(f"{checks_dir(repo_root())} holds no claim checks")
        if only_patterns:
            what = "pattern id"
        elif only_claims:
            what = "claim id"
        elif no_patterns and not all_claims:
            what = "example id"
        else:
            what = "example, pattern or claim id" if all_claims else "example id or pattern id"
        raise UserError(f"no {what} contains {args.pattern!r}; try a shorter -k, e.g. -k all_reduce or -k fsdp2")
    # Straight from the JSON, so that rows of the kind this run skipped stay in the report.
    known = {e["id"] for e in data["examples"] if isinstance(e, dict) and isinstance(e.get("id"), str)}
    known |= {
        PATTERN_PREFIX + p["name"]
        for p in data.get("patterns") or []
        if isinstance(p, dict) and isinstance(p.get("name"), str)
    }
    known |= _known_rows(every_claim, every_pattern)
    known |= {b.id for b in blocks_from_catalog(data)}
    run_mutants_too = getattr(args, "mutants", False) or (args.write_report and not getattr(args, "no_mutants", False))
    return _Selection(data.get("torch_version"), examples, patterns, claims, known, data, blocks,
                      mutants="with" if run_mutants_too else "none")


def _known_rows(claims: list[ClaimCheck], patterns: list[PatternSpec]) -> set[str]:
    """Claim and mutant ids that exist now (the report keeps their rows from earlier runs, drops the others)."""
    targets = [MutantTarget(c.id, c.path, _no_run) for c in claims] + [
        MutantTarget(p.id, p.path, _no_run) for p in patterns
    ]
    return {c.id for c in claims} | set(declared_ids(targets))


def _no_run(path: Path) -> Result:
    raise AssertionError("only read, never run")


def _mutant_selection(args: argparse.Namespace, data: dict[str, Any], claims: list[ClaimCheck],
                      patterns: list[PatternSpec]) -> _Selection:
    """--only-mutants: every claim check and pattern is a target; -k / --id pick their mutants."""
    known = {e["id"] for e in data["examples"] if isinstance(e, dict) and isinstance(e.get("id"), str)}
    known |= {p.id for p in patterns} | _known_rows(claims, patterns) | {b.id for b in blocks_from_catalog(data)}
    ids = args.ids or []
    targets = [MutantTarget(c.id, c.path, _no_run) for c in claims] + [MutantTarget(p.id, p.path, _no_run)
                                                                        for p in patterns]
    try:
        chosen = selector(targets, ids, args.pattern)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not any(chosen(mid) for mid in declared_ids(targets)):
        raise UserError(f"no mutant id matches (-k {args.pattern!r}, --id {ids}); ids look like "
                        "mutant:claim:NAME:MUTANT or mutant:pattern:NAME:MUTANT")
    return _Selection(data.get("torch_version"), [], patterns, claims, known, data, [], mutants="only",
                      mutant_ids=list(ids))


def _claim_checks() -> list[ClaimCheck]:
    try:
        return load_checks(repo_root())
    except PatternHeaderError as exc:
        raise UserError(f"{exc}: fix the check's header") from None


def _progress_printer(total: int) -> Any:
    done = [0]

    def show(result: Result) -> None:
        done[0] += 1
        print(
            f"[{done[0]:>3}/{total}] {result['status']:<8} {result['name']} (ws {result['world_size']}, "
            f"{result['seconds']:.2f} s)",
            file=sys.stderr,
            flush=True,
        )

    return show


def _plain_table(results: list[Result], label: str = "example") -> str:
    width = max((len(r["name"]) for r in results), default=10)
    lines = [f"{label:<{width}}  ws  {'status':<8}  reason"]
    for r in results:
        reason = (r.get("reason") or "").replace("\n", " ")
        if r.get("warnings"):
            reason = (reason + " | " if reason else "") + "warns: " + "; ".join(r["warnings"])
        lines.append(f"{r['name']:<{width}}  {r['world_size']:>2}  {r['status']:<8}  {reason}")
    return "\n".join(lines)


def print_table(results: list[Result], label: str = "example") -> None:
    try:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        print(_plain_table(results, label))
        return
    table = Table(show_lines=False)
    for column in (label, "ws", "status", "s", "reason / warnings"):
        table.add_column(column, overflow="fold")
    for r in results:
        note = r.get("reason") or ""
        if r.get("warnings"):
            note = (note + "\n" if note else "") + "warns: " + "; ".join(r["warnings"])
        # Text, not str: rich reads a str as markup, and a reason quoting `x[0]` or `[rank1]:` would lose it.
        status = Text(r["status"], style=_STATUS_STYLE.get(r["status"], ""))
        table.add_row(Text(r["name"]), str(r["world_size"]), status, f"{r['seconds']:.2f}", Text(note))
    Console().print(table)


def print_details(results: list[Result]) -> None:
    """The evidence for each failure (tracebacks, stacks) — what a reader needs to act on it."""
    for r in results:
        if r["status"] != "failed":
            continue
        print(f"\n== {r['name']} ({r['backend']}, world size {r['world_size']}): {r['reason']}")
        for rank in r.get("ranks", []):
            for key in ("traceback", "stack", "log"):
                if rank.get(key):
                    print(f"-- rank {rank['rank']} {key}:\n{rank[key].rstrip()}")
        if r.get("output"):  # a pattern: torchrun's interleaved output of every rank, its tail
            print(f"-- output (tail):\n{r['output'].rstrip()}")


def summary_line(results: list[Result], kind: str = "examples") -> str:
    """'verify: examples: 27 passed, 5 doc-bug, ...' — patterns have no doc-bug status, so it is left out."""
    tally = counts(results)
    statuses = {"examples": EXAMPLE_STATUSES, "mutants": MUTANT_STATUSES}.get(kind, PATTERN_STATUSES)
    return f"verify: {kind}: " + ", ".join(f"{tally.get(s, 0)} {s}" for s in statuses) + f" ({len(results)} {kind})"


PATTERNS_UNDER_TORCHRUN = (
    "patterns not run: under torchrun this process is one rank, and each pattern starts its own torchrun; "
    "run `fsdp-skill verify --only-patterns` without a launcher"
)


def _run_examples(specs: list[ExampleSpec], options: RunOptions, progress: Any,
                  planned: list[ExampleSpec] = ()) -> list[Result] | None:  # type: ignore[assignment]
    """The examples' (and planned page code's) results; None on a torchrun rank other than 0."""
    if not specs and not planned:
        return []
    if launched_by_torchrun():
        return run_launched(specs, options, progress=progress) if specs else []
    return run_spawned(specs, options, progress=progress, planned=list(planned))


def cli_verify(args: argparse.Namespace) -> int:
    try:
        options = _options(args)
        if args.write_report:  # checked before the run, not after minutes of it
            writable_root("--write-report rewrites references/verification.{md,json}")
        chosen = _selected(args)
        launched = launched_by_torchrun()
        if launched and not chosen.examples and not chosen.page_blocks:  # patterns and claims start their own torchrun
            raise UserError(
                "under torchrun only examples run (each pattern starts its own torchrun) and none is selected: "
                "run `fsdp-skill verify --only-patterns` without a launcher"
            )
        _check_report_paths(args)
    except UserError as exc:  # a bad flag or report path, or a catalog that is missing or not a catalog
        print(f"verify: error: {exc}", file=sys.stderr)
        return 2
    try:
        import torch  # the runner's one dependency; imported only once the input is known to be good
    except ImportError as exc:  # was a traceback
        missing = isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "torch"
        why = "torch is not installed" if missing else f"`import torch` fails ({type(exc).__name__}: {exc})"
        print(f"verify: error: {why} in {sys.executable}: verify runs the examples on torch; install it with "
              f"`{sys.executable} -m pip install torch numpy` (a CPU build is enough for gloo)", file=sys.stderr)
        return 2

    torch_version = torch.__version__.split("+")[0]
    targets = [] if launched else _mutant_targets(chosen, options)
    only_mutants = chosen.mutants == "only"
    patterns = [] if launched or only_mutants else chosen.patterns
    claims = [] if launched or only_mutants else chosen.claims
    try:
        wanted = selector(targets, chosen.mutant_ids, args.pattern if only_mutants else None)
    except ValueError as exc:  # checked in _selected already; kept for a file edited meanwhile
        print(f"verify: error: {exc}", file=sys.stderr)
        return 2
    planned = sum(1 for mid in declared_ids(targets) if wanted(mid))
    page_context, page_plans = page_run.plan_all(chosen.data, chosen.page_blocks, options.backend)
    # Page code runs at the page's own world size in the spawned pool; under torchrun only its static checks run.
    page_specs = [] if launched else page_run.runnable_specs(page_plans)
    page_rows = page_run.static_rows(page_context, page_plans, options.backend)
    progress = _progress_printer(len(chosen.examples) + len(page_specs) + len(patterns) + len(claims) + planned)
    try:
        ran = _run_examples(chosen.examples, options, progress, page_specs)
    except ValueError as exc:
        print(f"verify: error: {exc}", file=sys.stderr)
        return 2
    finally:
        page_run.remove_workdir()
    if ran is None:
        return 0
    results, page_rows = page_run.split_results(ran, page_rows, page_plans, chosen.examples, chosen.page_blocks)
    pattern_results = run_patterns(
        patterns, options.backend, pattern_timeout(options.timeout_s), progress=progress, max_ranks=options.max_ranks
    )
    claim_results = run_checks(claims, options.timeout_s, progress=progress, max_ranks=options.max_ranks)
    originals = {r["name"]: r for r in pattern_results + claim_results}
    mutant_results = run_mutants(targets, originals, only=wanted, progress=progress) if targets else []
    _print_outcome(results, pattern_results, claim_results, chosen, options, torch_version, launched, mutant_results)
    if page_rows:
        print_table(page_rows, label="page code")
        print_details(page_rows)
        print("\n".join(page_run.summary_lines(page_rows)))
    everything = results + page_rows + pattern_results + claim_results + mutant_results
    if not _write_reports(args, build_report(everything, torch_version), chosen, options):
        return 2
    return 1 if any(r["status"] in ("failed", "survived") for r in everything) else 0


def _mutant_targets(chosen: _Selection, options: RunOptions) -> list[MutantTarget]:
    """The selected claim checks and patterns whose mutants this run executes (none without --mutants)."""
    if chosen.mutants == "none":
        return []
    return [claim_target(c, options.timeout_s, options.max_ranks) for c in chosen.claims] + [
        pattern_target(s, options.backend, pattern_timeout(options.timeout_s), options.max_ranks)
        for s in chosen.patterns
    ]


def _print_notes(chosen: _Selection, options: RunOptions, torch_version: str, launched: bool,
                 ran_patterns: bool, ran_claims: bool) -> None:
    """What a reader should know about the catalog and this run beside the tables."""
    notes = [f"{s.id}: {note}" for s in chosen.examples for note in s.notes]
    if notes:
        print("\ncatalog notes (fix in the catalog build):\n  " + "\n  ".join(notes))
    if chosen.torch_version and chosen.torch_version.split("+")[0] != torch_version:
        print(f"\nnote: the catalog was built from torch {chosen.torch_version}; this is torch {torch_version}")
    if launched and chosen.patterns:
        print(f"\nnote: {len(chosen.patterns)} {PATTERNS_UNDER_TORCHRUN}")
    if launched and chosen.claims:
        print(
            f"\nnote: {len(chosen.claims)} claim checks not run under torchrun; "
            "run `fsdp-skill verify --only-claims` without a launcher"
        )
    if ran_claims and options.backend == "nccl":
        print("\nnote: claim checks without `requires: cuda` state gloo/CPU behaviour and ran on gloo")
    if ran_patterns and options.world_size is not None:
        print(
            f"\nnote: patterns ran at the world size each one states"
            f"{f' (at most {options.max_ranks})' if options.max_ranks else ''}; --world-size {options.world_size} "
            "applies to examples"
        )


def _print_outcome(results: list[Result], pattern_results: list[Result], claim_results: list[Result],
                   chosen: _Selection, options: RunOptions, torch_version: str, launched: bool,
                   mutant_results: list[Result] = ()) -> None:  # type: ignore[assignment]
    """The tables, each failure's details, notes on the catalog and the run, and the summary lines."""
    sections = ((results, "example", "examples"), (pattern_results, "pattern", "patterns"),
                (claim_results, "claim", "claims"), (list(mutant_results), "mutant", "mutants"))
    for rows, label, _ in sections:
        if rows:
            print_table(rows, label=label)
    print_details(results + pattern_results + claim_results)
    _print_notes(chosen, options, torch_version, launched, bool(pattern_results), bool(claim_results))
    for rows, _, kind in sections:
        if rows:
            print(summary_line(rows, kind))


def _write_reports(args: argparse.Namespace, report: dict[str, Any], chosen: _Selection, options: RunOptions) -> bool:
    """--json and --write-report; False (with one line on stderr) when a report cannot be written."""
    try:
        if args.json_path:
            write_atomic(Path(args.json_path), dumps_json(report))
        if args.write_report:
            refs = repo_root() / "references"
            write_report(report, refs / "verification.json", refs / "verification.md", chosen.known,
                         documented_sizes=options.world_size is None)
            print(f"wrote {refs / 'verification.md'} and verification.json")
    except OSError as exc:  # checked at the start, so only a disk filling up or a folder removed meanwhile
        print(f"verify: error: cannot write the report {exc.filename or ''} ({exc.strerror}); "
              "the results are printed above", file=sys.stderr)
        return False
    return True


def _check_report_paths(args: argparse.Namespace) -> None:
    """Fail before the run, not after it, when a report cannot be written where it was asked for."""
    targets = [("--json", Path(args.json_path))] if args.json_path else []
    if args.write_report:
        targets.append(("--write-report", repo_root() / "references" / "verification.json"))
    for flag, path in targets:
        reason = unwritable_reason(path)
        if reason:
            raise UserError(f"{flag} {path}: {reason}")


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    try:
        args = build_parser(prog).parse_args(argv)
        return cli_verify(args)
    except KeyboardInterrupt:
        print("verify: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `verify_examples.py ... | head`: the reader left; stop quietly
        return stdout_closed()

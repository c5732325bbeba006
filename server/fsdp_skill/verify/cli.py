"""Command line of the runner: `fsdp-skill verify`, `python -m fsdp_skill.verify`, scripts/verify_examples.py.

All three parse the same flags (`add_arguments`) and call `cli_verify`: the catalog's examples first
(pooled ranks), then its patterns (each a torchrun job, rows named `pattern:<name>`). Exit codes: 0 when
nothing failed, 1 when any example or pattern failed, 2 for bad input (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsdp_skill.core.errors import UserError  # stdlib only, like core.paths
from fsdp_skill.core.paths import repo_root, writable_root

from .args import add_arguments
from .catalog_patterns import PATTERN_PREFIX, PatternSpec, is_pattern_id, pattern_timeout, patterns_from_catalog, run_patterns, select_patterns
from . import page_run
from .examples import CatalogReadError, ExampleSpec, examples_from_catalog, read_catalog, select
from .page_plan import PageBlock, blocks_from_catalog
from .report import STATUSES, build_report, counts, dumps_json, write_atomic, write_report
from .runner import Result, RunOptions, launched_by_torchrun, run_launched, run_spawned

_STATUS_STYLE = {"passed": "green", "passed-with-stand-ins": "green", "doc-bug": "yellow", "checked": "cyan", "skipped": "dim",
                 "failed": "bold red"}


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Run the catalog's documented examples across ranks, then its patterns under torchrun."
    )
    add_arguments(parser)
    return parser


class _InputError(Exception):
    pass


def _options(args: argparse.Namespace) -> RunOptions:
    if not args.timeout or args.timeout <= 0:
        raise _InputError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.world_size is not None and not 1 <= args.world_size <= 64:
        raise _InputError(f"--world-size must be between 1 and 64, got {args.world_size}")
    return RunOptions(backend=args.backend, world_size=args.world_size, timeout_s=float(args.timeout))


@dataclass
class _Selection:
    torch_version: str | None
    examples: list[ExampleSpec]
    patterns: list[PatternSpec]
    known: set[str]  # every example and pattern id in the catalog (the report drops rows of others)
    data: dict[str, Any]
    page_blocks: list[PageBlock]


def _selected(args: argparse.Namespace) -> _Selection:
    path = Path(args.catalog) if getattr(args, "catalog", None) else repo_root() / "references" / "catalog.json"
    data = read_catalog(path)
    only_patterns, no_patterns = getattr(args, "only_patterns", False), getattr(args, "no_patterns", False)
    # Parsing the examples costs a second on a full catalog: skip it when only patterns run.
    all_examples = [] if only_patterns else examples_from_catalog(data, path)
    all_patterns = [] if no_patterns else patterns_from_catalog(data, repo_root(), where=str(path))
    ids = args.ids or []
    example_ids = [i for i in ids if not is_pattern_id(i)]
    pattern_ids = [i for i in ids if is_pattern_id(i)]
    if only_patterns and example_ids:
        raise _InputError(f"--only-patterns runs no examples, but --id {example_ids[0]!r} names one: drop one of the two")
    if no_patterns and pattern_ids:
        raise _InputError(f"--no-patterns runs no patterns, but --id {pattern_ids[0]!r} names one: drop one of the two")
    # Ids that name only patterns select no example (and the reverse): --id is "exactly these".
    all_blocks = [] if only_patterns or getattr(args, "no_page_code", False) else blocks_from_catalog(data)
    page_ids = [i for i in example_ids if "#" in i and i.rsplit(":", 1)[-1].isdigit()]
    example_ids = [i for i in example_ids if i not in page_ids]
    examples = [] if ids and not example_ids else select(all_examples, ids=example_ids, pattern=args.pattern)
    blocks = [] if ids and not page_ids else page_run.select_blocks(all_blocks, page_ids, args.pattern)
    patterns = select_patterns(all_patterns, ids=ids, pattern=args.pattern)
    if not examples and not patterns and not blocks:
        if only_patterns and not all_patterns:
            raise _InputError(f"{path} lists no patterns: regenerate it with `fsdp-skill regenerate`")
        what = "pattern id" if only_patterns else "example id" if no_patterns else "example id or pattern id"
        raise _InputError(f"no {what} contains {args.pattern!r}; try a shorter -k, e.g. -k all_reduce or -k fsdp2")
    # Straight from the JSON, so that rows of the kind this run skipped stay in the report.
    known = {e["id"] for e in data["examples"] if isinstance(e, dict) and isinstance(e.get("id"), str)}
    known |= {PATTERN_PREFIX + p["name"] for p in data.get("patterns") or [] if isinstance(p, dict) and isinstance(p.get("name"), str)}
    known |= {b.id for b in blocks_from_catalog(data)}
    return _Selection(data.get("torch_version"), examples, patterns, known, data, blocks)


def _progress_printer(total: int) -> Any:
    done = [0]

    def show(result: Result) -> None:
        done[0] += 1
        print(f"[{done[0]:>3}/{total}] {result['status']:<8} {result['name']} (ws {result['world_size']}, {result['seconds']:.2f} s)",
              file=sys.stderr, flush=True)

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
        style = _STATUS_STYLE.get(r["status"])
        status = f"[{style}]{r['status']}[/]" if style else r["status"]
        table.add_row(r["name"], str(r["world_size"]), status, f"{r['seconds']:.2f}", note)
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
    statuses = [s for s in STATUSES if kind == "examples" or s not in ("doc-bug", "checked")]
    return f"verify: {kind}: " + ", ".join(f"{tally.get(s, 0)} {s}" for s in statuses) + f" ({len(results)} {kind})"


PATTERNS_UNDER_TORCHRUN = (
    "patterns not run: under torchrun this process is one rank, and each pattern starts its own torchrun; "
    "run `fsdp-skill verify --only-patterns` without a launcher"
)


def _run_examples(specs: list[ExampleSpec], options: RunOptions, progress: Any, planned: list[ExampleSpec] = ()) -> list[Result] | None:  # type: ignore[assignment]
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
        if launched and not chosen.examples:
            raise _InputError(
                "under torchrun only examples run (each pattern starts its own torchrun) and none is selected: "
                "run `fsdp-skill verify --only-patterns` without a launcher"
            )
    except (CatalogReadError, _InputError, UserError) as exc:
        print(f"verify: error: {exc}", file=sys.stderr)
        return 2
    import torch  # the runner's one dependency; imported only once the input is known to be good

    torch_version = torch.__version__.split("+")[0]
    patterns = [] if launched else chosen.patterns
    page_context, page_plans = page_run.plan_all(chosen.data, chosen.page_blocks, options.backend)
    # Page code runs at the page's own world size in the spawned pool; under torchrun only the static checks run.
    page_specs = [] if launched else page_run.runnable_specs(page_plans)
    page_rows = page_run.static_rows(page_context, page_plans, options.backend)
    progress = _progress_printer(len(chosen.examples) + len(page_specs) + len(patterns))
    try:
        ran = _run_examples(chosen.examples, options, progress, page_specs)
    except ValueError as exc:
        print(f"verify: error: {exc}", file=sys.stderr)
        return 2
    finally:
        page_run.remove_workdir()
    if ran is None:
        return 0
    page_ids = {s.id for s in page_specs}
    results = page_run.static_for_fragments([r for r in ran if r["name"] not in page_ids], chosen.examples)
    page_rows = sorted(page_rows + page_run.finish_run_rows(page_plans, [r for r in ran if r["name"] in page_ids]),
                       key=lambda r: [b.id for b in chosen.page_blocks].index(r["name"]))
    pattern_results = run_patterns(patterns, options.backend, pattern_timeout(options.timeout_s), progress=progress)
    if results:
        print_table(results)
    if page_rows:
        print_table(page_rows, label="page code")
    if pattern_results:
        print_table(pattern_results, label="pattern")
    print_details(results + page_rows + pattern_results)
    notes = [f"{s.id}: {note}" for s in chosen.examples for note in s.notes]
    if notes:
        print("\ncatalog notes (fix in the catalog build):\n  " + "\n  ".join(notes))
    if chosen.torch_version and chosen.torch_version.split("+")[0] != torch_version:
        print(f"\nnote: the catalog was built from torch {chosen.torch_version}; this is torch {torch_version}")
    if launched and chosen.patterns:
        print(f"\nnote: {len(chosen.patterns)} {PATTERNS_UNDER_TORCHRUN}")
    if pattern_results and options.world_size is not None:
        print(f"\nnote: patterns ran at the world size each one states; --world-size {options.world_size} applies to examples")
    if results:
        print(summary_line(results, "examples"))
    if page_rows:
        print(page_run.summary_line(page_rows))
        for line in page_run.tally_by_kind(page_rows):
            print(f"  {line}")
    if pattern_results:
        print(summary_line(pattern_results, "patterns"))
    everything = results + page_rows + pattern_results
    report = build_report(everything, torch_version)
    if args.json_path:
        write_atomic(Path(args.json_path), dumps_json(report))
    if args.write_report:
        refs = repo_root() / "references"
        write_report(report, refs / "verification.json", refs / "verification.md", chosen.known,
                     documented_sizes=options.world_size is None)
        print(f"wrote {refs / 'verification.md'} and verification.json")
    return 1 if any(r["status"] == "failed" for r in everything) else 0


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    args = build_parser(prog).parse_args(argv)
    try:
        return cli_verify(args)
    except KeyboardInterrupt:
        print("verify: interrupted", file=sys.stderr)
        return 130

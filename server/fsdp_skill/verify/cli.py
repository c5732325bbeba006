"""Command line of the runner: `fsdp-skill verify`, `python -m fsdp_skill.verify`, scripts/verify_examples.py.

All three parse the same flags (`add_arguments`) and call `cli_verify`. Exit codes: 0 when nothing
failed, 1 when any example failed, 2 for bad input (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .args import add_arguments
from .examples import CatalogReadError, ExampleSpec, load_examples, select
from .report import STATUSES, build_report, counts, dumps_json, write_atomic, write_report
from .runner import Result, RunOptions, launched_by_torchrun, run_launched, run_spawned

_STATUS_STYLE = {"passed": "green", "doc-bug": "yellow", "skipped": "dim", "failed": "bold red"}


def repo_root() -> Path:
    # Same rule as fsdp_skill.paths (not imported: this subpackage depends on the stdlib and torch only).
    env = os.environ.get("FSDP_SKILL_ROOT")
    return Path(env).resolve() if env else Path(__file__).resolve().parents[3]


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Run the catalog's documented examples across ranks.")
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


def _selected(args: argparse.Namespace) -> tuple[str | None, list[ExampleSpec], set[str]]:
    path = Path(args.catalog) if getattr(args, "catalog", None) else repo_root() / "references" / "catalog.json"
    torch_version, specs = load_examples(path)
    chosen = select(specs, ids=args.ids, pattern=args.pattern)
    if not chosen:
        raise _InputError(f"no example id contains {args.pattern!r}; try a shorter -k, e.g. -k all_reduce")
    return torch_version, chosen, {s.id for s in specs}


def _progress_printer(total: int) -> Any:
    done = [0]

    def show(result: Result) -> None:
        done[0] += 1
        print(f"[{done[0]:>3}/{total}] {result['status']:<8} {result['name']} (ws {result['world_size']}, {result['seconds']:.2f} s)",
              file=sys.stderr, flush=True)

    return show


def _plain_table(results: list[Result]) -> str:
    width = max((len(r["name"]) for r in results), default=10)
    lines = [f"{'example':<{width}}  ws  {'status':<8}  reason"]
    for r in results:
        reason = (r.get("reason") or "").replace("\n", " ")
        if r.get("warnings"):
            reason = (reason + " | " if reason else "") + "warns: " + "; ".join(r["warnings"])
        lines.append(f"{r['name']:<{width}}  {r['world_size']:>2}  {r['status']:<8}  {reason}")
    return "\n".join(lines)


def print_table(results: list[Result]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(_plain_table(results))
        return
    table = Table(show_lines=False)
    for column in ("example", "ws", "status", "s", "reason / warnings"):
        table.add_column(column, overflow="fold")
    for r in results:
        note = r.get("reason") or ""
        if r.get("warnings"):
            note = (note + "\n" if note else "") + "warns: " + "; ".join(r["warnings"])
        style = _STATUS_STYLE.get(r["status"], "")
        table.add_row(r["name"], str(r["world_size"]), f"[{style}]{r['status']}[/]", f"{r['seconds']:.2f}", note)
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


def summary_line(results: list[Result]) -> str:
    tally = counts(results)
    return "verify: " + ", ".join(f"{tally.get(s, 0)} {s}" for s in STATUSES) + f" ({len(results)} examples)"


def cli_verify(args: argparse.Namespace) -> int:
    try:
        options = _options(args)
        catalog_torch, specs, known = _selected(args)
    except (CatalogReadError, _InputError) as exc:
        print(f"verify: error: {exc}", file=sys.stderr)
        return 2
    import torch  # the runner's one dependency; imported only once the input is known to be good

    torch_version = torch.__version__.split("+")[0]
    launched = launched_by_torchrun()
    if launched:
        try:
            results = run_launched(specs, options, progress=_progress_printer(len(specs)))
        except ValueError as exc:
            print(f"verify: error: {exc}", file=sys.stderr)
            return 2
        if results is None:
            return 0  # not rank 0: rank 0 reports for everyone
    else:
        results = run_spawned(specs, options, progress=_progress_printer(len(specs)))
    print_table(results)
    print_details(results)
    notes = [f"{s.id}: {note}" for s in specs for note in s.notes]
    if notes:
        print("\ncatalog notes (fix in the catalog build):\n  " + "\n  ".join(notes))
    if catalog_torch and catalog_torch.split("+")[0] != torch_version:
        print(f"\nnote: the catalog was built from torch {catalog_torch}; this is torch {torch_version}")
    print(summary_line(results))
    report = build_report(results, torch_version)
    if args.json_path:
        write_atomic(Path(args.json_path), dumps_json(report))
    if args.write_report:
        refs = repo_root() / "references"
        write_report(report, refs / "verification.json", refs / "verification.md", known, documented_sizes=options.world_size is None)
        print(f"wrote {refs / 'verification.md'} and verification.json")
    return 1 if any(r["status"] == "failed" for r in results) else 0


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    args = build_parser(prog).parse_args(argv)
    try:
        return cli_verify(args)
    except KeyboardInterrupt:
        print("verify: interrupted", file=sys.stderr)
        return 130

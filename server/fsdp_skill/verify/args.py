"""The runner's command-line flags, shared by `fsdp-skill verify`, `python -m fsdp_skill.verify` and
scripts/verify_examples.py. Kept apart from `cli` (stdlib only, no runner imports) so that building the
`fsdp-skill` parser, which every command does, costs nothing: `fsdp-skill serve` starts fast.
"""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend", choices=["gloo", "nccl"], default="gloo", help="gloo runs on CPU; nccl needs one GPU per rank"
    )
    p.add_argument(
        "--world-size",
        type=int,
        help="run every selected example at this many ranks (default: each at its documented world size; "
        "outputs are compared only at the documented size)",
    )
    p.add_argument(
        "--max-ranks",
        type=int,
        metavar="N",
        help="run anything stated for more than N ranks (examples, page code, patterns, claim checks) at N ranks "
        "instead of skipping it: for nccl on a machine with N GPUs (NCCL refuses two ranks on one GPU); those rows "
        "say so, and outputs are compared only at the stated size",
    )
    p.add_argument(
        "-k", dest="pattern",
        help="only examples, patterns (pattern:NAME) and claim checks (claim:NAME) whose id contains PATTERN "
        "(case-insensitive)",
    )
    p.add_argument(
        "--id", dest="ids", action="append", metavar="EXACT_ID",
        help="only this example id, pattern id like pattern:fsdp2-training or claim id like claim:NAME (repeatable)",
    )
    p.add_argument(
        "--timeout", type=float, default=60.0,
        help="per-example timeout in seconds (default 60); a pattern gets max(TIMEOUT, 180)",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--no-patterns", action="store_true", help="run the examples only, not assets/patterns/")
    which.add_argument("--only-patterns", action="store_true", help="run the patterns in assets/patterns/ only")
    p.add_argument("--no-page-code", action="store_true",
                   help="leave out the code blocks of the reference pages (run or statically checked by default)")
    which.add_argument("--only-claims", action="store_true",
                       help="run only the claim checks in assets/checks/ (each backs a SKILL.md statement)")
    p.add_argument("--no-claims", action="store_true", help="do not run the claim checks in assets/checks/")
    mutants = p.add_mutually_exclusive_group()
    mutants.add_argument(
        "--mutants", action="store_true",
        help="after the selected claim checks and patterns, run each mutant their headers declare (an edit that "
        "makes the claim false, on a scratch copy) and require its run to fail: rows mutant:ROW:NAME, killed or "
        "survived (implied by --write-report)",
    )
    mutants.add_argument(
        "--only-mutants", action="store_true",
        help="run only the mutants of the claim checks and patterns (-k and --id select mutant ids such as "
        "mutant:claim:NAME:MUTANT, or every mutant of claim:NAME / pattern:NAME)",
    )
    mutants.add_argument("--no-mutants", action="store_true", help="do not run mutants, even with --write-report")
    p.add_argument(
        "--json",
        dest="json_path",
        metavar="PATH",
        help="write the JSON report (a row per example, pattern and claim check) here",
    )
    p.add_argument("--write-report", action="store_true", help="rewrite references/verification.md (+ .json)")
    p.add_argument("--catalog", metavar="PATH", help="catalog.json to read (default: references/catalog.json)")

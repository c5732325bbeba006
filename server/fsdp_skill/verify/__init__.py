"""The example runner: execute the catalog's documented examples on every rank and classify them.

This subpackage imports nothing but the stdlib and torch (and rich, when installed, for a table), plus
the stdlib-only `core` modules (atomic, paths, errors, scratch, vocabulary, quoting), so a plain clone runs it through
scripts/verify_examples.py. torch itself is imported lazily, inside the
functions that need it, so `--help` and input errors answer instantly.

Modules, one job each:
- `examples`: read catalog.json with `json`, cut doctest steps into compilable units
- `rewrite`: point hard-coded CUDA devices at the rank's device; find fragments and CUDA-only code
- `plan`: capabilities of this machine and the reason an example is skipped before running
- `execute`: run one example on one rank (namespace, output capture, warnings, tracebacks)
- `worker` / `pool`: spawned ranks for one world size, per-example timeout, teardown
- `compare`: normalize outputs and classify passed / failed / skipped / doc-bug
- `runner`: plan, group by world size, run (spawned pools, or as a torchrun rank)
- `patterns`: the header of an assets/patterns/ script, and one run of it under torchrun
- `catalog_patterns`: the catalog's patterns as report rows (`pattern:<name>`), run after the examples
- `claims`: the claim checks of assets/checks/ (one per SKILL.md statement) as rows `claim:<name>`
- `mutants`: the edits each check's and pattern's header declares to make its claim false; each must make
  its run fail (rows `mutant:<row>:<name>`, killed or survived), run last with --mutants / --only-mutants
- page code (the code blocks of the reference pages): `code_shape` (what a block defines, reads, launches),
  `page_plan` (assemble a block with the blocks it needs and the page's launcher; decide run / static / skip),
  `launcher` + `page_exec` (the page's own `mp.spawn` / `mp.Process` served by the pool's ranks, in each rank),
  `standins` (declared stand-ins and stated outcomes), `static_check` (names resolved, calls bound),
  `page_run` (rows per block), `page_report` (their part of verification.md)
- `report`: verification.json / verification.md
- `nccl_report`: a GPU pass (scripts/nccl_pass.sh) as verification-nccl.{json,md}
- `releases`: the release matrix: every claim check and pattern on each torch release, in throwaway venvs
- `cli`: the flags shared by `fsdp-skill verify`, `python -m fsdp_skill.verify` and the script
"""

from __future__ import annotations

import importlib
from typing import Any

# Loaded on first use, not at import: `fsdp_skill.verify.args` is imported by every `fsdp-skill` command
# (to build the parser), and none of them should pay for the runner's modules.
_LAZY = {
    "cli_verify": "cli", "main": "cli", "ExampleSpec": "examples", "Unit": "examples",
    "load_examples": "examples", "select": "examples", "RunOptions": "runner", "run_spawned": "runner",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The public face: the runner's entry points and specs above, and the modules the CLI, the benchmarks and
# the build use (tests/test_layers.py holds other stages to it).
__all__ = [
    "ExampleSpec", "RunOptions", "Unit", "cli_verify", "load_examples", "main", "run_spawned", "select",
    "args", "claims", "cli", "code_shape", "examples", "mutants", "patterns", "plan", "pool", "releases", "report",
    "runner", "static_check",
]

"""The example runner: execute the catalog's documented examples on every rank and classify them.

This subpackage imports nothing but the stdlib and torch (and rich, when installed, for a table), plus
the stdlib-only `core.atomic`, `core.paths` and `core.errors`, so a plain clone runs it through
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
- `report`: verification.json / verification.md
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


__all__ = ["ExampleSpec", "RunOptions", "Unit", "cli_verify", "load_examples", "main", "run_spawned", "select"]

"""cli: the `fsdp-skill` command — the argument parser and its subcommands (search/show, validate, the
benchmarks); each handler is imported lazily so `fsdp-skill serve` pays only for what it runs.

Imports: any stage below it (`serve`, `build`, `verify`, ...).
"""

from fsdp_skill.cli.main import main

__all__ = ["main"]

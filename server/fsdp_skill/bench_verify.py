"""`fsdp-skill bench verify`: the pooled runner against a spawn per example and against the floor.

All three run in one process, one after the other, on the same machine state:
- pooled: `fsdp_skill.verify` as shipped (one pool per world size, reused across examples)
- spawn per example: the same runner with a fresh spawn + init + teardown for every example
- floor: a bare spawn + init + destroy per world size, running nothing — no pooled run can beat it

Targets printed with the ratios: pooled at least 5x faster than spawn-per-example, and within 1.5x of
the floor. Exit status 1 when a target is missed, so CI can run it as a check.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .errors import UserError
from .paths import catalog_path
from .verify.examples import CatalogReadError, load_examples
from .verify.plan import Capabilities
from .verify.runner import static_verdict
from .verify.pool import RankPool
from .verify.report import counts
from .verify.runner import RunOptions, run_spawned

SPEEDUP_TARGET = 5.0
FLOOR_TARGET = 1.5


def _floor(sizes: list[int], timeout_s: float) -> float:
    started = time.perf_counter()
    for size in sizes:
        pool = RankPool(size, "gloo", timeout_s)
        pool.start()
        pool.close()
    return time.perf_counter() - started


def cli_bench_verify(args: argparse.Namespace) -> int:
    path: Path = Path(args.catalog) if getattr(args, "catalog", None) else catalog_path()
    try:
        _, specs = load_examples(path)
    except CatalogReadError as exc:
        raise UserError(str(exc)) from None
    caps = Capabilities.detect()
    runnable = [s for s in specs if static_verdict(s, "gloo", s.world_size, caps) is None]
    if not runnable:
        raise UserError(f"{path} has no example that can run on gloo here: nothing to benchmark")
    sizes = sorted({s.world_size for s in runnable})
    print(f"bench verify: {len(specs)} examples, {len(runnable)} runnable on gloo, world sizes {sizes}")

    timings: dict[str, float] = {}
    # The floor runs first: on a shared machine the later runs would otherwise get the warmer caches.
    timings["floor"] = _floor(sizes, args.timeout)
    print(f"  {'floor':<18} {timings['floor']:8.2f} s   (bare spawn + init + destroy for each of {len(sizes)} world sizes)")
    for label, per_example in (("pooled", False), ("spawn per example", True)):
        started = time.perf_counter()
        results = run_spawned(specs, RunOptions(timeout_s=args.timeout, pool_per_example=per_example), caps)
        timings[label] = time.perf_counter() - started
        tally = ", ".join(f"{n} {status}" for status, n in sorted(counts(results).items()))
        print(f"  {label:<18} {timings[label]:8.2f} s   ({tally})")

    speedup = timings["spawn per example"] / timings["pooled"]
    over_floor = timings["pooled"] / timings["floor"]
    ok_speed, ok_floor = speedup >= SPEEDUP_TARGET, over_floor <= FLOOR_TARGET
    print(f"pooled vs spawn per example: {speedup:.1f}x faster (target >= {SPEEDUP_TARGET:g}x) {'ok' if ok_speed else 'MISSED'}")
    print(f"pooled vs floor: {over_floor:.2f}x the floor (target <= {FLOOR_TARGET:g}x) {'ok' if ok_floor else 'MISSED'}")
    return 0 if ok_speed and ok_floor else 1

"""`fsdp-skill bench verify`: the pooled runner against a spawn per example and against the floor.

All three run in one process, on the same machine state:
- pooled: `fsdp_skill.verify` as shipped (one pool spawned for the largest world size; each world size
  re-initializes the process group in those processes)
- spawn per example: the same runner with a fresh spawn + init + teardown for every example
- floor: the issue's definition, a bare spawn + init + destroy per world size, running nothing. It was a
  lower bound for a runner with one pool per world size; the shipped runner spawns only once (the
  largest size) and re-inits in warm processes, so it can beat this floor: a ratio below 1.0 is
  expected and is printed as measured.

The floor uses the runner's own machinery: `RankPool` (torch.multiprocessing's spawn context, a
FileStore rendezvous, a polite stop), started with exactly `size` processes for each world size.

Fairness on a shared machine: an untimed warm-up pool first (otherwise whatever runs first pays for the
cold page cache and the first spawn),
then `ROUNDS` paired rounds of floor and pooled, alternating which goes first. The floor ratio is the
median of the per-round ratios (each pairs runs made under the same load); the speedup divides the one
spawn-per-example run (the slow one, made after the first round) by the median pooled run. Every wall
sample is printed, and CPU seconds (this process + its reaped ranks) with their ratios as a cross-check
that other jobs on the machine inflate far less.

Targets printed with the ratios: pooled at least 5x faster than spawn-per-example, and at most 1.5x
the floor (below 1.0 is fine). Exit status 1 when a target is missed, so CI can run it as a check.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import catalog_path
from fsdp_skill.verify.examples import CatalogReadError, ExampleSpec, load_examples
from fsdp_skill.verify.plan import Capabilities
from fsdp_skill.verify.pool import RankPool
from fsdp_skill.verify.report import counts
from fsdp_skill.verify.runner import RunOptions, run_spawned, static_verdict

SPEEDUP_TARGET = 5.0
FLOOR_TARGET = 1.5
ROUNDS = 3  # floor and pooled samples each; odd, so a median is one measured run


@dataclass(frozen=True)
class Sample:
    wall: float  # seconds on the clock: the target
    cpu: float  # user + system seconds of this process and every rank it reaped: a cross-check that
    #             other jobs on a shared machine inflate far less than the wall clock


def _measure(work: Callable[[], str]) -> tuple[Sample, str]:
    before, started = os.times(), time.perf_counter()
    detail = work()
    wall, after = time.perf_counter() - started, os.times()
    cpu = sum(getattr(after, f) - getattr(before, f) for f in ("user", "system", "children_user", "children_system"))
    return Sample(wall, cpu), detail


def _floor(sizes: list[int], timeout_s: float) -> str:
    """A bare spawn + init + destroy per world size, as the issue defines the floor; runs nothing."""
    for size in sizes:
        pool = RankPool(size, "gloo", timeout_s)
        pool.start()
        try:
            pool.join_group(size)
            pool.leave_group()
        finally:
            pool.close()
    return ""


def _run(specs: list[ExampleSpec], caps: Capabilities, timeout_s: float, per_example: bool) -> str:
    """Run the whole catalog; the tally of statuses, to check both ways verified the same thing."""
    results = run_spawned(specs, RunOptions(timeout_s=timeout_s, pool_per_example=per_example), caps)
    return ", ".join(f"{n} {status}" for status, n in sorted(counts(results).items()))


def _line(label: str, samples: list[Sample], note: str) -> str:
    walls = " ".join(f"{s.wall:.2f}" for s in samples)
    cpu = statistics.median(s.cpu for s in samples)
    return (
        f"  {label:<18} {statistics.median(s.wall for s in samples):8.2f} s wall ({walls}), {cpu:7.2f} s cpu   {note}"
    )


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
    print(f"bench verify: {len(specs)} examples, {len(runnable)} runnable on gloo, world sizes {sizes}; "
          f"{ROUNDS} paired rounds of floor and pooled (medians), after an untimed warm-up")

    _floor(sizes[:1], args.timeout)  # warm-up: page cache and the first spawn are paid here, untimed
    floors: list[Sample] = []
    pooled: list[Sample] = []
    per_example: list[Sample] = []
    tallies: set[str] = set()
    for round_number in range(ROUNDS):
        # Alternate which goes first, so a load that rises or falls during the bench favours neither.
        order = ("floor", "pooled") if round_number % 2 == 0 else ("pooled", "floor")
        for which in order:
            if which == "floor":
                floors.append(_measure(lambda: _floor(sizes, args.timeout))[0])
            else:
                sample, tally = _measure(lambda: _run(specs, caps, args.timeout, per_example=False))
                pooled.append(sample)
                tallies.add(tally)
        if round_number == 0:
            sample, tally = _measure(lambda: _run(specs, caps, args.timeout, per_example=True))
            per_example.append(sample)
            tallies.add(tally)
    if len(tallies) != 1:  # every run must verify the same thing, or the ratios compare different work
        raise UserError(f"the runs disagree on the results ({' / '.join(sorted(tallies))}); rerun the bench")
    tally = tallies.pop()
    print(_line("floor", floors, f"(bare spawn + init + destroy for each of {len(sizes)} world sizes)"))
    print(_line("pooled", pooled, f"({tally})"))
    print(_line("spawn per example", per_example, "(one run)"))

    pool = statistics.median(s.wall for s in pooled)
    speedup = per_example[0].wall / pool
    # Per-round ratios: each pairs a floor with the pooled run next to it, under the same load.
    over_floor = statistics.median(p.wall / f.wall for p, f in zip(pooled, floors))
    cpu_speedup = per_example[0].cpu / statistics.median(s.cpu for s in pooled)
    cpu_over_floor = statistics.median(p.cpu / f.cpu for p, f in zip(pooled, floors))
    ok_speed, ok_floor = speedup >= SPEEDUP_TARGET, over_floor <= FLOOR_TARGET
    print(
        f"pooled vs spawn per example: {speedup:.1f}x faster (target >= {SPEEDUP_TARGET:g}x) "
        f"{'ok' if ok_speed else 'MISSED'}"
        f"   [cpu: {cpu_speedup:.1f}x]"
    )
    print(
        f"pooled vs floor: {over_floor:.2f}x the floor, median of paired rounds "
        f"(target <= {FLOOR_TARGET:g}x; below 1 is fine) "
        f"{'ok' if ok_floor else 'MISSED'}   [cpu: {cpu_over_floor:.2f}x]"
    )
    return 0 if ok_speed and ok_floor else 1

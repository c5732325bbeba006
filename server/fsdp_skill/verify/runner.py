"""Run selected examples: plan the skips, one pool re-grouped per world size, classify, one result each.

Two modes share the planning and classification:
- spawned (the default): this process is the parent; ranks live in a `pool.RankPool` it owns, spawned
  once for the largest world size and re-initialized for each size (a fresh pool only after a failure).
- launched (`torchrun` set RANK / WORLD_SIZE / MASTER_ADDR): this process *is* one rank; it joins the
  launcher's group via env://, runs the examples of the launched size in step with its peers, and the
  per-rank results are all-gathered so rank 0 can classify and report.
"""

from __future__ import annotations

import datetime
import faulthandler
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .compare import Verdict, classify
from .examples import ExampleSpec
from .execute import RankContext, run_example
from .plan import Capabilities, skip_reason, syntax_error
from .pool import Outcome, PoolStartError, RankPool

# After an example raised, the pool proves it is still in step with a barrier this long before reuse.
SYNC_TIMEOUT_S = 10.0

Result = dict[str, Any]
Progress = Callable[[Result], None]


@dataclass
class RunOptions:
    backend: str = "gloo"
    world_size: int | None = None  # run every example at this size instead of its documented one
    timeout_s: float = 60.0
    pool_per_example: bool = False  # the benchmark's baseline: a fresh spawn + init for every example
    notes: list[str] = field(default_factory=list)
    # --max-ranks: anything stated for more ranks runs at this many (NCCL on a machine with fewer GPUs
    # than ranks: NCCL refuses two ranks on one GPU). Outputs are compared only at the stated size.
    max_ranks: int | None = None

    def fitted(self, size: int) -> int:
        return min(size, self.max_ranks) if self.max_ranks else size


def launched_by_torchrun(environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return all(k in env for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR"))


def payload_for(spec: ExampleSpec) -> dict[str, Any]:
    # The symbol picks the module globals the example runs in (see `module_globals`).
    payload = {"id": spec.id, "symbol": spec.symbol, "units": [u.to_json() for u in spec.units]}
    page = getattr(spec, "page", None)
    if page is not None:  # page code: how the page launches it (see page_exec)
        payload["page"] = page
    return payload


def make_result(
    spec: ExampleSpec, backend: str, world_size: int, verdict: Verdict, seconds: float, warnings: list[str]
) -> Result:
    result: Result = {
        "name": spec.id,
        "backend": backend,
        "world_size": world_size,
        "status": verdict.status,
        "reason": verdict.reason,
        "seconds": round(seconds, 3),
        "warnings": warnings,
    }
    if verdict.ranks:
        result["ranks"] = verdict.ranks
    return result


def _warnings(outcome: Outcome) -> list[str]:
    seen: dict[str, None] = {}
    for _, res in sorted(outcome.results.items()):
        for w in res.get("warnings", []):
            seen.setdefault(w, None)
    return list(seen)


def _at_other_size(verdict: Verdict, spec: ExampleSpec, world_size: int) -> Verdict:
    """At a world size the docs did not write it for, an example whose outputs could not be compared
    is not a pass: it ran, and that is all this run shows (one with no documented output passes on
    running cleanly, as it would at its own size). Nor is an exception there the docs' bug: code written
    for 2 ranks may rightly fail at 1 (a mesh of 2, a list with an entry per rank)."""
    if world_size != spec.world_size and verdict.status == "doc-bug" and verdict.raised:
        verdict.status = "skipped"
        verdict.reason = (
            f"raised at world size {world_size}, but it is documented for {spec.world_size} rank(s), where it "
            f"would need to be run to judge it: {verdict.reason}"
        )
        return verdict
    if world_size != spec.world_size and verdict.status == "passed" and any(u.wants_output() for u in spec.units):
        verdict.status = "skipped"
        verdict.reason = (
            f"ran without error at world size {world_size}, but its outputs are documented for {spec.world_size} "
            f"rank(s) and were not compared: run it at {spec.world_size} to check them"
        )
    return verdict


def _plan(
    specs: list[ExampleSpec], options: RunOptions, caps: Capabilities, results: dict[str, Result]
) -> dict[int, list[ExampleSpec]]:
    groups: dict[int, list[ExampleSpec]] = {}
    for spec in specs:
        size = options.fitted(options.world_size or spec.world_size)
        verdict = static_verdict(spec, options.backend, size, caps)
        if verdict:
            results[spec.id] = make_result(spec, options.backend, size, verdict, 0.0, [])
        else:
            groups.setdefault(size, []).append(spec)
    return groups


def static_verdict(
    spec: ExampleSpec, backend: str, size: int, caps: Capabilities, launched: bool = False
) -> Verdict | None:
    """A verdict reached without running: code that does not parse (doc-bug) or a skip reason."""
    if spec.units and (bad := syntax_error(spec)):
        return Verdict("doc-bug", bad + (f" (upstream marks it SKIP: {spec.skip})" if spec.skip else ""))
    reason = skip_reason(spec, backend, size, caps, launched)
    return Verdict("skipped", reason) if reason else None


def _fail_all(
    specs: list[ExampleSpec],
    size: int,
    why: str,
    options: RunOptions,
    results: dict[str, Result],
    progress: Progress | None,
) -> None:
    for spec in specs:
        results[spec.id] = make_result(spec, options.backend, size, Verdict("failed", why), 0.0, [])
        if progress:
            progress(results[spec.id])


class _PoolKeeper:
    """Hands out a pool whose ranks 0..size-1 form a group of `size`; replaces pools that were torn down.

    One pool serves every world size: it is spawned for the largest size still needed, and moving to
    another size only re-inits the process group in the same processes. The benchmark's baseline
    (`pool_per_example`) instead gets a fresh pool of exactly the example's size every time.
    """

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self.pool: RankPool | None = None

    def ready(self, size: int, largest_needed: int) -> RankPool:
        """Raises PoolStartError when even a freshly spawned pool cannot form the group."""
        pool = self.pool
        if pool is not None and pool.alive and pool.group_size == size:
            return pool
        if pool is not None and pool.alive and pool.size >= size:
            try:
                pool.join_group(size)  # leaves the previous group first
                return pool
            except PoolStartError:
                pass  # the pool is killed; a fresh one gets one more try below
        self.discard()
        pool = RankPool(largest_needed, self.options.backend, self.options.timeout_s)
        pool.start()
        pool.join_group(size)
        self.pool = pool
        return pool

    def after(self, outcome: Outcome) -> None:
        """Drop a pool that was torn down, or that cannot prove its group is still in step."""
        pool = self.pool
        if pool is None:
            return
        if not pool.alive:
            self.pool = None  # torn down after a hang or a crash; the next example gets a fresh one
        elif any(r.get("error") for r in outcome.results.values()) and not pool.sync(SYNC_TIMEOUT_S):
            self.discard(kill=True)
        elif self.options.pool_per_example:
            self.discard()

    def discard(self, kill: bool = False) -> None:
        if self.pool is not None:
            self.pool.close(kill=kill)
            self.pool = None


def _run_groups(
    groups: dict[int, list[ExampleSpec]], options: RunOptions, results: dict[str, Result], progress: Progress | None
) -> None:
    keeper = _PoolKeeper(options)
    sizes = sorted(groups)
    try:
        for index, size in enumerate(sizes):
            specs = groups[size]
            for position, spec in enumerate(specs):
                largest = size if options.pool_per_example else max(sizes[index:])
                try:
                    pool = keeper.ready(size, largest)
                except PoolStartError as exc:
                    # This size's examples cannot run; the next size tries again with a fresh pool.
                    _fail_all(specs[position:], size, f"the pool did not start: {exc}", options, results, progress)
                    break
                started = time.perf_counter()
                outcome = pool.run(payload_for(spec), options.timeout_s)
                seconds = time.perf_counter() - started
                verdict = _at_other_size(
                    classify(spec, outcome, compare_outputs=size == spec.world_size, backend=options.backend),
                    spec,
                    size,
                )
                results[spec.id] = make_result(spec, options.backend, size, verdict, seconds, _warnings(outcome))
                if progress:
                    progress(results[spec.id])
                keeper.after(outcome)
    finally:
        keeper.discard()


def run_spawned(
    specs: list[ExampleSpec], options: RunOptions, caps: Capabilities | None = None, progress: Progress | None = None,
    planned: list[ExampleSpec] = (),  # type: ignore[assignment]
) -> list[Result]:
    """Results in the order of `specs` then `planned`; world-size groups run smallest first, all in one pool.

    `planned`: specs already planned elsewhere (page code, see page_plan), run at their own world size.
    """
    caps = caps or Capabilities.detect()
    results: dict[str, Result] = {}
    groups = _plan(specs, options, caps, results)
    for spec in planned:
        groups.setdefault(options.fitted(spec.world_size), []).append(spec)
    specs = [*specs, *planned]
    if progress:
        for spec in specs:
            if spec.id in results:
                progress(results[spec.id])
    _run_groups(groups, options, results, progress)
    return [results[s.id] for s in specs]


# -- launched by torchrun ----------------------------------------------------------------------------


def _all_gather_json(obj: Any, device: Any) -> list[Any]:
    """all_gather of JSON-able objects through uint8 tensors (object collectives would need numpy)."""
    import torch
    import torch.distributed as dist

    data = json.dumps(obj).encode()
    size = torch.tensor([len(data)], dtype=torch.int64, device=device)
    sizes = [torch.zeros_like(size) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, size)
    longest = int(max(s.item() for s in sizes))
    buf = torch.zeros(longest, dtype=torch.uint8, device=device)
    buf[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device)
    gathered = [torch.zeros_like(buf) for _ in sizes]
    dist.all_gather(gathered, buf)
    return [json.loads(bytes(t[: int(n.item())].cpu().tolist()).decode()) for t, n in zip(gathered, sizes)]


def _watchdog(seconds: float, example_id: str, rank: int) -> threading.Timer:
    def fire() -> None:
        print(f"rank {rank}: {example_id} still running after {seconds:g} s; stacks follow, then exit", file=sys.stderr)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        os._exit(1)  # the launcher then stops the other ranks

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def run_launched(
    specs: list[ExampleSpec], options: RunOptions, progress: Progress | None = None
) -> list[Result] | None:
    """Run as one rank of a torchrun launch. Returns the results on rank 0, None on the other ranks."""
    import torch
    import torch.distributed as dist

    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if options.world_size is not None and options.world_size != size:
        raise ValueError(
            f"--world-size {options.world_size} but torchrun launched {size} ranks: drop --world-size or relaunch"
        )
    device = torch.device("cpu")
    if options.backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    dist.init_process_group(
        options.backend, init_method="env://", timeout=datetime.timedelta(seconds=options.timeout_s)
    )
    ctx = RankContext(rank=rank, world_size=size, local_rank=local_rank, backend=options.backend, device=device)
    caps = Capabilities.detect()
    results: list[Result] = []
    try:
        for spec in specs:
            static = static_verdict(spec, options.backend, size, caps, launched=True)
            if static is None and options.world_size is None and spec.world_size != size:
                static = Verdict(
                    "skipped",
                    f"documented for {spec.world_size} rank(s); launched with {size} (add --world-size {size} to run "
                    "it anyway)",
                )
            if static:
                results.append(make_result(spec, options.backend, size, static, 0.0, []))
            else:
                timer = _watchdog(options.timeout_s + 10.0, spec.id, rank)
                started = time.perf_counter()
                try:
                    mine = run_example(payload_for(spec), ctx, barrier=False)
                    everyone = _all_gather_json(mine, device)
                finally:
                    timer.cancel()
                outcome = Outcome(results={r["rank"]: r for r in everyone})
                verdict = _at_other_size(
                    classify(spec, outcome, compare_outputs=size == spec.world_size, backend=options.backend),
                    spec,
                    size,
                )
                results.append(
                    make_result(spec, options.backend, size, verdict, time.perf_counter() - started, _warnings(outcome))
                )
            if progress and rank == 0:
                progress(results[-1])
    finally:
        dist.destroy_process_group()
    return results if rank == 0 else None

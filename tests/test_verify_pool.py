"""Multi-process behaviour of the example runner: hangs, raising ranks, recycling, re-grouping, no orphans.

Two runs (one at a single world size, one across sizes 1, 2 and 3) cover every scenario so that the ranks
are spawned as few times as possible (2 shared cores).
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from fsdp_skill.verify import pool as pool_module
from fsdp_skill.verify import runner as runner_module
from fsdp_skill.verify.examples import spec_from_entry
from fsdp_skill.verify.plan import Capabilities
from fsdp_skill.verify.runner import RunOptions, run_spawned

pytestmark = [pytest.mark.timeout(300), pytest.mark.torch]  # every test spawns ranks that import torch


def _example(name: str, steps: list[tuple[str, object]]) -> dict:
    out = []
    for line, (source, expected) in enumerate(steps, 1):
        by_rank = expected if isinstance(expected, dict) else {}
        shared = expected if isinstance(expected, str) else None
        out.append({"source": source, "expected": shared, "expected_by_rank": by_rank, "line": line})
    return {
        "id": f"torch.distributed.all_reduce#{name}",
        "symbol": "torch.distributed.all_reduce",
        "steps": out,
        "world_size": 2,
    }


EXAMPLES = [
    _example("ok-before", [
        ("t = torch.ones(2, device=torch.device(f'cuda:{rank}')) * (rank + 1)", None),
        ("dist.all_reduce(t)", None),
        ("t", "tensor([3., 3.], device='cuda:0')"),
    ]),
    # rank 0 waits for a message rank 1 never sends: only the parent's deadline can end it.
    _example("hangs", [("if rank == 0:\n    dist.recv(torch.zeros(1), src=1)", None)]),
    _example("pid-after-hang", [("import os", None), ("os.getpid()", "0")]),
    # rank 1 raises before the collective that rank 0 is then stuck in.
    _example("rank1-raises", [
        ("if rank == 1:\n    raise ValueError('boom on rank 1')", None),
        ("dist.all_reduce(torch.ones(1))", None),
    ]),
    _example("pid-after-raise", [("import os", None), ("os.getpid()", "0")]),
    _example("all-ranks-raise", [("torch.ones(2) + torch.ones(3)", None)]),
    _example("warns", [("op = dist.reduce_op.SUM", None)]),
    _example("ok-after", [("x = torch.tensor([rank])", None), ("dist.all_reduce(x)", None), ("x", "tensor([1])")]),
]


def _live_children() -> list[int]:
    """Processes whose parent is this test process (zombies count: they were not reaped).

    Python's own resource tracker is left out: every spawn-based start on POSIX shares one, and it
    exits by itself with this process; it never runs example code.
    """
    me, found = str(os.getpid()), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("PPid", "").strip() != me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"multiprocessing.resource_tracker" not in cmdline:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict:
    mp = pytest.MonkeyPatch()
    mp.setattr(pool_module, "ERROR_GRACE_S", 1.0)  # a raising rank's peers count as stuck after 1 s
    before = set(_live_children())
    try:
        specs = [spec_from_entry(e) for e in EXAMPLES]
        results = run_spawned(specs, RunOptions(backend="gloo", timeout_s=4.0), Capabilities.detect())
    finally:
        mp.undo()
    return {"results": {r["name"].split("#")[1]: r for r in results}, "before": before}


def test_examples_around_failures_pass_and_cuda_devices_are_rewritten_to_cpu(outcome: dict) -> None:
    assert outcome["results"]["ok-before"]["status"] == "passed", outcome["results"]["ok-before"]
    assert outcome["results"]["ok-after"]["status"] == "passed", outcome["results"]["ok-after"]


def test_warnings_raised_by_an_example_are_reported_once(outcome: dict) -> None:
    result = outcome["results"]["warns"]
    assert result["status"] == "passed"
    assert result["warnings"] == [
        "FutureWarning: `torch.distributed.reduce_op` is deprecated, please use `torch.distributed.ReduceOp` instead"
    ]


def test_an_example_that_hangs_past_its_timeout_fails_with_the_stuck_ranks_stack(outcome: dict) -> None:
    hang = outcome["results"]["hangs"]
    assert hang["status"] == "failed"
    assert "timed out after 4 s" in hang["reason"]
    stacks = {r["rank"]: r.get("stack", "") for r in hang["ranks"]}
    assert "hangs line 1" in stacks[0], stacks  # the example's own frame, from faulthandler


def test_a_rank_that_raises_is_reported_with_its_traceback_and_the_stuck_peer(outcome: dict) -> None:
    raised = outcome["results"]["rank1-raises"]
    assert raised["status"] == "failed"
    assert "rank(s) 1 raised" in raised["reason"] and "rank(s) 0 did not finish" in raised["reason"]
    by_rank = {r["rank"]: r for r in raised["ranks"]}
    assert "ValueError: boom on rank 1" in by_rank[1]["traceback"]
    assert "rank1-raises line 2" in by_rank[0]["stack"]


def test_an_error_raised_identically_on_every_rank_is_a_doc_bug_and_the_pool_survives(outcome: dict) -> None:
    result = outcome["results"]["all-ranks-raise"]
    assert result["status"] == "doc-bug"
    assert "raises RuntimeError on every rank" in result["reason"]


def test_a_fresh_pool_replaces_a_killed_one_and_the_killed_ranks_are_gone(outcome: dict) -> None:
    def pids(name: str) -> set[int]:
        return {int(d["actual"]) for r in outcome["results"][name]["ranks"] for d in r["diffs"]}

    after_hang, after_raise = pids("pid-after-hang"), pids("pid-after-raise")
    assert len(after_hang) == len(after_raise) == 2
    assert after_hang.isdisjoint(after_raise)  # the raise tore the pool down; new ranks ran the rest
    assert not [pid for pid in after_hang | after_raise if _alive(pid)]


def test_no_child_process_survives_a_run(outcome: dict) -> None:
    assert multiprocessing.active_children() == []
    leftover = [pid for pid in set(_live_children()) - outcome["before"] if _alive(pid)]
    assert leftover == []


# -- one pool across world sizes ------------------------------------------------------------------


def _sized(name: str, world_size: int, steps: list[tuple[str, object]]) -> dict:
    return {**_example(name, steps), "world_size": world_size}


def _bindings(name: str, world_size: int) -> dict:
    """Each rank prints its runner bindings and the process group's view; rank r of N expects (r, N, r, N)."""
    expected = {
        str(r): f"({r}, {world_size}, {r}, {world_size}, {world_size * (world_size - 1) // 2})"
        for r in range(world_size)
    }
    return _sized(name, world_size, [
        ("t = torch.tensor([rank])", None),
        ("dist.all_reduce(t)", None),
        ("(rank, world_size, dist.get_rank(), dist.get_world_size(), int(t))", expected),
    ])


SIZED_EXAMPLES = [
    _bindings("size1", 1),
    _bindings("size2-before-crash", 2),
    # rank 1's process dies outright: the whole pool (idle process included) goes, the run goes on.
    _sized("size2-crash", 2, [("import os", None), ("if rank == 1:\n    os._exit(3)", None), ("dist.barrier()", None)]),
    _bindings("size2-after-crash", 2),
    _bindings("size3", 3),
]


class _RecordingPool(pool_module.RankPool):
    """The real pool, remembering how many processes it spawned, their pids and the groups it joined."""

    started: list[_RecordingPool] = []

    def start(self, start_timeout_s: float | None = None) -> None:
        self.joined: list[int] = []
        super().start(start_timeout_s)
        self.pids = [proc.pid for proc in self.procs]
        _RecordingPool.started.append(self)

    def join_group(self, world_size: int) -> None:
        self.joined.append(world_size)
        super().join_group(world_size)


@pytest.fixture(scope="module")
def sized_run() -> dict:
    mp = pytest.MonkeyPatch()
    mp.setattr(runner_module, "RankPool", _RecordingPool)
    _RecordingPool.started = []
    before = set(_live_children())
    try:
        specs = [spec_from_entry(e) for e in SIZED_EXAMPLES]
        results = run_spawned(specs, RunOptions(backend="gloo", timeout_s=20.0), Capabilities.detect())
    finally:
        mp.undo()
    pools = [(pool.size, pool.joined, pool.pids) for pool in _RecordingPool.started]
    return {"results": {r["name"].split("#")[1]: r for r in results}, "pools": pools, "before": before}


def test_one_pool_serves_every_world_size_with_the_right_rank_and_world_size_bindings(sized_run: dict) -> None:
    results = sized_run["results"]
    for name in ("size1", "size2-before-crash", "size2-after-crash", "size3"):
        assert results[name]["status"] == "passed", results[name]
    assert [r["world_size"] for r in results.values()] == [1, 2, 2, 2, 3]
    # Spawned for the largest size (3) and re-grouped at 1 then 2; not one pool per world size.
    first_size, first_groups, _ = sized_run["pools"][0]
    assert (first_size, first_groups) == (3, [1, 2])


def test_a_crash_in_the_size_2_group_is_reported_and_a_fresh_pool_runs_the_rest_of_size_2_and_size_3(
    sized_run: dict,
) -> None:
    crash = sized_run["results"]["size2-crash"]
    assert crash["status"] == "failed"
    assert "rank(s) died while running the example (rank 1 exit code 3)" in crash["reason"]
    assert len(sized_run["pools"]) == 2
    (_, _, killed_pids), (fresh_size, fresh_groups, fresh_pids) = sized_run["pools"]
    assert (fresh_size, fresh_groups) == (3, [2, 3])  # the sizes still needed, largest first spawned
    assert set(killed_pids).isdisjoint(fresh_pids)
    assert not [pid for pid in killed_pids + fresh_pids if _alive(pid)]  # idle process 2 included


def test_no_child_process_survives_a_run_across_world_sizes(sized_run: dict) -> None:
    assert multiprocessing.active_children() == []
    leftover = [pid for pid in set(_live_children()) - sized_run["before"] if _alive(pid)]
    assert leftover == []

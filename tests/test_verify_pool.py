"""Multi-process behaviour of the example runner: hangs, raising ranks, recycling, no orphans.

One run covers every scenario so that the ranks are spawned as few times as possible (2 shared cores).
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from fsdp_skill.verify import pool as pool_module
from fsdp_skill.verify.examples import spec_from_entry
from fsdp_skill.verify.plan import Capabilities
from fsdp_skill.verify.runner import RunOptions, run_spawned

pytestmark = pytest.mark.timeout(300)


def _example(name: str, steps: list[tuple[str, object]]) -> dict:
    out = []
    for line, (source, expected) in enumerate(steps, 1):
        by_rank = expected if isinstance(expected, dict) else {}
        shared = expected if isinstance(expected, str) else None
        out.append({"source": source, "expected": shared, "expected_by_rank": by_rank, "line": line})
    return {"id": f"torch.distributed.all_reduce#{name}", "symbol": "torch.distributed.all_reduce", "steps": out, "world_size": 2}


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
    assert result["warnings"] == ["FutureWarning: `torch.distributed.reduce_op` is deprecated, please use `torch.distributed.ReduceOp` instead"]


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

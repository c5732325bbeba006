"""verify_example (`serve --allow-run`): limits on runs and ranks that hold under concurrent calls and are
told to the caller, and runs that die with the server, leaving no process and no scratch folder.

The runner is a stand-in with the real runner's process shape: rank processes that lead their own
process groups and die with the runner (verify.worker asks the kernel for that), one helper process in
the runner's own group that does not, and a scratch folder under TMPDIR (the pool's workdir).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from fsdp_skill.core.errors import UserError
from fsdp_skill.serve import runs
from fsdp_skill.serve.runs import RunSlots
from fsdp_skill.serve.server import build_server
from search_fixture import make_tree
from stdio_session import StdioSession

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PR_SET_PDEATHSIG")

STAND_IN_RUNNER = textwrap.dedent("""\
    import argparse, json, os, subprocess, sys, tempfile, time
    from pathlib import Path
    p = argparse.ArgumentParser()
    for flag in ("--id", "--backend", "--world-size", "--timeout", "--json"):
        p.add_argument(flag)
    a = p.parse_args()
    marks = Path(os.environ["STAND_IN_MARKS"])
    workdir = tempfile.mkdtemp(prefix="fsdp-verify-")  # like the pool's: under TMPDIR
    # As verify.worker does: the kernel's SIGKILL when the runner dies, then a check that it had not already.
    RANK = ("import ctypes, os, signal, sys, time; ctypes.CDLL(None).prctl(1, signal.SIGKILL); "
            "os.getppid() == int(sys.argv[1]) or os._exit(1); open(sys.argv[2], 'w').close(); time.sleep(300)")
    ready = [Path(workdir) / f"rank{n}" for n in range(int(a.world_size))]
    ranks = [subprocess.Popen([sys.executable, "-c", RANK, str(os.getpid()), str(path)], start_new_session=True)
             for path in ready]
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    while not all(path.exists() for path in ready):
        time.sleep(0.05)
    (marks / f"{os.getpid()}.running").write_text(workdir)
    deadline = time.monotonic() + 60
    while not (marks / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    for proc in (*ranks, helper):
        proc.kill()
        proc.wait()
    json.dump({"torch_version": "2.13.0", "date": "x", "results": [{
        "name": a.id, "backend": a.backend, "world_size": int(a.world_size), "status": "passed",
        "reason": None, "seconds": 0.1, "warnings": []}]}, open(a.json, "w"))
""")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    return root


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The stand-in runner on PYTHONPATH; yields the folder it marks its runs in (`release` there ends them)."""
    (tmp_path / "stand_in_runner.py").write_text(STAND_IN_RUNNER)
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("STAND_IN_MARKS", str(marks))
    monkeypatch.setattr(runs, "RUNNER_MODULE", "stand_in_runner")
    yield marks
    (marks / "release").touch()  # whatever happened, no stand-in waits on


def wait_until(condition: Any, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def descendants(pid: int) -> set[int]:
    """Every live process below pid (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None and stat[0] != "Z":
            children.setdefault(stat[1], []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None when it is gone."""
    try:
        text = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


# ---------------------------------------------------------------- limits

def test_run_slots_refuse_a_run_over_either_limit_and_free_their_claim_when_it_ends() -> None:
    slots = RunSlots(max_runs=2, max_ranks=6)
    with slots.claim(4):
        with pytest.raises(UserError, match=r"2 more ranks would make 6 running|would make 7 running"):
            with slots.claim(3):
                pass
        with slots.claim(2), pytest.raises(UserError, match=r"already running 2 examples.*--max-runs 2"):
            with slots.claim(1):
                pass
    assert (slots.runs, slots.ranks) == (0, 0)
    with pytest.raises(UserError, match=r"world_size 7 is over this server's limit of 6 ranks"):
        with slots.claim(7):
            pass


def five_concurrent_calls(tree: Path, marks: Path, slots: RunSlots, world_size: int) -> list[Any]:
    """Five verify_example calls at once; once the admitted ones are running, they are released."""
    async def main() -> list[Any]:
        results: list[Any] = [None] * 5
        async with Client(build_server(tree, allow_run=True, runs=slots)) as client:
            async def one(n: int) -> None:
                results[n] = await client.call_tool(
                    "verify_example", {"name": "torch.distributed.all_reduce#1", "world_size": world_size})

            with anyio.fail_after(120):
                async with anyio.create_task_group() as group:
                    for n in range(5):
                        group.start_soon(one, n)
                    # The refused calls answer at once; the admitted ones run until `release`.
                    while sum(r is not None for r in results) + len(list(marks.glob("*.running"))) < 5:
                        await anyio.sleep(0.05)
                    running = len(list(marks.glob("*.running")))
                    (marks / "release").touch()
        return [running, *results]
    return anyio.run(main)


def test_five_concurrent_calls_run_at_most_max_runs_and_the_others_are_told_the_limit(
    tree: Path, stand_in: Path
) -> None:
    running, *results = five_concurrent_calls(tree, stand_in, RunSlots(max_runs=2, max_ranks=8), world_size=2)
    passed = [r for r in results if not r.is_error]
    refused = [r.content[0].text for r in results if r.is_error]
    assert running == 2 and len(passed) == 2 and len(refused) == 3
    assert all(r.structured_content["results"][0]["status"] == "passed" for r in passed)
    for text in refused:
        assert "already running 2 examples, this server's limit (fsdp-skill serve --max-runs 2)" in text
        assert "call it again when one has finished" in text


def test_five_concurrent_calls_stay_within_the_total_rank_limit(tree: Path, stand_in: Path) -> None:
    running, *results = five_concurrent_calls(tree, stand_in, RunSlots(max_runs=5, max_ranks=5), world_size=2)
    refused = [r.content[0].text for r in results if r.is_error]
    assert running == 2 and len(refused) == 3
    assert all("2 more ranks would make 6 running, over this server's limit of 5" in text for text in refused)


def test_the_tool_description_states_the_limits(tree: Path) -> None:
    async def main() -> str:
        async with Client(build_server(tree, allow_run=True, runs=RunSlots(3, 12))) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            return tools["verify_example"].description or ""
    assert "at most 3 runs at once and 12 ranks in all" in anyio.run(main)


# ---------------------------------------------------------------- nothing outlives the server

SERVER_WITH_STAND_IN = (
    "import sys; from fsdp_skill.serve import runs; runs.RUNNER_MODULE = 'stand_in_runner'; "
    "from fsdp_skill.cli.main import main; sys.exit(main(['serve', '--allow-run']))"
)


def start_a_run(tree: Path, stand_in: Path, tmp_path: Path, world_size: int) -> tuple[StdioSession, Path, set[int]]:
    """A real server over stdio, its TMPDIR in tmp_path, with one verify_example run going: (session, the
    scratch folders' parent, every process below the server)."""
    scratch_parent = tmp_path / "tmp"
    scratch_parent.mkdir()
    session = StdioSession(tree, command=[sys.executable, "-c", SERVER_WITH_STAND_IN],
                           env={"TMPDIR": str(scratch_parent)})
    session.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "verify_example", "arguments": {"name": "torch.distributed.all_reduce#1", "world_size": world_size}}}))
    wait_until(lambda: list(stand_in.glob("*.running")), "the run started")
    return session, scratch_parent, descendants(session.proc.pid)


def test_kill_9_of_the_server_during_a_run_leaves_no_process_and_no_scratch_folder(
    tree: Path, stand_in: Path, tmp_path: Path
) -> None:
    session, scratch_parent, below = start_a_run(tree, stand_in, tmp_path, world_size=3)
    try:
        assert len(below) == 6, below  # the guard, the runner, its 3 ranks and its helper
        workdir = Path(next(stand_in.glob("*.running")).read_text())
        assert workdir.is_relative_to(scratch_parent), workdir  # the runner's TMPDIR is the run's scratch folder
        os.kill(session.proc.pid, signal.SIGKILL)
        session.proc.wait(timeout=30)
        wait_until(lambda: not any(alive(pid) for pid in below), "every process of the run is gone", timeout_s=30)
        wait_until(lambda: not any(scratch_parent.iterdir()), "the scratch folder is removed", timeout_s=30)
    finally:
        for pid in below:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        session.close()


def test_a_server_shutting_down_stops_its_runs_and_removes_their_scratch_folders(
    tree: Path, stand_in: Path, tmp_path: Path
) -> None:
    session, scratch_parent, below = start_a_run(tree, stand_in, tmp_path, world_size=2)
    session.proc.send_signal(signal.SIGTERM)  # what a client does when closing stdin was not enough
    assert session.proc.wait(timeout=30) == 143
    session.close()
    wait_until(lambda: not any(alive(pid) for pid in below), "every process of the run is gone", timeout_s=30)
    wait_until(lambda: not any(scratch_parent.iterdir()), "the scratch folder is removed", timeout_s=30)


def test_a_full_server_never_suggests_world_size_zero() -> None:
    slots = RunSlots(max_runs=3, max_ranks=4)
    with slots.claim(4), pytest.raises(UserError) as refused:
        with slots.claim(2):
            pass
    assert "call again when a run has finished" in str(refused.value) and "world_size=0" not in str(refused.value)
    with slots.claim(1), pytest.raises(UserError, match=r"or pass world_size=3 or fewer"):
        with slots.claim(4):
            pass

"""A pool of ranks: spawn once for the largest world size, re-init the process group for each size.

Importing torch dominates a rank's start, so a run spawns its processes once, as many as the largest
world size it needs, and for each world size N asks processes 0..N-1 to join a fresh process group of
size N (a new FileStore file each time); processes N and up sit idle for that group. Between sizes the
group's ranks destroy it. Joining and leaving a group in warm processes costs milliseconds.

The parent talks to each process over its own pipe and waits on the pipes and the process sentinels
together (`multiprocessing.connection.wait`), so a result, a dead rank and the deadline are all noticed
without polling. Anything abnormal — the per-example deadline passing, a rank dying, ranks still busy a
few seconds after another rank raised (they are blocked in a collective it never reached), a group that
cannot be joined or left — collects each stuck rank's Python stack (SIGUSR1 → faulthandler) and kills
the whole pool, idle processes included. The caller then starts a fresh pool for the remaining examples.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from fsdp_skill.core.errors import FsdpSkillError  # stdlib only
from fsdp_skill.core.scratch import make_scratch_dir

from .worker import worker_main

# After one rank raised, how long the others get to finish before they count as stuck.
ERROR_GRACE_S = 5.0
# How long a stopping pool gets to leave on its own before it is killed.
STOP_GRACE_S = 5.0
_LOG_TAIL_CHARS = 4000


class PoolStartError(FsdpSkillError):
    """The ranks could not start or init their process group; the message carries their tracebacks."""


@dataclass
class Outcome:
    """What the ranks sent back for one example, plus what went wrong at the pool level (if anything)."""

    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    failure: str | None = None  # "timeout", "crashed" or "stuck-after-error"
    message: str | None = None
    stacks: dict[int, str] = field(default_factory=dict)  # rank -> Python stack of a stuck/dead rank
    logs: dict[int, str] = field(default_factory=dict)  # rank -> tail of its stdout/stderr


def _tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()[-_LOG_TAIL_CHARS:]
    except OSError:
        return ""


class RankPool:
    """`size` spawned processes; while a group is joined, processes 0..group_size-1 are its ranks."""

    def __init__(self, size: int, backend: str, timeout_s: float) -> None:
        self.size = size
        self.backend = backend
        self.timeout_s = timeout_s
        # `fsdp-verify-<pid>-*` in the temp folder: a killed runner's is removed by the next pool.
        self.workdir = str(make_scratch_dir(Path(tempfile.gettempdir()), "fsdp-verify-"))
        self.procs: list[Any] = []
        self.conns: list[Connection] = []
        self.alive = False
        self.group_size = 0  # world size of the joined group; 0 while no group is joined
        self.groups_joined = 0  # how many groups this pool has joined (each gets its own store file)

    def _log(self, rank: int) -> str:
        return os.path.join(self.workdir, f"rank{rank}.log")

    def _members(self) -> list[int]:
        return list(range(self.group_size))

    def _send(self, rank: int, message: dict[str, Any]) -> None:
        # A rank that already died cannot be written to; the gather that follows sees its sentinel.
        try:
            self.conns[rank].send(message)
        except (OSError, ValueError):
            pass

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, start_timeout_s: float | None = None) -> None:
        """Spawn the processes and wait until each has imported torch. Raises PoolStartError."""
        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.alive = True
        try:
            for rank in range(self.size):
                parent_end, child_end = ctx.Pipe(duplex=True)
                proc = ctx.Process(
                    target=worker_main,
                    args=(rank, self.backend, self._log(rank), self.timeout_s, os.getpid(), child_end),
                    name=f"verify-rank{rank}",
                    daemon=True,
                )
                self.conns.append(parent_end)
                proc.start()
                child_end.close()
                self.procs.append(proc)
        except BaseException:
            self.close(kill=True)  # the ranks already started, and the pool's folder, go too
            raise
        # Importing torch in every process is the slow part of a start; it is bounded like everything else.
        deadline = time.monotonic() + (start_timeout_s or max(120.0, self.timeout_s))
        self._expect(list(range(self.size)), "ready", deadline, f"could not start {self.size} {self.backend} processes")

    def join_group(self, world_size: int) -> None:
        """Processes 0..world_size-1 init a fresh process group of that size. Raises PoolStartError."""
        if not self.alive:
            raise RuntimeError("join_group() on a closed pool")
        if not 1 <= world_size <= self.size:
            raise ValueError(f"world size {world_size} does not fit a pool of {self.size} processes")
        if self.group_size:
            self.leave_group()
        self.groups_joined += 1
        store = os.path.join(self.workdir, f"store-{self.groups_joined}-ws{world_size}")
        for rank in range(world_size):
            self._send(rank, {"kind": "join", "world_size": world_size, "store": store})
        self.group_size = world_size
        deadline = time.monotonic() + max(60.0, self.timeout_s)
        self._expect(self._members(), "joined", deadline, f"could not init a {world_size}-rank {self.backend} group")

    def leave_group(self) -> None:
        """The group's ranks destroy it. Raises PoolStartError (pool killed) when they cannot."""
        members = self._members()
        self.group_size = 0
        for rank in members:
            self._send(rank, {"kind": "leave"})
        self._expect(
            members, "left", time.monotonic() + max(30.0, self.timeout_s), "could not destroy the process group"
        )

    def _expect(self, ranks: list[int], kind: str, deadline: float, what: str) -> None:
        """Every rank in `ranks` answers `kind` before the deadline, or the pool is killed and PoolStartError
        says why."""
        # grace_on_error: a rank that failed to init leaves the others blocked in the rendezvous.
        replies = self._gather(set(ranks), deadline, grace_on_error=True)
        problems: list[str] = []
        for rank in ranks:
            msg = replies.get(rank) or {}
            if msg.get("kind") != kind:
                why = msg.get("traceback") or f"did not answer {kind!r} (exit code {self.procs[rank].exitcode})"
                problems.append(f"rank {rank}: {why.strip().splitlines()[-1]}")
        if problems:
            logs = "; ".join(t.strip().splitlines()[-1] for r in ranks if (t := _tail(self._log(r))).strip())
            self.close(kill=True)
            raise PoolStartError(f"{what}: " + "; ".join(problems) + (f" (log: {logs})" if logs else ""))

    def close(self, kill: bool = False) -> None:
        """Stop every process (politely unless kill), reap them all, remove the pool's folder. Idempotent."""
        if not kill:
            for conn in self.conns:
                try:
                    conn.send({"kind": "stop"})
                except (OSError, ValueError):
                    pass
            deadline = time.monotonic() + STOP_GRACE_S
            for proc in self.procs:
                proc.join(max(0.0, deadline - time.monotonic()))
        for proc in self.procs:
            if proc.is_alive() or proc.exitcode is None:
                self._kill_group(proc)
        for proc in self.procs:
            proc.join(STOP_GRACE_S)
        for conn in self.conns:
            conn.close()
        self.procs, self.conns, self.alive, self.group_size = [], [], False, 0
        shutil.rmtree(self.workdir, ignore_errors=True)

    @staticmethod
    def _kill_group(proc: Any) -> None:
        # Each rank leads its own process group: killing the group also takes anything it started.
        for kill in (lambda: os.killpg(proc.pid, signal.SIGKILL), proc.kill):
            try:
                kill()
            except (ProcessLookupError, PermissionError, OSError, AttributeError):
                continue

    # -- running -----------------------------------------------------------------------------------

    def _gather(self, pending: set[int], deadline: float, grace_on_error: bool = False) -> dict[int, dict[str, Any]]:
        """Receive one message from each pending rank, until the deadline or a rank dies."""
        replies: dict[int, dict[str, Any]] = {}
        by_conn = {self.conns[r]: r for r in pending}
        by_sentinel = {self.procs[r].sentinel: r for r in pending}
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ready = wait([self.conns[r] for r in pending] + [self.procs[r].sentinel for r in pending], remaining)
            dead = False
            for obj in ready:
                rank = by_conn.get(obj)  # type: ignore[call-overload]
                if rank is None:
                    rank = by_sentinel[obj]
                    # A rank that exits right after answering is not dead until its answer is read.
                    if rank in pending and not self.conns[rank].poll():
                        self._reap(rank)
                        dead = True
                    continue
                if rank not in pending:
                    continue
                try:
                    replies[rank] = self.conns[rank].recv()
                except (EOFError, OSError):
                    self._reap(rank)
                    dead = True
                    continue
                pending.discard(rank)
                if grace_on_error and (replies[rank].get("error") or replies[rank].get("kind") == "init-error"):
                    deadline = min(deadline, time.monotonic() + ERROR_GRACE_S)
            if dead:
                break
        return replies

    def _reap(self, rank: int) -> None:
        # A process's sentinel and pipe close a moment before the kernel lets it be reaped: wait for that
        # (bounded), so the caller sees a dead rank with its exit code, not a live and "stuck" one.
        self.procs[rank].join(STOP_GRACE_S)

    def _stacks(self, ranks: list[int]) -> dict[int, str]:
        """Ask stuck ranks for their Python stacks and read them back (bounded wait)."""
        paths = {rank: self._log(rank) + ".stack" for rank in ranks}
        for rank in ranks:
            if self.procs[rank].is_alive() and hasattr(signal, "SIGUSR1"):
                try:
                    os.kill(self.procs[rank].pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass
        # faulthandler writes the dump in many small writes: wait until every file stops growing.
        deadline = time.monotonic() + 2.0
        sizes: dict[int, int] = {}
        while time.monotonic() < deadline:
            time.sleep(0.05)
            now = {rank: os.path.getsize(path) if os.path.exists(path) else 0 for rank, path in paths.items()}
            if now == sizes and all(now.values()):
                break
            sizes = now
        return {rank: _tail(path) for rank, path in paths.items()}

    def run(self, example: dict[str, Any], timeout_s: float) -> Outcome:
        if not self.alive or not self.group_size:
            raise RuntimeError("run() needs a started pool that joined a group")
        started = time.monotonic()
        for rank in self._members():
            self._send(rank, {"kind": "run", "example": example})
        replies = self._gather(set(self._members()), started + timeout_s, grace_on_error=True)
        outcome = Outcome(results={r: m for r, m in replies.items() if m.get("kind") == "result"})
        missing = [r for r in self._members() if r not in outcome.results]
        if not missing:
            return outcome
        dead = [r for r in missing if not self.procs[r].is_alive()]
        stuck = [r for r in missing if r not in dead]
        elapsed = time.monotonic() - started
        if dead:
            outcome.failure = "crashed"
            codes = ", ".join(f"rank {r} exit code {self.procs[r].exitcode}" for r in dead)
            outcome.message = f"rank(s) died while running the example ({codes})"
        elif elapsed >= timeout_s:
            outcome.failure = "timeout"
            outcome.message = f"timed out after {timeout_s:g} s; rank(s) {', '.join(map(str, stuck))} still running"
        else:
            outcome.failure = "stuck-after-error"
            raised = ", ".join(str(r) for r in sorted(outcome.results) if outcome.results[r].get("error"))
            outcome.message = (
                f"rank(s) {raised} raised; rank(s) {', '.join(map(str, stuck))} did not finish within "
                f"{ERROR_GRACE_S:g} s (blocked in a collective the raising rank never reached)"
            )
        outcome.stacks = self._stacks(stuck)
        for rank in dead:  # a fatal signal's stack (faulthandler) and the rank's last output
            outcome.stacks[rank] = _tail(self._log(rank) + ".stack")
        outcome.logs = {r: tail for r in missing if (tail := _tail(self._log(r)).strip())}
        self.close(kill=True)
        return outcome

    def sync(self, timeout_s: float) -> bool:
        """A barrier across the pool: True when every rank answered (the group is still usable)."""
        for rank in self._members():
            self._send(rank, {"kind": "sync"})
        replies = self._gather(set(self._members()), time.monotonic() + timeout_s)
        return len(replies) == self.group_size and all(m.get("kind") == "synced" for m in replies.values())

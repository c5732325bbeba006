"""A pool of ranks for one world size: spawn once, init once, run many examples, die cleanly.

The parent talks to each rank over its own pipe and waits on the pipes and the process sentinels
together (`multiprocessing.connection.wait`), so a result, a dead rank and the deadline are all noticed
without polling. Anything abnormal — the per-example deadline passing, a rank dying, ranks still busy a
few seconds after another rank raised (they are blocked in a collective it never reached) — collects
each stuck rank's Python stack (SIGUSR1 → faulthandler) and kills the whole pool. The caller then
starts a fresh pool for the remaining examples.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from .worker import worker_main

# After one rank raised, how long the others get to finish before they count as stuck.
ERROR_GRACE_S = 5.0
# How long a stopping pool gets to leave on its own before it is killed.
STOP_GRACE_S = 5.0
_LOG_TAIL_CHARS = 4000


class PoolStartError(Exception):
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
    def __init__(self, world_size: int, backend: str, timeout_s: float) -> None:
        self.world_size = world_size
        self.backend = backend
        self.timeout_s = timeout_s
        self.workdir = tempfile.mkdtemp(prefix=f"fsdp-verify-ws{world_size}-")
        self.procs: list[Any] = []
        self.conns: list[Connection] = []
        self.alive = False

    def _log(self, rank: int) -> str:
        return os.path.join(self.workdir, f"rank{rank}.log")

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, start_timeout_s: float | None = None) -> None:
        import torch.multiprocessing as mp

        ctx = mp.get_context("spawn")
        store = os.path.join(self.workdir, "store")
        for rank in range(self.world_size):
            parent_end, child_end = ctx.Pipe(duplex=True)
            proc = ctx.Process(
                target=worker_main,
                args=(rank, self.world_size, self.backend, store, self._log(rank), self.timeout_s, os.getpid(), child_end),
                name=f"verify-rank{rank}",
                daemon=True,
            )
            proc.start()
            child_end.close()
            self.procs.append(proc)
            self.conns.append(parent_end)
        self.alive = True
        # Importing torch in every rank is the slow part of a start; it is bounded like everything else.
        deadline = time.monotonic() + (start_timeout_s or max(120.0, self.timeout_s))
        replies = self._gather(set(range(self.world_size)), deadline)
        problems: list[str] = []
        for rank in range(self.world_size):
            msg = replies.get(rank) or {}
            if msg.get("kind") != "ready":
                why = msg.get("traceback") or f"did not report ready (exit code {self.procs[rank].exitcode})"
                problems.append(f"rank {rank}: {why.strip().splitlines()[-1]}")
        if problems:
            logs = "; ".join(t.strip().splitlines()[-1] for r in range(self.world_size) if (t := _tail(self._log(r))).strip())
            self.close(kill=True)
            raise PoolStartError(
                f"could not start {self.world_size} {self.backend} ranks: " + "; ".join(problems) + (f" (log: {logs})" if logs else "")
            )

    def close(self, kill: bool = False) -> None:
        """Stop every rank (politely unless kill), reap them all, remove the pool's folder. Idempotent."""
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
        self.procs, self.conns, self.alive = [], [], False
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
                    rank = by_sentinel[obj]  # type: ignore[index]
                    # A rank that exits right after answering is not dead until its answer is read.
                    if rank in pending and not self.conns[rank].poll():
                        dead = True
                    continue
                if rank not in pending:
                    continue
                try:
                    replies[rank] = self.conns[rank].recv()
                except (EOFError, OSError):
                    dead = True
                    continue
                pending.discard(rank)
                if grace_on_error and replies[rank].get("error"):
                    deadline = min(deadline, time.monotonic() + ERROR_GRACE_S)
            if dead:
                break
        return replies

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
        if not self.alive:
            raise RuntimeError("run() on a closed pool")
        started = time.monotonic()
        for conn in self.conns:
            conn.send({"kind": "run", "example": example})
        replies = self._gather(set(range(self.world_size)), started + timeout_s, grace_on_error=True)
        outcome = Outcome(results={r: m for r, m in replies.items() if m.get("kind") == "result"})
        missing = [r for r in range(self.world_size) if r not in outcome.results]
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
        for conn in self.conns:
            conn.send({"kind": "sync"})
        replies = self._gather(set(range(self.world_size)), time.monotonic() + timeout_s)
        return len(replies) == self.world_size and all(m.get("kind") == "synced" for m in replies.values())

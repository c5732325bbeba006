"""verify_example's runs: how many may go at once, and that none outlives the server.

The server never imports torch, so `run_verification` starts the runner (`python -m fsdp_skill.verify`)
as a subprocess, under `run_guard` (which kills the runner's processes and removes the run's scratch
folder when the server dies, even by `kill -9`), bounded by a timeout. `RunSlots` holds the server's
limits: at most `max_runs` runs at once and `max_ranks` rank processes in all. A call over either is
refused at once with the limit and what to do: a queued call would hold its client for as long as
the runs ahead of it take, and every rank is a process of ~250 MB (torch imported).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fsdp_skill.core.errors import UserError
from fsdp_skill.core.limits import DEFAULT_MAX_RANKS, DEFAULT_MAX_RUNS
from fsdp_skill.core.scratch import make_scratch_dir
from fsdp_skill.serve.results import VerificationStatus
from fsdp_skill.serve.verification import parse_report

__all__ = ["RunHandle", "RunSlots", "run_verification", "stop_all_runs"]

# Seconds the runner gets beyond the per-example timeout to spawn ranks and write its report.
STARTUP_GRACE_S = 60.0
# Seconds a stopped run's guard gets to kill the runner and remove its scratch folder.
STOP_GRACE_S = 15.0
# The runner's entry point (`python -m RUNNER_MODULE --id … --json PATH`); tests point it at a stand-in.
RUNNER_MODULE = "fsdp_skill.verify"
GUARD_MODULE = "fsdp_skill.serve.run_guard"
SCRATCH_PREFIX = "fsdp-skill-verify-"

# The guards of the runs in progress, so that a shutting-down server stops them (stop_all_runs).
_running: set[subprocess.Popen[str]] = set()
_running_lock = threading.Lock()


class RunSlots:
    """The server's run limits, claimed per call (tools run in worker threads, hence the lock)."""

    def __init__(self, max_runs: int = DEFAULT_MAX_RUNS, max_ranks: int = DEFAULT_MAX_RANKS) -> None:
        if max_runs < 1 or max_ranks < 1:
            raise UserError(f"--max-runs and --max-ranks must be 1 or more, got {max_runs} and {max_ranks}")
        self.max_runs, self.max_ranks = max_runs, max_ranks
        self.runs = self.ranks = 0
        self._lock = threading.Lock()

    def describe(self) -> str:
        runs = f"{self.max_runs} run{'s' if self.max_runs != 1 else ''}"
        return f"at most {runs} at once and {self.max_ranks} ranks in all"

    @contextmanager
    def claim(self, ranks: int) -> Iterator[None]:
        """Hold a run of `ranks` ranks for the body; UserError saying the limit and what to do when it is over."""
        with self._lock:
            if ranks > self.max_ranks:
                raise UserError(
                    f"world_size {ranks} is over this server's limit of {self.max_ranks} ranks in all "
                    f"(fsdp-skill serve --max-ranks): pass world_size={self.max_ranks} or fewer"
                )
            if self.runs >= self.max_runs:
                raise UserError(
                    f"verify_example is already running {self.runs} example{'s' if self.runs != 1 else ''}, "
                    f"this server's limit (fsdp-skill serve --max-runs {self.max_runs}): call it again when "
                    "one has finished (each ends within its timeout)"
                )
            if self.ranks + ranks > self.max_ranks:
                free = self.max_ranks - self.ranks  # none free: "world_size=0 or fewer" was the advice before
                smaller = f", or pass world_size={free} or fewer" if free >= 1 else ""
                raise UserError(
                    f"{ranks} more ranks would make {self.ranks + ranks} running, over this server's limit of "
                    f"{self.max_ranks} (fsdp-skill serve --max-ranks): call again when a run has finished{smaller}"
                )
            self.runs += 1
            self.ranks += ranks
        try:
            yield
        finally:
            with self._lock:
                self.runs -= 1
                self.ranks -= ranks


class RunHandle:
    """One call's run, so that the call, cancelled (the client went away, or sent a cancellation), stops it."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._cancelled = False
        self._lock = threading.Lock()

    def started(self, proc: subprocess.Popen[str]) -> None:
        with self._lock:
            self._proc = proc
            if self._cancelled:
                proc.terminate()

    def cancel(self) -> None:
        """Ask the run's guard to stop it (it kills the runner's processes and removes the scratch folder)."""
        with self._lock:
            self._cancelled = True
            if self._proc is not None and self._proc.poll() is None:
                self._proc.terminate()


def run_verification(
    name: str, backend: str, world_size: int, timeout: float, root: Path, handle: RunHandle | None = None
) -> tuple[list[VerificationStatus], str]:
    """Run one catalog example through the runner in a subprocess; (results, output tail)."""
    # The scratch folder holds the report and, as the runner's TMPDIR, everything the runner and its ranks
    # write; its name carries our pid, so a later run also removes one a killed server left (core.scratch).
    scratch = make_scratch_dir(Path(tempfile.gettempdir()), SCRATCH_PREFIX)
    try:
        report = scratch / "result.json"
        runner = [
            sys.executable, "-m", RUNNER_MODULE, "--id", name, "--backend", backend,
            "--world-size", str(world_size), "--timeout", str(timeout), "--json", str(report),
        ]
        command = [sys.executable, "-m", GUARD_MODULE, str(os.getpid()), str(scratch), "--", *runner]
        env = {**os.environ, "FSDP_SKILL_ROOT": str(root), "TMPDIR": str(scratch)}
        # cwd is the scratch folder, not root: an example that saves a file (a checkpoint) must not write into
        # the skill's data, which for a wheel install is the package itself.
        proc = subprocess.Popen(command, cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        with _running_lock:
            _running.add(proc)
        if handle is not None:
            handle.started(proc)
        try:
            output, _ = proc.communicate(timeout=timeout + STARTUP_GRACE_S)
        except subprocess.TimeoutExpired:
            _stop(proc)
            raise UserError(
                f"the runner did not finish {name!r} within {timeout + STARTUP_GRACE_S:.0f} s and was stopped; "
                "try a smaller world_size or check the example with `fsdp-skill verify -k` locally"
            ) from None
        finally:
            with _running_lock:
                _running.discard(proc)
        tail = "\n".join(output.strip().splitlines()[-20:])
        if not report.is_file():
            raise UserError(
                f"the runner exited with code {proc.returncode} without a report for {name!r}: {tail[-500:]}"
            )
        results = parse_report(report.read_text(encoding="utf-8")).get(name, [])
        if not results:
            raise UserError(f"the runner's report has no result for {name!r}: {tail[-500:]}")
        return results, tail
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def stop_all_runs() -> None:
    """Stop every run in progress (the server is shutting down): each guard kills its runner and cleans up."""
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        _stop(proc)


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the guard (it kills the runner's group and removes the scratch folder); SIGKILL to the guard's
    group if it does not go within STOP_GRACE_S (the runner then dies with it: its parent-death signal)."""
    try:
        proc.terminate()
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=STOP_GRACE_S)
    except ProcessLookupError:
        pass

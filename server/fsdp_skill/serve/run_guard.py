"""`python -m fsdp_skill.serve.run_guard PARENT_PID SCRATCH -- COMMAND…`: run COMMAND (the example runner)
so that nothing it starts outlives the server, and its scratch folder goes with it.

The server cannot clean up after a `kill -9`, so the guard, a small stdlib-only process between the
server and the runner, does it: it asks the kernel for SIGTERM when the server dies (Linux
PR_SET_PDEATHSIG; elsewhere it notices within POLL_S that its parent changed), and on that signal, or
on the server's own SIGTERM (a timeout, a shutdown), it kills the runner's process group, waits for
it, removes SCRATCH and exits. The runner in turn gets SIGKILL from the kernel if the guard itself is
killed outright (its own PR_SET_PDEATHSIG, set in the child before exec: the guard has one thread, so
that is safe here, unlike in the threaded server), and the runner's rank workers already die with the
runner (verify.worker). Exit status: the runner's; 143 when stopped.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
from types import FrameType

PR_SET_PDEATHSIG = 1
# Seconds between checks that the parent is still the server (where the kernel cannot tell us).
POLL_S = 0.5
# Seconds the runner's group gets to go after SIGKILL before the guard gives up waiting.
REAP_S = 10.0


def die_with_parent(sig: int) -> None:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux; a no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
        except (OSError, AttributeError):
            pass


class Guard:
    def __init__(self, parent_pid: int, scratch: str, command: list[str]) -> None:
        self.parent_pid = parent_pid
        self.scratch = scratch
        self.command = command
        self.proc: subprocess.Popen[bytes] | None = None

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        die_with_parent(signal.SIGTERM)
        if os.getppid() != self.parent_pid:  # the server died before prctl took effect
            self.stop()
        # The runner leads its own process group (so it can be killed with all it started) and dies if
        # the guard is killed outright.
        self.proc = subprocess.Popen(self.command, start_new_session=True,
                                     preexec_fn=lambda: die_with_parent(signal.SIGKILL))
        while True:
            try:
                return self.proc.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                if os.getppid() != self.parent_pid:
                    self.stop()

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop()

    def stop(self) -> None:
        """Kill the runner and all in its group, remove the scratch folder, exit 143."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=REAP_S)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.scratch, ignore_errors=True)
        os._exit(143)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m fsdp_skill.serve.run_guard PARENT_PID SCRATCH -- COMMAND...", file=sys.stderr)
        return 2
    return Guard(int(argv[0]), argv[1], argv[3:]).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""
name: sigkill-no-traceback
claim: A rank killed by SIGKILL (what the Linux OOM killer sends when the host runs out of memory) leaves no Python traceback: torchrun's ChildFailedError root cause shows only "exitcode  : -9", "error_file: <N/A>" and "Signal 9 (SIGKILL) received by PID", even under @record.
backs: pitfalls
world_size: 1
mutant: python-error: `os.kill(os.getpid(), signal.SIGKILL)` -> `raise MemoryError("out of host memory")`

A nested `torchrun --standalone --nproc-per-node 2` runs a script (under
`torch.distributed.elastic.multiprocessing.errors.record`) whose rank 1 sends itself SIGKILL,
as the kernel's OOM killer would. Asserted: torchrun fails, its "Root Cause" block names rank 1
with exitcode -9, "error_file: <N/A>" and "traceback : Signal 9 (SIGKILL) received by PID":
no worker traceback (the only one printed is torchrun's own ChildFailedError), nothing to
debug but the exit code. The cause is the host's memory
(check `dmesg` / the job's memory limit), not the training code. The mutant raises a Python
MemoryError instead: then a traceback is printed. (assets/traps.md)
"""

import os
import subprocess
import sys
import tempfile

from _dist import say

WORKER = '''
import os, signal, time
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main() -> None:
    if os.environ["RANK"] == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(30)

main()
'''

with tempfile.TemporaryDirectory() as scratch:
    script = os.path.join(scratch, "worker.py")
    with open(script, "w", encoding="utf-8") as handle:
        handle.write(WORKER)
    # The outer torchrun's variables out, TORCHELASTIC_ERROR_FILE included: the nested @record would
    # write its error into this check's own error file.
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHELASTIC")
           and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "MASTER_PORT")}
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          script], env=env, capture_output=True, text=True, timeout=150, check=False)
out = run.stdout + run.stderr


def flat(text: str) -> str:
    """One line, for an assertion message: the runner reads a failure's last exception line."""
    return " ".join(text.split())[-600:]


assert run.returncode != 0, flat(out)
assert "Root Cause" in out, flat(out)
root = out[out.index("Root Cause"):]  # torchrun's block for the first rank that died
assert "rank      : 1" in root and "exitcode  : -9" in root, flat(root)
# No error file and no traceback of the worker: only the signal (torchrun's own traceback is above it).
assert "error_file: <N/A>" in root and "traceback : Signal 9 (SIGKILL) received by PID" in root, flat(root)
say(f"SIGKILL on rank 1: no worker traceback; torchrun's root cause: {flat(root)[:300]}")

"""
name: standalone-picks-port
claim: torchrun --standalone ignores a MASTER_PORT set in the environment and picks a free port itself.
backs: pitfalls
world_size: 1
mutant: static-rendezvous-honours-port: `"--standalone", "--nproc-per-node"` -> `"--master-port", "29555", "--nproc-per-node"`

This check launches a nested `torchrun --standalone` with MASTER_PORT=29555 in its
environment; the worker sees another MASTER_PORT. For several nodes use
`--rdzv-backend c10d --rdzv-endpoint host:port` instead.
"""

import os
import subprocess
import sys
import tempfile

from _dist import say

with tempfile.TemporaryDirectory() as scratch:
    script = os.path.join(scratch, "show_port.py")
    with open(script, "w", encoding="utf-8") as handle:
        handle.write("import os\nprint('PORT', os.environ['MASTER_PORT'], flush=True)\n")
    env = {**os.environ, "MASTER_PORT": "29555", "MASTER_ADDR": "127.0.0.1"}
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID"):
        env.pop(key, None)
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", script],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )
ports = [line.split()[-1] for line in run.stdout.splitlines() if line.startswith("PORT")]
assert len(ports) == 1 and ports[0] != "29555", run.stdout
say(f"MASTER_PORT=29555 in the environment; the --standalone worker got MASTER_PORT={ports[0]}")

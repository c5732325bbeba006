"""Helpers of scripts/nccl_pass.sh (need only torch).

  python scripts/nccl_probe.py environment          JSON: torch, CUDA, NCCL and the GPUs of this machine
  python scripts/nccl_probe.py two-ranks-one-gpu    JSON: does NCCL form a 2-rank group when both ranks use GPU 0?

Why the probe: NCCL's "one rank per GPU" decides what a machine with fewer GPUs than ranks can run (the
pass runs such items at one rank per GPU, `--max-ranks`); the probe records what this NCCL does, rather
than our saying so unchecked.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

OUTPUT_TAIL = 3_000  # characters of the probe's output kept: where NCCL's error is


def environment() -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        ).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        smi = []
    nccl = torch.cuda.nccl.version() if cuda else None
    return {
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
        "gpus": devices,
        "capability": ".".join(map(str, torch.cuda.get_device_capability(0))) if cuda else None,
        "nvidia_smi": smi,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


_RANK = """
import torch, torch.distributed as dist
torch.cuda.set_device(0)
# device_id makes the group eager: NCCL forms its communicator here, where a refusal shows.
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
t = torch.ones(1, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print(f"rank {dist.get_rank()}: all_reduce over {dist.get_world_size()} ranks on GPU 0 gave {t.item()}", flush=True)
dist.destroy_process_group()
"""


def two_ranks_one_gpu(timeout_s: float = 60.0) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="nccl-probe-") as tmp:
        script = Path(tmp) / "rank.py"
        script.write_text(_RANK)
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
        env = {**os.environ, "NCCL_DEBUG": "WARN"}
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=tmp, env=env)
            code: int | None = done.returncode
            output = done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            code = None
            raw = exc.stdout or b""
            output = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    lines = output.splitlines()
    said = [line for line in lines if "Duplicate GPU" in line or "all_reduce over" in line]
    return {
        "question": "does NCCL form one process group from two ranks that both use GPU 0?",
        "command": "torchrun --standalone --nproc-per-node 2 (both ranks: set_device(0), init_process_group('nccl', "
        "device_id=cuda:0), all_reduce)",
        "exit_code": code,
        "formed": code == 0,
        "timed_out": code is None,
        "key_lines": said[:4],
        "output_tail": output[-OUTPUT_TAIL:],
    }


def main(argv: list[str]) -> int:
    if argv[:1] == ["environment"]:
        print(json.dumps(environment(), indent=1))
    elif argv[:1] == ["two-ranks-one-gpu"]:
        print(json.dumps(two_ranks_one_gpu(), indent=1))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

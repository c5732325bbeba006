"""
name: debug-env-read-at-import
claim: TORCH_DISTRIBUTED_DEBUG=DETAIL takes effect only when set before import torch (in the launch environment): then a mismatched collective raises "Detected mismatch between collectives"; set after import it stays OFF and the mismatch returns silently, and dist.set_debug_level_from_env() after init_process_group does not wrap the groups that already exist (only groups created afterwards check their collectives).
backs: pitfalls
world_size: 2
requires: stated-ranks
mutant: set-before-import: `LAUNCH_ENV: dict[str, str] = {}` -> `LAUNCH_ENV: dict[str, str] = {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}`
mutant: env-call-wraps-existing: `checked = dist.group.WORLD  # created before set_debug_level_from_env` -> `checked = dist.new_group()`
mutant: no-env-call: `dist.set_debug_level_from_env()  # re-read` -> `pass`

`torch/distributed/__init__.py` calls `set_debug_level_from_env()` once, at import, and
`init_process_group` / `new_group` wrap a gloo or NCCL group in a ProcessGroupWrapper (which
compares every collective's op, shapes and dtypes across ranks first) only if the level is DETAIL
when the group is created (`torch/distributed/distributed_c10d.py`, the `get_debug_level() ==
DebugLevel.DETAIL` test before `_create_process_group_wrapper`). The mismatch used here: rank 0
all-reduces float32, rank 1 int32 of the same size; gloo sums the bytes without an error.
1. Set after `import torch`: the level is OFF, also after init_process_group; the mismatch returns.
2. `dist.set_debug_level_from_env()`: the level is DETAIL, but the default group, created before,
   is not wrapped: the mismatch still returns silently.
3. A group created after that call is wrapped: the same mismatch raises on both ranks.
4. Set in the launch environment (rank 0 starts a nested 2-rank torchrun with it): the default
   group is wrapped and the mismatch raises at once.
"""

import os

LAUNCH_ENV: dict[str, str] = {}  # the environment torchrun was started with, before import torch
os.environ.update(LAUNCH_ENV)

import datetime  # noqa: E402
import inspect  # noqa: E402
import pathlib  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from _dist import say, shutdown  # noqa: E402


def mismatched_all_reduce(group: dist.ProcessGroup | None = None) -> str:
    """Rank 0 all-reduces float32, the others int32 (same size): 'returned' or 'detected'."""
    tensor = torch.ones(4, dtype=torch.float32 if dist.get_rank() == 0 else torch.int32)
    try:
        dist.all_reduce(tensor, group=group)
        return "returned"
    except RuntimeError as exc:
        assert "Detected mismatch between collectives" in str(exc), exc
        return "detected"


os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"  # too late: torch is imported
assert dist.get_debug_level() == dist.DebugLevel.OFF, "TORCH_DISTRIBUTED_DEBUG was read after import"
dist.init_process_group("gloo")
rank = dist.get_rank()
assert dist.get_debug_level() == dist.DebugLevel.OFF, "init_process_group read TORCH_DISTRIBUTED_DEBUG"
assert mismatched_all_reduce() == "returned", "set after import, a mismatched collective was detected"

dist.set_debug_level_from_env()  # re-read
assert dist.get_debug_level() == dist.DebugLevel.DETAIL
checked = dist.group.WORLD  # created before set_debug_level_from_env
assert mismatched_all_reduce(checked) == "returned", "set_debug_level_from_env wrapped the existing group"
later = dist.new_group()
assert mismatched_all_reduce(later) == "detected", "a group created after set_debug_level_from_env is unchecked"

store = dist.distributed_c10d._get_default_store()
if rank == 0:
    with tempfile.TemporaryDirectory() as scratch:
        script = os.path.join(scratch, "launched_with_detail.py")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write("import os\nimport torch\nimport torch.distributed as dist\n\n"
                         + inspect.getsource(mismatched_all_reduce)
                         + "\ndist.init_process_group('gloo')\nresult = mismatched_all_reduce()\n"
                         # One file per rank: two ranks printing to one pipe can interleave their lines.
                         "with open(os.path.join(os.environ['LAUNCH_RESULTS'], os.environ['RANK']), 'w') as out:\n"
                         "    out.write(result)\n"
                         "os._exit(0)\n")
        env = {k: v for k, v in os.environ.items()
               if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "MASTER_PORT", "TORCHELASTIC_RUN_ID")}
        env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
        env["LAUNCH_RESULTS"] = results = os.path.join(scratch, "results")
        os.mkdir(results)
        run = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", script],
            env=env, capture_output=True, text=True, timeout=180, check=False,
        )
        launched = sorted(path.read_text(encoding="utf-8") for path in pathlib.Path(results).iterdir())
    # Each rank that gets through reports the detection; a rank whose peer already raised and exited may see the
    # connection close instead (no file). None may return silently.
    assert "detected" in launched and "returned" not in launched, (launched, run.stdout[-1000:], run.stderr[-2000:])
    say("set after import: OFF through init_process_group, mismatched all_reduce returned silently; after "
        "set_debug_level_from_env(): DETAIL, the existing group still unchecked, a new group detects it; "
        "set at launch: the default group detects it")
    store.set("launch-done", "1")
else:
    store.wait(["launch-done"], datetime.timedelta(seconds=200))
shutdown()

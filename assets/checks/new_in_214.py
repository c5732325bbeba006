"""
name: new-in-214
claim: torch 2.14 adds dist.set_timeout(timedelta, group) (it changes a live group's timeout: a collective then raises after it), weights_only= on the object collectives (weights_only=True refuses an arbitrary class with UnpicklingError on the receiving rank, tensors and dicts pass), and dist.gather_single, which gloo refuses ("Backend gloo does not support gather_single"; use gather there).
backs: what-changed
world_size: 2
mutant: timeout-not-set: `dist.set_timeout(datetime.timedelta(seconds=1))` -> `pass`
mutant: weights-only-off: `dist.broadcast_object_list(custom, src=0, weights_only=True)` -> `dist.broadcast_object_list(custom, src=0, weights_only=False)`
mutant: gather-single-on-gloo-works: `dist.gather_single(x, out, dst=0)` -> `dist.gather(x, [torch.empty(2) for _ in range(world)] if rank == 0 else None, dst=0)`

Three 2.14 additions an agent trained on older torch does not know, each exercised on gloo:
`set_timeout` on the default group after init (rank 1 joins the all_reduce 4 s late: rank 0
raises after the new 1 s timeout, not the 30 min default); `broadcast_object_list(...,
weights_only=True)` unpickles with `torch.load`'s weights-only rules on the receiver; and
`gather_single`, the single-output-tensor form of `gather`, which gloo does not implement
(NCCL >= 2.28.3 has a native path: its docstring; GPU only, not run here). Skipped before 2.14,
which has none of the three.
"""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from _dist import init, say, skip_unless

skip_unless(hasattr(dist, "set_timeout") and hasattr(dist, "gather_single"),
            "dist.set_timeout, dist.gather_single and weights_only= are new in 2.14")
init()
rank, world = dist.get_rank(), dist.get_world_size()

x = torch.arange(2.0) + 10 * rank
out = torch.empty(2 * world) if rank == 0 else None
try:
    dist.gather_single(x, out, dst=0)
    gather_error = ""
except RuntimeError as exc:
    gather_error = str(exc)
assert "Backend gloo does not support gather_single" in gather_error, gather_error


class Custom:  # any class that is not a tensor, container or primitive: weights-only unpickling refuses it
    pass


custom: list[object] = [{"w": torch.ones(2)}, Custom()] if rank == 0 else [None, None]
try:
    dist.broadcast_object_list(custom, src=0, weights_only=True)
    refused = ""
except Exception as exc:  # pickle.UnpicklingError, on the receiving rank only
    refused = f"{type(exc).__name__}: {exc}"
assert (rank == 0 and not refused) or (rank == 1 and refused.startswith("UnpicklingError")), refused
plain: list[object] = [{"w": torch.ones(2)}] if rank == 0 else [None]
dist.broadcast_object_list(plain, src=0, weights_only=True)
assert torch.equal(plain[0]["w"], torch.ones(2))  # type: ignore[index]

dist.set_timeout(datetime.timedelta(seconds=1))
start = time.monotonic()
try:
    if rank == 1:
        time.sleep(4)
    dist.all_reduce(torch.ones(1))
    timed_out = ""
except RuntimeError as exc:
    timed_out = str(exc)
waited = time.monotonic() - start
if rank == 0:
    assert "Timed out" in timed_out and waited < 3.5, (waited, timed_out[:200])
    say(f"gather_single on gloo: {gather_error}; weights_only=True refused a custom class on rank 1; set_timeout(1 s): "
        f"all_reduce raised after {waited:.1f} s")
# The group is broken after the timeout (rank 1 finds its peer gone): leave without another collective.
sys.stdout.flush()
os._exit(0)

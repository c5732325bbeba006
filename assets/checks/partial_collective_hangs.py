"""
name: partial-collective-hangs
claim: A collective issued by some ranks only never completes; the ranks that issued it wait until the timeout.
backs: pitfalls
world_size: 2
requires: stated-ranks

Rank 0 calls all_reduce (as in a logging branch under `if rank == 0`); rank 1 does not.
Rank 0's collective cannot complete: it waits until the timeout (here 3 s through
`Work.wait(timeout=...)`; the process group's default is 10 minutes on gloo and NCCL)
and raises. The ranks then meet through the store, not a collective, and leave.
"""

import datetime
import time

import torch
import torch.distributed as dist
from _dist import init, say

init()
rank = dist.get_rank()
store = dist.distributed_c10d._get_default_store()
if rank == 0:
    started = time.monotonic()
    work = dist.all_reduce(torch.ones(1), async_op=True)
    try:
        work.wait(timeout=datetime.timedelta(seconds=3))
        raised = None
    except RuntimeError as exc:
        raised = str(exc).splitlines()[0]
    waited = time.monotonic() - started
    assert raised is not None, "the all_reduce completed although rank 1 never called it"
    assert waited >= 2.5, waited
    say(f"rank 0 waited {waited:.1f} s then: {raised[:120]}")
    store.set("rank0-done", "1")
else:
    store.wait(["rank0-done"], datetime.timedelta(seconds=60))
# The group is now out of step (a collective was left pending): leave without another collective.
import os
import sys

sys.stdout.flush()
os._exit(0)

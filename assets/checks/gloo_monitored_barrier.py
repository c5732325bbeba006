"""
name: gloo-monitored-barrier
claim: gloo runs collectives on CPU tensors and implements monitored_barrier, which names the rank that did not arrive.
backs: pitfalls
world_size: 2
requires: stated-ranks
mutant: rank1-arrives: `    store.wait(["done"], datetime.timedelta(seconds=60))` -> `    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))`

On gloo, an all_reduce of CPU tensors works, and `monitored_barrier` (gloo only) raises on
rank 0 naming the rank that never reached it within its timeout.
"""

import datetime
import os
import sys

import torch
import torch.distributed as dist
from _dist import say

dist.init_process_group("gloo")
rank = dist.get_rank()
tensor = torch.ones(2)
dist.all_reduce(tensor)
assert tensor.tolist() == [2.0, 2.0]
dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))
store = dist.distributed_c10d._get_default_store()
if rank == 0:
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=2))
        raise AssertionError("monitored_barrier passed without rank 1")
    except RuntimeError as exc:
        message = str(exc)
    assert "Rank 1 failed to pass monitoredBarrier" in message, message
    say(f"all_reduce of CPU tensors on gloo: {tensor.tolist()}; monitored_barrier: {message.splitlines()[0][:90]}")
    store.set("done", "1")
else:
    store.wait(["done"], datetime.timedelta(seconds=60))
sys.stdout.flush()
os._exit(0)  # rank 1 never entered the second barrier: no further collective

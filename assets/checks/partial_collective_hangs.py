"""
name: partial-collective-hangs
claim: A collective issued by some ranks only raises nothing where it is issued: it pairs with the other ranks' next collective (here an all_reduce with the next all_reduce), silently giving wrong sums on every rank, and the one left over waits until the timeout (gloo's default 30 min; NCCL's 10 min).
backs: pitfalls
world_size: 2
requires: stated-ranks
mutant: every-rank-logs: `if rank == 0:  # a logging all_reduce on rank 0 only` -> `if True:`
mutant: gloo-default-10-min: `timedelta(minutes=30)` -> `timedelta(minutes=10)`

Rank 0 all-reduces a logged value (as under `if rank == 0`); rank 1 does not. Then both run
two "epochs", each all-reducing a gradient (epoch e: rank r holds r + 1 + 10 e; the right sums
are 3 and 23). Nothing raises: rank 0's logging all_reduce meets rank 1's epoch-0 gradient
(both get 102), rank 0's epoch-0 gradient meets rank 1's epoch-1 gradient (13), and rank 0's
epoch-1 all_reduce has no partner: it waits until the timeout (3 s here through
`Work.wait(timeout=...)`) and raises. Uneven batch counts do the same: the rank with the extra
batch pairs its collectives with the next epoch's. The group's default timeout is
`torch.distributed.constants.default_pg_timeout`, 30 min, for gloo (what init_process_group
uses: `_get_default_timeout`, torch/distributed/distributed_c10d.py:836); NCCL's default is 10 min
(`kProcessGroupNCCLDefaultTimeout`, torch/include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp:157
in the installed wheel: GPU-only, not run here). Both defaults are the same in the 2.10.0, 2.11.0,
2.12.1 and 2.14.1 wheels' headers. The ranks then meet through the store, not a collective, and leave.
"""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from _dist import init, say
from torch.distributed.constants import default_pg_timeout

init()
rank = dist.get_rank()
assert default_pg_timeout == datetime.timedelta(minutes=30), default_pg_timeout
group_timeout = dist.group.WORLD._get_backend(torch.device("cpu")).options._timeout
assert group_timeout == default_pg_timeout, group_timeout  # the gloo group got the default

logged = None
if rank == 0:  # a logging all_reduce on rank 0 only
    log = torch.tensor([100.0])
    dist.all_reduce(log)
    logged = log.item()
sums: list[float | None] = []
started = time.monotonic()
for epoch in range(2):
    grad = torch.tensor([rank + 1.0 + 10 * epoch])
    work = dist.all_reduce(grad, async_op=True)
    try:
        work.wait(timeout=datetime.timedelta(seconds=3))
        sums.append(grad.item())
    except RuntimeError:  # gloo: "Operation timed out!"
        sums.append(None)
waited = time.monotonic() - started
store = dist.distributed_c10d._get_default_store()
if rank == 0:
    assert logged == 102.0, f"the logging all_reduce got {logged}, not 100 + rank 1's gradient 2"
    assert sums == [13.0, None], f"rank 0's gradient sums {sums}: expected epoch 0 paired with epoch 1, then a wait"
    assert waited >= 2.5, waited
    other = [float(v) for v in store.get("rank1-sums").decode().split(",")]
    assert other == [102.0, 13.0], other
    say(f"no error where it was issued: rank 0 logged {logged}, gradient sums rank 0 {sums}, rank 1 {other} "
        f"(right: [3.0, 23.0]); rank 0's last all_reduce waited {waited:.1f} s then raised; default timeout "
        f"{default_pg_timeout} on gloo")
    store.set("rank0-done", "1")
else:
    assert None not in sums, sums
    store.set("rank1-sums", ",".join(str(v) for v in sums))
    store.wait(["rank0-done"], datetime.timedelta(seconds=60))
# The group is now out of step (a collective was left pending): leave without another collective.
sys.stdout.flush()
os._exit(0)

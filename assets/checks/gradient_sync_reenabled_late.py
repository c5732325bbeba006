"""
name: gradient-sync-reenabled-late
claim: With FSDP2 gradient accumulation, calling set_requires_gradient_sync(True) only after the last microbatch's backward (instead of before it) leaves every parameter's .grad None and raises nothing: the optimizer step then changes no parameter.
backs: pitfalls
world_size: 2
mutant: reenabled-before-last: `    model.set_requires_gradient_sync(i == MICRO - 1 and BEFORE_LAST)` -> `    model.set_requires_gradient_sync(i == MICRO - 1)`

Pitfall 7 says to re-enable sync before the last microbatch's backward: the flag is read
when a backward runs, so turning it on afterwards reduces nothing. The accumulated
unsharded gradients stay inside FSDP; no sharded .grad is ever set, `optim.step()` skips
every parameter (its grad is None) and the loop trains nothing, silently. (assets/traps.md)
"""

import torch
from _dist import Stack, batches, init, say, shutdown
from torch.distributed.fsdp import fully_shard

MICRO = 3
BEFORE_LAST = False  # the mistake: sync is turned back on only after the loop

init()
rank = torch.distributed.get_rank()
torch.manual_seed(0)
model = Stack()
for block in model.blocks:
    fully_shard(block)
fully_shard(model)
optim = torch.optim.SGD(model.parameters(), lr=0.1)
before = [p.detach().to_local().clone() for p in model.parameters()]
data = batches(rank)
for i in range(MICRO):
    x, y = next(data)
    model.set_requires_gradient_sync(i == MICRO - 1 and BEFORE_LAST)
    (torch.nn.functional.mse_loss(model(x), y) / MICRO).backward()
model.set_requires_gradient_sync(True)  # too late: the last backward has run
optim.step()
grads = [p.grad is None for p in model.parameters()]
moved = [not torch.equal(p.detach().to_local(), b) for p, b in zip(model.parameters(), before)]
assert all(grads), f"some parameters got a gradient: {grads}"
assert not any(moved), "the optimizer step moved a parameter"
say(f"sync re-enabled after the last backward: {len(grads)} parameters, every .grad None, none moved, no error")
shutdown()

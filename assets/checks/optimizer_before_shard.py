"""
name: optimizer-before-shard
claim: An optimizer built before fully_shard holds the replaced parameters; step() leaves the sharded model unchanged.
backs: pitfalls
world_size: 2
mutant: rebuilt-after: `fully_shard(early)` -> `optim_early = torch.optim.SGD(fully_shard(early).parameters(), lr=0.1)`

fully_shard swaps every parameter for a new DTensor parameter. An optimizer created
earlier still points at the old tensors, which no longer get gradients: step() updates
nothing the model uses. Built after fully_shard, the same optimizer trains.
"""

import torch
import torch.nn as nn
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import fully_shard

init()
torch.manual_seed(0)
early = Stack()
optim_early = torch.optim.SGD(early.parameters(), lr=0.1)  # built BEFORE fully_shard: the mistake
fully_shard(early)
before = [p.full_tensor().clone() for p in early.parameters()]
early(torch.randn(4, 16)).square().mean().backward()
optim_early.step()
unchanged = all(torch.equal(b, p.full_tensor()) for b, p in zip(before, early.parameters()))
assert unchanged, "an optimizer built before fully_shard changed the sharded parameters"
assert all(p.grad is not None for p in early.parameters())  # the gradients went to the new parameters

torch.manual_seed(0)
late = Stack()
fully_shard(late)
optim_late = torch.optim.SGD(late.parameters(), lr=0.1)  # built AFTER fully_shard: right
before = [p.full_tensor().clone() for p in late.parameters()]
late(torch.randn(4, 16)).square().mean().backward()
optim_late.step()
assert not any(torch.equal(b, p.full_tensor()) for b, p in zip(before, late.parameters()) if isinstance(p, nn.Parameter))
say("optimizer before fully_shard: parameters unchanged after step(); after fully_shard: all updated")
shutdown()

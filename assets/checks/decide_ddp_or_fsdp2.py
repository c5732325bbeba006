"""
name: decide-ddp-or-fsdp2
claim: DDP keeps a full replica of every parameter on each rank; FSDP2's fully_shard (torch.distributed.fsdp) keeps 1/world_size of each parameter as a DTensor sharded on dim 0, so both train the same model with different memory.
backs: decide-first
world_size: 2
mutant: replica-alone: `replica, sharded = DDP(copy.deepcopy(base)), copy.deepcopy(base)` -> `replica, sharded = DDP(copy.deepcopy(base), process_group=dist.new_subgroups(group_size=1)[0]), copy.deepcopy(base)`

Same model, same data, two ways: after 3 SGD steps DDP and FSDP2 hold the same weights;
DDP stores every element on every rank, FSDP2 a dim-0 shard (Shard(0)) of each.
"""

import copy

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import Stack, batches, init, say, shutdown
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Shard
from torch.nn.parallel import DistributedDataParallel as DDP

init()
torch.manual_seed(0)
base = Stack()
replica, sharded = DDP(copy.deepcopy(base)), copy.deepcopy(base)
fully_shard(sharded)
for model in (replica, sharded):
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    data = batches(dist.get_rank())
    for _ in range(3):
        x, y = next(data)
        nn.functional.mse_loss(model(x), y).backward()
        optim.step()
        optim.zero_grad()
for a, b in zip(replica.module.parameters(), sharded.parameters()):
    torch.testing.assert_close(a, b.full_tensor())
full = sum(p.numel() for p in replica.parameters())
local = sum(p.to_local().numel() for p in sharded.parameters())
assert all(isinstance(p, DTensor) and p.placements == (Shard(0),) for p in sharded.parameters())
assert local == full // dist.get_world_size(), (local, full)
say(f"DDP: {full} parameters on each rank; FSDP2: {local} per rank (Shard(0)); weights equal after 3 steps")
shutdown()

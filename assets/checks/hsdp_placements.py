"""
name: hsdp-placements
claim: fully_shard(mesh=2-D mesh) is HSDP: parameters are replicated across the first mesh dimension and sharded across the second.
backs: decide-first
world_size: 4
requires: stated-ranks
mutant: per-rank-init: `torch.manual_seed(0)` -> `torch.manual_seed(dist.get_rank())`
mutant: one-d-mesh: `fully_shard(model, mesh=mesh)` -> `fully_shard(model)`

On a ("replicate", "shard") mesh of 2 x 2, each parameter is a DTensor with placements
(Replicate(), Shard(0)): the two ranks of one replica group hold the same half, and
training keeps the replicas equal.
"""

import torch
import torch.distributed as dist
from _dist import Stack, init, say, shutdown
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard

device = init()
mesh = init_device_mesh(device.type, (2, 2), mesh_dim_names=("replicate", "shard"))
torch.manual_seed(0)
model = Stack()
for block in model.blocks:
    fully_shard(block, mesh=mesh)
fully_shard(model, mesh=mesh)
assert all(p.placements == (Replicate(), Shard(0)) for p in model.parameters())
optim = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(dist.get_rank())
model(torch.randn(4, 16, generator=gen)).square().mean().backward()
optim.step()
local = model.inp.weight.to_local()
shards = [torch.empty_like(local) for _ in range(4)]
dist.all_gather(shards, local)
# Ranks 0 and 2 hold shard 0 of the two replicas; 1 and 3 shard 1: equal after a step.
assert torch.equal(shards[0], shards[2]) and torch.equal(shards[1], shards[3])
assert not torch.equal(shards[0], shards[1])
say("HSDP on a 2 x 2 mesh: placements (Replicate(), Shard(0)); replica shards equal after a step")
shutdown()

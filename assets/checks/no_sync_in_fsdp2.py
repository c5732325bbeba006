"""
name: no-sync-in-fsdp2
claim: FSDP2 modules have no no_sync(); set_requires_gradient_sync(False) on all but the last microbatch accumulates the same gradients as syncing every time.
backs: pitfalls
world_size: 2
mutant: sync-first-not-last: `set_requires_gradient_sync(index == len(micro) - 1)` -> `set_requires_gradient_sync(index == 0)`

Two microbatches: with gradient sync off for the first and on for the last, the sharded
gradients equal those of reduce-scattering after every microbatch.
"""

import copy

import torch
import torch.distributed as dist
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import fully_shard

init()
torch.manual_seed(0)
base = Stack()
assert not hasattr(base, "no_sync")
models = [copy.deepcopy(base), copy.deepcopy(base)]
for model in models:
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
assert not hasattr(models[0], "no_sync") and hasattr(models[0], "set_requires_gradient_sync")
gen = torch.Generator().manual_seed(dist.get_rank())
micro = [torch.randn(4, 16, generator=gen) for _ in range(2)]
for index, x in enumerate(micro):  # sync every microbatch
    models[0](x).square().mean().backward()
for index, x in enumerate(micro):  # sync only on the last
    models[1].set_requires_gradient_sync(index == len(micro) - 1)
    models[1](x).square().mean().backward()
for a, b in zip(models[0].parameters(), models[1].parameters()):
    torch.testing.assert_close(a.grad.full_tensor(), b.grad.full_tensor())
say("no no_sync on FSDP2; set_requires_gradient_sync(False) then True: gradients equal to syncing every microbatch")
shutdown()

"""
name: root-only-shard
claim: Sharding only the root still shards parameters and optimizer state, but all-gathers the whole model at once: no overlap, full-model peak.
backs: pitfalls
world_size: 2
mutant: blocks-not-sharded: `    fully_shard(block)` -> `    pass`
mutant: root-only-shards-blocks: `fully_shard(root_only)` -> `[fully_shard(b) for b in root_only.blocks] and fully_shard(root_only)`

With `fully_shard(model)` alone each rank still stores 1/world_size of the parameters and
of Adam's state. What it loses: the model is one communication unit, so during forward
every block's parameters are unsharded at the same time (peak memory = the whole model)
and no all-gather can overlap a block's compute. Sharded per block, block 0's parameters
are sharded again by the time the last block runs.
"""

import torch
import torch.distributed as dist
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

init()
world = dist.get_world_size()


def unsharded_during_last_block(model: Stack) -> bool:
    """Is block 0's weight a full (non-DTensor) tensor while the last block runs forward?"""
    seen: list[bool] = []
    hook = model.blocks[-1].register_forward_pre_hook(
        lambda *_: seen.append(not isinstance(model.blocks[0].lin.weight, DTensor)))
    model(torch.randn(4, 16)).sum().backward()
    hook.remove()
    return seen[0]


root_only = Stack(blocks=4)
full_numel = sum(p.numel() for p in root_only.parameters())
fully_shard(root_only)
local = sum(p.to_local().numel() for p in root_only.parameters())
optim = torch.optim.Adam(root_only.parameters())
root_only(torch.randn(4, 16)).sum().backward()
optim.step()
state = sum(s["exp_avg"].to_local().numel() + s["exp_avg_sq"].to_local().numel() for s in optim.state.values())
assert local <= full_numel // world + 16, (local, full_numel)  # about half each at 2 ranks (dim-0 padding aside)
assert state == 2 * local, (state, local)
assert unsharded_during_last_block(root_only), "root-only: block 0 should still be unsharded in the last block"

per_block = Stack(blocks=4)
for block in per_block.blocks:
    fully_shard(block)
fully_shard(per_block)
assert not unsharded_during_last_block(per_block), "per-block: block 0 should be resharded before the last block"
say(f"root only: {local}/{full_numel} parameters per rank, Adam state {state}; block 0 unsharded during the last "
    "block's forward (root only) vs resharded (per block)")
shutdown()

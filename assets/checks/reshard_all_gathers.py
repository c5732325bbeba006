"""
name: reshard-all-gathers
claim: reshard_after_forward decides the backward all-gathers: the default re-gathers every block but the root, False on the last block saves one, False everywhere saves all, an int N re-gathers within groups of N ranks; set_reshard_after_backward(False) skips the next forward's.
backs: tuning
world_size: 4
requires: stated-ranks
mutant: root-reshards: `    fully_shard(model)` -> `    fully_shard(model, reshard_after_forward=True)`
mutant: reshard-after-backward: `model.set_reshard_after_backward(False)  # keep` -> `model.set_reshard_after_backward(True)  # keep`

Counts the all-gathers FSDP2 issues (it calls `dist.all_gather_single`, `all_gather_into_tensor`
before 2.13; wrapped here)
for one forward + backward of a root with 4 blocks on 4 ranks:
- default (None): forward 5 (root + 4 blocks); backward 4: each block was resharded
  after forward and is gathered again; the root was kept.
- last block `reshard_after_forward=False`: backward 3. Backward starts with the last
  block, so resharding it after forward only to gather it again at once is waste.
- every block False: backward 0 (FSDP1's SHARD_GRAD_OP: more memory between passes).
- `reshard_after_forward=2`: backward 4 gathers, each within a group of 2 ranks
  (intra-node when the 2 ranks share a node) instead of all 4.
- gradient accumulation: `set_reshard_after_backward(False)` (with
  `set_requires_gradient_sync(False)`) on a microbatch keeps the parameters unsharded,
  so the next microbatch's forward gathers nothing (its backward still gathers the
  blocks that forward resharded).
"""

import torch
import torch.distributed as dist
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import fully_shard

init()
sizes: list[int] = []
# The collective FSDP2 all-gathers with: all_gather_single from 2.13, all_gather_into_tensor before.
GATHER = "all_gather_single" if hasattr(dist, "all_gather_single") else "all_gather_into_tensor"
_all_gather = getattr(dist, GATHER)


def counting(*args, **kwargs):
    group = kwargs.get("group")
    sizes.append(group.size() if group is not None else dist.get_world_size())
    return _all_gather(*args, **kwargs)


setattr(dist, GATHER, counting)


def gathers(last: object = None, every: object = None) -> tuple[list[int], list[int]]:
    model = Stack(blocks=4)
    for index, block in enumerate(model.blocks):
        setting = last if index == 3 and last is not None else every
        fully_shard(block, **({} if setting is None else {"reshard_after_forward": setting}))
    fully_shard(model)
    sizes.clear()
    out = model(torch.randn(4, 16))
    forward = list(sizes)
    sizes.clear()
    out.sum().backward()
    return forward, list(sizes)


assert gathers() == ([4] * 5, [4] * 4)
assert gathers(last=False) == ([4] * 5, [4] * 3)
assert gathers(every=False) == ([4] * 5, [])
assert gathers(every=2) == ([4] * 5, [2] * 4)

model = Stack(blocks=4)
for block in model.blocks:
    fully_shard(block)
fully_shard(model)
model.set_requires_gradient_sync(False)
model.set_reshard_after_backward(False)  # keep everything unsharded for the next microbatch
model(torch.randn(4, 16)).sum().backward()
sizes.clear()
model.set_requires_gradient_sync(True)
model.set_reshard_after_backward(True)
out = model(torch.randn(4, 16))
assert sizes == [], sizes  # the last microbatch's forward gathered nothing
out.sum().backward()  # (its blocks were resharded after forward, so backward gathers them again)
say("all-gathers in backward: default 4, last block False 3, all False 0, int 2 -> 4 within groups of 2; "
    "after set_reshard_after_backward(False) the next microbatch gathers nothing")
shutdown()

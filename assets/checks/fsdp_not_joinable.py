"""
name: fsdp-not-joinable
claim: DDP is Joinable (the Join context manager handles uneven inputs); an FSDP2 module is not, and DistributedSampler gives every rank the same number of samples.
backs: pitfalls
world_size: 2
requires: stated-ranks
mutant: join-a-ddp: `with Join([sharded]):  # type: ignore[list-item]` -> `with Join([DDP(nn.Linear(4, 4))]):`
mutant: no-drop-last: `rank=dist.get_rank(), drop_last=True)` -> `rank=dist.get_rank(), drop_last=False)`

`Join` accepts only `Joinable`s: DistributedDataParallel is one, an FSDP2 module is not,
so FSDP needs equal batch counts. DistributedSampler provides them: by default it pads
(repeats samples) to a multiple of the world size; with drop_last=True it drops the tail.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.algorithms.join import Join, Joinable
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler

init()
assert isinstance(DDP(nn.Linear(4, 4)), Joinable)
sharded = nn.Linear(4, 4)
fully_shard(sharded)
assert not isinstance(sharded, Joinable)
try:
    with Join([sharded]):  # type: ignore[list-item]
        pass
    raise AssertionError("Join accepted an FSDP2 module")
except (AttributeError, TypeError, ValueError) as exc:
    refused = type(exc).__name__

dataset = list(range(5))  # 5 samples, 2 ranks
padded = len(DistributedSampler(dataset, num_replicas=2, rank=dist.get_rank()))
dropped = len(DistributedSampler(dataset, num_replicas=2, rank=dist.get_rank(), drop_last=True))
counts = [torch.tensor([padded, dropped]) for _ in range(2)]
dist.all_gather(counts, torch.tensor([padded, dropped]))
assert all(torch.equal(c, torch.tensor([3, 2])) for c in counts), counts
say(f"DDP is Joinable, FSDP2 is not (Join raised {refused}); 5 samples on 2 ranks: 3 each padded, 2 each with drop_last")
shutdown()

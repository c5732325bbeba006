"""
name: meta-init-gaps
claim: After to_empty, a reset_parameters loop skips MultiheadAttention, leaves Embedding's padding row non-zero under FSDP2, loses buffers computed in __init__, and on CPU draws identical shards on every rank.
backs: pitfalls
world_size: 2
requires: stated-ranks

What the naive `for m in model.modules(): if hasattr(m, "reset_parameters"): ...` after
`to_empty` gets wrong, each asserted on this torch:
- nn.MultiheadAttention has only `_reset_parameters`: the loop never initialises it, and
  its `in_proj_weight` keeps whatever to_empty's uninitialised memory held.
- nn.Embedding(padding_idx=0).reset_parameters() zeroes the padding row by indexing the
  weight, which on a DTensor writes to a temporary: the row stays random.
- a buffer computed in __init__ under `torch.device("meta")` (a RoPE table) has no values;
  to_empty allocates it uninitialised and no reset_parameters recomputes it.
- with the same seed on every rank, CPU (gloo) ranks draw identical shards: rank 1's rows
  duplicate rank 0's (on CUDA, DTensor's RNG tracker gives each shard its own slice).
The core recipe's init (core-recipe-real-model check) covers all four.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.fsdp import fully_shard

device = init()
assert not hasattr(nn.MultiheadAttention(8, 2), "reset_parameters")
assert hasattr(nn.MultiheadAttention(8, 2), "_reset_parameters")


class WithTable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.arange(8.0), persistent=False)


with torch.device("meta"):
    emb = nn.Embedding(10, 4, padding_idx=0)
    holder = WithTable()
    lin = nn.Linear(8, 8)
assert holder.table.is_meta  # computed in __init__, but on meta: the values are gone

fully_shard(emb)
emb.to_empty(device=device)
emb.reset_parameters()
padding_row = emb.weight.full_tensor()[0]
assert padding_row.abs().sum() > 0, "Embedding.reset_parameters zeroed the padding row of a sharded weight"

fully_shard(lin)
lin.to_empty(device=device)
torch.manual_seed(0)
lin.reset_parameters()
full = lin.weight.full_tensor()
if device.type == "cpu":
    assert torch.equal(full[:4], full[4:]), "expected identical shards on every CPU rank with the same seed"
    say("same seed on 2 CPU ranks: rank 1's 4 rows equal rank 0's")
say(f"MultiheadAttention has no reset_parameters; padding row after reset: {padding_row.tolist()} (not zero); "
    f"buffer computed in __init__ is meta: {holder.table.is_meta}")
dist.barrier()
shutdown()

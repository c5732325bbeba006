"""
name: meta-init-gaps
claim: After to_empty, a reset_parameters loop skips MultiheadAttention, leaves Embedding's padding row non-zero under FSDP2, loses buffers computed in __init__, and on CPU draws identical shards on every rank.
backs: pitfalls
world_size: 2
requires: stated-ranks
mutant: loop-finds-private-reset: `getattr(m, "reset_parameters", None)` -> `getattr(m, "reset_parameters", getattr(m, "_reset_parameters", None))`
mutant: per-rank-seed: `torch.manual_seed(0)` -> `torch.manual_seed(dist.get_rank())`
mutant: loop-recomputes-buffer: `def init_buffers(self) -> None:` -> `def reset_parameters(self) -> None:`

A model with the parts that break it is built on meta, sharded with `fully_shard`, moved with
`to_empty`, and initialised with the naive loop
`for m in model.modules(): if hasattr(m, "reset_parameters"): m.reset_parameters()`.
Every parameter is first filled with a sentinel (7.0), standing for to_empty's uninitialised
memory, so "left untouched" is visible. Asserted after the loop:
- nn.MultiheadAttention has only `_reset_parameters`: its `in_proj_weight` still holds the
  sentinel on every element (its `out_proj`, a Linear, was reset);
- nn.Embedding(padding_idx=0).reset_parameters() zeroes the padding row by indexing the weight,
  which on a DTensor writes to a temporary: the row holds random values, not zeros;
- a buffer computed in __init__ (a RoPE-like table, arange here) does not hold its values: on
  meta they were never computed, to_empty allocates it uninitialised, and no reset_parameters
  recomputes it;
- with the same seed on every rank, CPU (gloo) ranks draw identical shards: rank 1's rows of a
  Linear weight equal rank 0's (on CUDA, DTensor's RNG tracker gives each shard its own slice:
  torch/distributed/tensor/_dispatch.py:342, GPU-only, not run here).
The core recipe's init (core-recipe-real-model check) covers all four.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.fsdp import fully_shard

SENTINEL = 7.0


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 8, padding_idx=0)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.lin = nn.Linear(8, 8)
        self.register_buffer("table", torch.arange(8.0), persistent=False)

    def init_buffers(self) -> None:
        """Recompute the table (what the core recipe's init calls; the naive loop does not)."""
        with torch.no_grad():
            self.table.copy_(torch.arange(8.0, device=self.table.device))


device = init()
with torch.device("meta"):
    model = Model()
fully_shard(model)
model.to_empty(device=device)
with torch.no_grad():
    for p in model.parameters():
        p.fill_(SENTINEL)  # what to_empty left: memory nobody initialised

torch.manual_seed(0)
for m in model.modules():  # the naive loop
    reset = getattr(m, "reset_parameters", None)
    if reset is not None:
        reset()

in_proj = model.attn.in_proj_weight.full_tensor()
assert torch.all(in_proj == SENTINEL), "the loop initialised MultiheadAttention's in_proj_weight"
assert not torch.all(model.attn.out_proj.weight.full_tensor() == SENTINEL)  # the loop ran on Linear children
padding_row = model.emb.weight.full_tensor()[0]
assert torch.count_nonzero(padding_row) > 0, "Embedding.reset_parameters zeroed the padding row of a sharded weight"
assert not torch.any(padding_row == SENTINEL)  # reset drew it: random, not zero
assert not torch.equal(model.table, torch.arange(8.0, device=device)), "the buffer computed in __init__ kept its values"
lin = model.lin.weight.full_tensor()
if device.type == "cpu":
    assert torch.equal(lin[:4], lin[4:]), "expected identical shards on every CPU rank with the same seed"
    say("same seed on 2 CPU ranks: rank 1's 4 rows of lin.weight equal rank 0's")
say(f"after to_empty + the reset_parameters loop: in_proj_weight untouched (all {SENTINEL}); padding row "
    f"{[round(v, 3) for v in padding_row.tolist()[:3]]}... (not zero); buffer table is not arange(8)")
dist.barrier()
shutdown()

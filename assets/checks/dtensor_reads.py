"""
name: dtensor-reads
claim: On a sharded DTensor, indexing then .item() gives the global value and is a collective (rank 0 alone blocks), a reduction's .item() silently gives this rank's partial result, .tolist() raises; full_tensor() is the safe read.
backs: pitfalls
world_size: 2
requires: stated-ranks
mutant: full-sum: `partial = weight.sum().item()` -> `partial = weight.sum().full_tensor().item()`
mutant: every-rank-indexes: `    store.wait(["alone-done"], WAIT)` -> `    [bias[0].item(), store.wait(["alone-done"], WAIT)]`
mutant: tolist-of-full: `    bias.tolist()` -> `    bias.full_tensor().tolist()`

`bias[0].item()` redistributes and returns element 0 of the whole tensor on every rank;
that redistribution is a collective: rank 0 calling it alone (rank 1 never does) has not
returned after 3 s, though element 0 is in rank 0's own shard.
`weight.sum()` is a DTensor with a Partial placement, whose `.item()` is this rank's
partial sum (no error, wrong number); `.tolist()` raises on a DTensor.
`full_tensor()` all-gathers (a collective: call it on every rank). clip_grad_norm_ works
on FSDP2's DTensor gradients when all are on one mesh.
"""

import datetime
import os
import sys
import threading

import torch
import torch.distributed as dist
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import fully_shard

init()
torch.manual_seed(0)
model = Stack()
fully_shard(model)
bias, weight = model.inp.bias, model.inp.weight
full_bias, full_weight = bias.full_tensor(), weight.full_tensor()
assert bias[0].item() == full_bias[0].item()
partial = weight.sum().item()
assert abs(partial - weight.to_local().sum().item()) < 1e-5
assert abs(partial - full_weight.sum().item()) > 1e-6, "sum().item() gave the global sum"
try:
    bias.tolist()
    raise AssertionError("tolist() worked on a DTensor")
except RuntimeError as exc:
    assert "tolist" in str(exc)
model(torch.randn(4, 16)).square().mean().backward()
reference = torch.linalg.vector_norm(torch.stack([p.grad.full_tensor().norm() for p in model.parameters()]))
norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
torch.testing.assert_close(norm.full_tensor(), reference)
say(f"bias[0].item()={bias[0].item():.4f} (global); weight.sum().item()={partial:.4f} on rank {dist.get_rank()} "
    f"vs global {full_weight.sum().item():.4f}; tolist() raises; clip_grad_norm_ on one mesh = {reference:.4f}")

# Rank 0 alone indexes: the redistribution waits for rank 1.
store = dist.distributed_c10d._get_default_store()
WAIT = datetime.timedelta(seconds=60)
if dist.get_rank() == 0:
    outcome: list[float] = []
    thread = threading.Thread(target=lambda: outcome.append(bias[0].item()), daemon=True)
    thread.start()
    thread.join(timeout=3)
    assert thread.is_alive() and not outcome, f"bias[0].item() on rank 0 alone returned {outcome}: no collective"
    say("bias[0].item() on rank 0 alone: still blocked after 3 s (a collective)")
    store.set("alone-done", "1")
else:
    store.wait(["alone-done"], WAIT)
# Rank 0 has a collective left pending: leave without another one (no destroy_process_group).
sys.stdout.flush()
os._exit(0)

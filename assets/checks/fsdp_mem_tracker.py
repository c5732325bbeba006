"""
name: fsdp-mem-tracker
claim: FSDPMemTracker (torch.distributed._tools.fsdp2_mem_tracker) attributes a training step's peak memory to sharded/unsharded parameters, gradients, activations, all-gather and reduce-scatter buffers and optimizer state, and runs on CPU.
backs: tuning
world_size: 2
requires: stated-ranks
mutant: no-optimizer: `FSDPMemTracker(model, optim)` -> `FSDPMemTracker(model)`

Tracks one step of a 4-block FSDP2 model with Adam on gloo. The peak snapshot per device
has one entry per kind; the sharded parameters are about half the unsharded ones at 2
ranks (each block is unsharded only while it runs), and the optimizer state is counted.
A private module (`_tools`): the API may change between releases; this check says when.
"""

import torch
from _dist import Stack, init, say, shutdown
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed.fsdp import fully_shard

device = init()
model = Stack(dim=64, blocks=4)
for block in model.blocks:
    fully_shard(block)
fully_shard(model)
optim = torch.optim.Adam(model.parameters())
x = torch.randn(8, 64, device=device)
tracker = FSDPMemTracker(model, optim)
tracker.track_inputs((x,))
with tracker:
    model(x).sum().backward()
    optim.step()
    optim.zero_grad()
peak = tracker.get_tracker_snapshot("peak")[device]
kinds = {str(k.value) if hasattr(k, "value") else str(k): v for k, v in peak.items()}
for kind in ("Sharded Param", "Unsharded Param", "Sharded Grad", "Activation", "All Gather", "Reduce Scatter",
             "OptState", "Total"):
    assert kind in kinds, sorted(kinds)
full_bytes = sum(p.numel() * p.element_size() for p in Stack(dim=64, blocks=4).parameters())
assert abs(kinds["Sharded Param"] - full_bytes / 2) <= 0.05 * full_bytes, (kinds["Sharded Param"], full_bytes)
assert kinds["OptState"] > 0 and kinds["Total"] >= kinds["Sharded Param"] + kinds["OptState"]
say(f"FSDPMemTracker peak on {device}: sharded params {kinds['Sharded Param']} B of {full_bytes} B full, "
    f"unsharded {kinds['Unsharded Param']} B, optimizer state {kinds['OptState']} B, total {kinds['Total']} B")
shutdown()

"""
name: expandable-segments
claim: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, set before the first CUDA allocation, makes the CUDA caching allocator use expandable segments during FSDP2 training.
backs: tuning
world_size: 1
requires: cuda
rests_on: torch/cuda/memory.py:1305 `return torch._C._accelerator_setAllocatorSettings(env)`
mutant: not-expandable: `= "expandable_segments:True"` -> `= "expandable_segments:False"`

The variable is read by the C++ caching allocator (the same settings string that
`torch._C._accelerator_setAllocatorSettings` applies). This check sets it before torch
touches CUDA, trains a few FSDP2 steps, and asserts every segment in the allocator's
memory snapshot is expandable. Whether it helps is workload-dependent: try it when an OOM
message reports much memory "reserved but unallocated" (fragmentation).
"""

import os

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"  # before torch touches CUDA

import torch
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import fully_shard

device = init("nccl")
model = Stack(dim=256, blocks=4).to(device)
for block in model.blocks:
    fully_shard(block)
fully_shard(model)
optim = torch.optim.AdamW(model.parameters())
for _ in range(3):
    model(torch.randn(32, 256, device=device)).sum().backward()
    optim.step()
    optim.zero_grad()
segments = torch.cuda.memory._snapshot()["segments"]
assert segments and all(s.get("is_expandable") for s in segments), [s.get("is_expandable") for s in segments]
say(f"{len(segments)} CUDA segments, all expandable")
shutdown()

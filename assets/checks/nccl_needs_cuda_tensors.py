"""
name: nccl-needs-cuda-tensors
claim: NCCL collectives need CUDA tensors, monitored_barrier is refused on an NCCL-only group (2.15 accepts a "cpu:gloo,cuda:nccl" group for it), and one "cpu:gloo,cuda:nccl" group handles both kinds of tensors.
backs: pitfalls
world_size: 2
requires: cuda
rests_on: torch/distributed/distributed_c10d.py:6684 `"monitored_barrier requires a group with a CPU-capable backend (e.g. GLOO)."`
mutant: gloo-side-group: `nccl = dist.new_group(backend="nccl")` -> `nccl = dist.new_group(backend="gloo")`
mutant: nccl-only-default: `dist.init_process_group("cpu:gloo,cuda:nccl", device_id=device)` -> `dist.init_process_group("nccl", device_id=device)`

On an NCCL group an all_reduce of a CPU tensor raises and monitored_barrier raises
ValueError; a group created with backend "cpu:gloo,cuda:nccl" routes CPU tensors to gloo
and CUDA tensors to NCCL.
"""

import os

import torch
import torch.distributed as dist
from _dist import say, shutdown

device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
torch.cuda.set_device(device)
dist.init_process_group("cpu:gloo,cuda:nccl", device_id=device)
cpu, gpu = torch.ones(1), torch.ones(1, device=device)
dist.all_reduce(cpu)
dist.all_reduce(gpu)
assert cpu.item() == gpu.item() == dist.get_world_size()
nccl = dist.new_group(backend="nccl")
try:
    dist.all_reduce(torch.ones(1), group=nccl)
    raise AssertionError("NCCL reduced a CPU tensor")
except (RuntimeError, ValueError):
    pass
try:
    dist.monitored_barrier(group=nccl)
    raise AssertionError("monitored_barrier ran on NCCL")
except ValueError as exc:
    # The message up to 2.14: "only implemented for GLOO backend"; 2.15 asks for a CPU-capable backend instead.
    assert "only implemented for GLOO" in str(exc) or "requires a group with a CPU-capable backend" in str(exc), exc
say("cpu:gloo,cuda:nccl reduced both; NCCL refused a CPU tensor and monitored_barrier")
shutdown()

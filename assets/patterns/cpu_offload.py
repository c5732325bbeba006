"""
name: cpu-offload
min_torch: 2.6
title: CPU offload from the GPU of parameters, gradients and optimizer state with CPUOffloadPolicy (CUDA)
world_size: 1
requires: cuda
tags: fsdp2, fully_shard, CPUOffloadPolicy, OffloadPolicy, cpu offload, memory, pin_memory, training
mutant: shards-on-the-gpu: `model.to_empty(device="cpu")` -> `model.to_empty(device=device)`
mutant: root-not-offloaded: `fully_shard(model, offload_policy=policy)` -> `fully_shard(model)`

`fully_shard(module, offload_policy=CPUOffloadPolicy())` keeps the *sharded*
parameters, their gradients and the optimizer state in (pinned) CPU memory. Before
each block's all-gather FSDP copies its shard host-to-device; after backward it copies
the reduced gradient shard device-to-host, and `optimizer.step()` runs on the CPU.
GPU memory then holds only the unsharded blocks in flight and activations: use it
when parameters + optimizer state do not fit even when sharded. It costs PCIe
bandwidth and a CPU optimizer step.

Why this pattern needs CUDA: it shows offloading from the GPU (the point of it) with the
default `pin_memory=True`, which on a CPU-only machine makes `fully_shard` raise "Cannot
access accelerator device when none is available". `CPUOffloadPolicy(pin_memory=False)`
works on CPU-only gloo: see the cpu-offload-gloo pattern.
Why world_size 1: every rank needs its own GPU and NCCL refuses two ranks on one GPU
("Duplicate GPU detected": the probe in references/verification-nccl.md, NCCL 2.28.9);
one GPU is enough to see offloading work. Launch with --nproc-per-node set to the number
of GPUs to shard across them as well.

Points that bite:
- apply the same offload policy to every fully_shard call (blocks and root);
- create the optimizer after fully_shard: its state is then allocated on the CPU;
- inputs go to the GPU as usual; only parameters/gradients/optimizer state live on the CPU;
- `pin_memory=True` (default) makes the copies asynchronous; pinned memory is page-locked,
  so do not pin more than the host can spare (`CPUOffloadPolicy(pin_memory=False)`).

CPUOffloadPolicy and its `pin_memory=True` default: torch/distributed/fsdp/_fully_shard/
_fsdp_api.py:183-199 in torch 2.13, the same default in 2.4's torch.distributed._composable.fsdp.
This pattern runs only on a GPU: the device-to-host copy of reduced gradients it relies on is
in foreach_reduce (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, `offload_to_cpu`).

Run: torchrun --standalone --nproc-per-node 1 assets/patterns/cpu_offload.py
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

DIM, BLOCKS, STEPS, BATCH = 64, 4, 25, 32


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("cpu_offload.py needs CUDA: CPUOffloadPolicy offloads from the GPU to the host")
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    rank = dist.get_rank()

    # Build on the meta device; with offloading, the sharded parameters are materialized on the CPU.
    with torch.device("meta"):
        model = nn.Sequential(*(Block(DIM) for _ in range(BLOCKS)), nn.Linear(DIM, DIM))
    policy = CPUOffloadPolicy(pin_memory=True)
    for block in model[:-1]:
        fully_shard(block, offload_policy=policy)
    fully_shard(model, offload_policy=policy)
    model.to_empty(device="cpu")  # offloaded shards live on the host
    torch.manual_seed(0)
    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.reset_parameters()

    for name, param in model.named_parameters():
        assert param.device.type == "cpu", f"{name} is on {param.device}, expected the CPU"

    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)  # steps on the CPU
    teacher = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    data_gen = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(BATCH, DIM, generator=data_gen).to(device)
    y = x @ teacher.to(device)

    torch.cuda.reset_peak_memory_stats(device)
    losses: list[float] = []
    for _ in range(STEPS):
        loss = nn.functional.mse_loss(model(x), y)  # computes on the GPU
        loss.backward()
        optim.step()
        optim.zero_grad()
        logged = loss.detach().clone()
        dist.all_reduce(logged, op=dist.ReduceOp.AVG)
        losses.append(logged.item())

    for name, param in model.named_parameters():
        assert param.device.type == "cpu", f"{name} moved to {param.device}"
    state = next(iter(optim.state.values()))
    assert state["exp_avg"].device.type == "cpu", "optimizer state should be on the CPU"
    if rank == 0:
        peak = torch.cuda.max_memory_allocated(device) / 2**20
        print(f"parameters, gradients and optimizer state on the CPU; peak GPU memory {peak:.1f} MiB", flush=True)
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {STEPS} steps", flush=True)
    assert losses[-1] < 0.5 * losses[0], f"loss did not go down: {losses[0]:.4f} -> {losses[-1]:.4f}"
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

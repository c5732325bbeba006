"""
name: cpu-offload-gloo
min_torch: 2.9
title: CPUOffloadPolicy(pin_memory=False) on CPU-only gloo, equal to training without offload
world_size: 2
requires: gloo
tags: fsdp2, fully_shard, CPUOffloadPolicy, cpu offload, pin_memory, gloo, cpu, testing
mutant: default-pinned-policy: `offloaded = shard(copy.deepcopy(base), CPUOffloadPolicy(pin_memory=False))` -> `offloaded = shard(copy.deepcopy(base), CPUOffloadPolicy())` => RuntimeError

`CPUOffloadPolicy()` pins host memory, which needs an accelerator: on a machine without a GPU
`fully_shard` raises, "Found no NVIDIA driver on your system" with a CUDA build of torch (what
`pip install torch` gives on Linux) or "Cannot access accelerator device when none is available"
with a CPU build.
`CPUOffloadPolicy(pin_memory=False)` works there, so offloading code can be exercised in
CPU-only tests and CI on gloo. (On a CPU-only machine nothing moves: parameters already
live on the CPU; the point is running the same code path. For real offloading from the
GPU see the cpu-offload pattern.)

Asserted: `fully_shard(..., offload_policy=CPUOffloadPolicy())` raises the error of this build here (on a
machine without an accelerator), the offloaded model's sharded parameters, gradients and
optimizer state are on the CPU, and its losses equal those of the same model sharded
without offload. `CPUOffloadPolicy.pin_memory` defaults to True
(torch/distributed/fsdp/_fully_shard/_fsdp_api.py, `pin_memory: bool = True`).

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/cpu_offload_gloo.py
"""

from __future__ import annotations

import copy
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

DIM, BLOCKS, STEPS = 32, 2, 10


def shutdown() -> None:
    """Destroy the process group, then leave with os._exit on gloo (SKILL.md pitfall 18)."""
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


def shard(model: nn.Sequential, policy: CPUOffloadPolicy | None) -> nn.Sequential:
    kwargs = {"offload_policy": policy} if policy else {}
    for block in model:
        fully_shard(block, **kwargs)  # the same policy on every call, blocks and root
    fully_shard(model, **kwargs)
    return model


def main() -> None:
    dist.init_process_group("gloo")  # this pattern is about CPU-only machines
    rank = dist.get_rank()
    torch.manual_seed(0)
    base = nn.Sequential(*(Block() for _ in range(BLOCKS)))
    # The default policy pins memory: it needs an accelerator (torch.accelerator: 2.6 on; not in 2.4).
    if not torch.accelerator.is_available():
        try:
            fully_shard(copy.deepcopy(base), offload_policy=CPUOffloadPolicy())
        except RuntimeError as exc:
            # The error depends on the build: CUDA builds (the registry's Linux default) ask the CUDA runtime.
            want = "Found no NVIDIA driver" if torch.version.cuda else "Cannot access accelerator device"
            assert want in str(exc), exc
        else:
            raise AssertionError("CPUOffloadPolicy() (pin_memory=True) worked without an accelerator")
    offloaded = shard(copy.deepcopy(base), CPUOffloadPolicy(pin_memory=False))
    plain = shard(copy.deepcopy(base), None)
    optims = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (offloaded, plain)]
    teacher = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    gen = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(16, DIM, generator=gen)
        y = torch.tanh(x @ teacher)
        step = []
        for model, optim in zip((offloaded, plain), optims):
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optim.step()
            optim.zero_grad(set_to_none=False)
            step.append(loss.item())
        assert step[0] == step[1], step
        losses.append(step[0])
    assert all(p.device.type == "cpu" and p.grad.device.type == "cpu" for p in offloaded.parameters())
    assert all(s["exp_avg"].device.type == "cpu" for s in optims[0].state.values())
    total = torch.tensor([losses[0], losses[-1]])
    dist.all_reduce(total, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"CPUOffloadPolicy(pin_memory=False) on gloo: losses equal to no offload at all {STEPS} steps; "
              f"loss {total[0]:.4f} -> {total[1]:.4f}", flush=True)
    assert total[1] < total[0]
    shutdown()


if __name__ == "__main__":
    main()

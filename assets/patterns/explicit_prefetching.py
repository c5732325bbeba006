"""
name: explicit-prefetching
title: Explicit forward/backward prefetching with set_modules_to_forward_prefetch / set_modules_to_backward_prefetch
world_size: 2
requires:
tags: fsdp2, fully_shard, prefetch, set_modules_to_forward_prefetch, set_modules_to_backward_prefetch, unshard, overlap, performance

By default FSDP2 prefetches one block ahead: in forward it all-gathers block i+1
while block i computes (implicitly, through the CUDA stream order), and in backward
it prefetches the previous block. When communication is slower than compute (large
blocks, slow interconnect, CPU-bound launch) you can issue all-gathers earlier and for
more blocks:

    for i, block in enumerate(blocks):
        block.set_modules_to_forward_prefetch(blocks[i + 1 : i + 1 + N])
        block.set_modules_to_backward_prefetch(blocks[max(0, i - N) : i][::-1])

and call `model.unshard()` before the first forward of a step so the root's
all-gather starts before the data loader hands over the batch. Prefetching more
blocks costs more memory (more unsharded blocks alive at once); it never changes
the numbers, which this script checks against a model without explicit prefetching
before training it.

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/explicit_prefetching.py
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FSDPModule, fully_shard

DIM, BLOCKS, PREFETCH, STEPS, BATCH = 32, 6, 2, 25, 16


def init_distributed() -> torch.device:
    """nccl + cuda:LOCAL_RANK when CUDA is available, else gloo + cpu (DIST_BACKEND overrides)."""
    backend = os.environ.get("DIST_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device

def shutdown() -> None:
    """Destroy the process group; on gloo, then leave without interpreter teardown."""
    gloo = dist.get_backend() == "gloo"
    dist.destroy_process_group()
    if gloo:
        # torch 2.13 on CPU: objects that outlive main() (DTensor caches under FSDP, DDP's C++
        # reducer) keep the gloo group alive after destroy_process_group, and its worker thread
        # can release a Python-owned tensor while the interpreter shuts down, aborting the process
        # ("terminate called without an active exception", intermittently: 10 of 20 runs
        # of fsdp2-training in one measurement on a busy 2-core machine, 0 of 10 in a quieter one).
        # The work is done and flushed, so skip the teardown. NCCL groups are shut down by
        # destroy_process_group: no early exit there.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)



class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(DIM) for _ in range(BLOCKS))
        self.head = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build(device: torch.device, explicit_prefetch: bool) -> Model:
    torch.manual_seed(0)
    model = Model().to(device)
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    if explicit_prefetch:
        blocks: list[FSDPModule] = list(model.blocks)  # type: ignore[arg-type]
        for i, block in enumerate(blocks):
            # Forward: when block i runs, all-gather the next PREFETCH blocks.
            block.set_modules_to_forward_prefetch(blocks[i + 1 : i + 1 + PREFETCH])
            # Backward runs blocks in reverse: prefetch the PREFETCH blocks before i, nearest first.
            block.set_modules_to_backward_prefetch(blocks[max(0, i - PREFETCH) : i][::-1])
    return model


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    teacher = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    data_gen = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(BATCH, DIM, generator=data_gen).to(device)
    y = x @ teacher.to(device)

    plain = build(device, explicit_prefetch=False)
    prefetched = build(device, explicit_prefetch=True)
    for model in (plain, prefetched):
        nn.functional.mse_loss(model(x), y).backward()
    for (name, a), b in zip(plain.named_parameters(), prefetched.parameters()):
        torch.testing.assert_close(a.grad.to_local(), b.grad.to_local(), msg=f"{name}: prefetching changed grads")
    if rank == 0:
        print(f"prefetching {PREFETCH} blocks ahead gives the same gradients as the default", flush=True)

    model = prefetched
    model.zero_grad()
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses: list[float] = []
    for _ in range(STEPS):
        # Start the root's all-gather (here: the head) before forward needs it; not recursive.
        model.unshard()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optim.step()
        optim.zero_grad()
        logged = loss.detach().clone()
        dist.all_reduce(logged, op=dist.ReduceOp.AVG)
        losses.append(logged.item())

    if rank == 0:
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {STEPS} steps", flush=True)
    assert losses[-1] < 0.5 * losses[0], f"loss did not go down: {losses[0]:.4f} -> {losses[-1]:.4f}"
    shutdown()


if __name__ == "__main__":
    main()

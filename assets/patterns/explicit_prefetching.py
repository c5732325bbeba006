"""
name: explicit-prefetching
min_torch: 2.8
title: Explicit forward/backward prefetching with set_modules_to_forward_prefetch / set_modules_to_backward_prefetch
world_size: 2
requires:
tags: fsdp2, fully_shard, prefetch, set_modules_to_forward_prefetch, set_modules_to_backward_prefetch, unshard, overlap, performance
mutant: no-prefetch: `block.set_modules_to_forward_prefetch(blocks[i + 1 : i + 1 + PREFETCH])` -> `pass`; `block.set_modules_to_backward_prefetch(blocks[max(0, i - PREFETCH) : i][::-1])` -> `pass`
mutant: forward-only: `block.set_modules_to_backward_prefetch(blocks[max(0, i - PREFETCH) : i][::-1])` -> `pass`
mutant: backward-farthest-first: `blocks[max(0, i - PREFETCH) : i][::-1]` -> `blocks[max(0, i - PREFETCH) : i]`

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

That the prefetching happens is observed, not assumed: the script wraps the all-gather
FSDP2 issues (`dist.all_gather_single` in 2.13, torch/distributed/fsdp/_fully_shard/
_fsdp_collectives.py:119; `dist.all_gather_into_tensor` in 2.4 to 2.12), tells the
blocks apart by the size of what they gather (each block has its own width), and
records which blocks have been all-gathered when each block's forward and backward
pre-hooks run. With PREFETCH=2, when block i's forward starts blocks 0..i+2 have been
all-gathered (by default only 0..i: on CPU nothing runs ahead); in backward the blocks
are gathered nearest first, and when block i's backward starts blocks down to i-1 are
already gathered (by default down to i). `set_modules_to_*_prefetch` exist in torch
2.13's FSDPModule (torch/distributed/fsdp/_fully_shard/_fully_shard.py:513, 533) and in
2.6's; 2.4's FSDP2 (torch.distributed._composable.fsdp) has neither (2.5 not checked).

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
    def __init__(self, dim: int, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(dim, width)
        self.down = nn.Linear(width, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # A different width per block (even sizes: no padding at 2 ranks), so that the size of an
        # all-gather tells which block it gathers.
        self.blocks = nn.ModuleList(Block(DIM, (2 + i) * DIM) for i in range(BLOCKS))
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


def record_all_gathers() -> list[int]:
    """Wrap the all-gather functions FSDP2 looks up on `torch.distributed` at each call; the returned
    list gets the element count of every all-gather input (one per FSDP module unshard)."""
    numels: list[int] = []

    def spy(collective):
        def wrapper(*args, **kwargs):
            numels.append((kwargs["input_tensor"] if "input_tensor" in kwargs else args[1]).numel())
            return collective(*args, **kwargs)
        return wrapper

    for name in ("all_gather_single", "all_gather_into_tensor"):
        if hasattr(dist, name):
            setattr(dist, name, spy(getattr(dist, name)))
    return numels


def gather_order(model: Model, x: torch.Tensor, y: torch.Tensor, numels: list[int]) -> dict[str, list[list[int]]]:
    """One forward + backward; for each block (in the order they run), the blocks all-gathered so far
    in this pass when its forward pre-hook runs, and in backward since backward began."""
    shard_numel = {sum(p.to_local().numel() for p in block.parameters()): i for i, block in enumerate(model.blocks)}
    forward_seen: list[list[int]] = []
    backward_seen: list[list[int]] = []
    start = [len(numels), 0]

    def gathered(since: int) -> list[int]:
        return [shard_numel[n] for n in numels[since:] if n in shard_numel]  # the head is not a block

    hooks = []
    for block in model.blocks:
        hooks.append(block.register_forward_pre_hook(lambda *_: forward_seen.append(gathered(start[0]))))
        hooks.append(block.register_full_backward_pre_hook(lambda *_: backward_seen.append(gathered(start[1]))))
    loss = nn.functional.mse_loss(model(x), y)
    start[1] = len(numels)
    loss.backward()
    for hook in hooks:
        hook.remove()
    return {"forward": forward_seen, "backward": backward_seen}


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    teacher = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    data_gen = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(BATCH, DIM, generator=data_gen).to(device)
    y = x @ teacher.to(device)

    numels = record_all_gathers()
    plain = build(device, explicit_prefetch=False)
    prefetched = build(device, explicit_prefetch=True)
    default_order = gather_order(plain, x, y, numels)
    order = gather_order(prefetched, x, y, numels)
    last = BLOCKS - 1
    for i, seen in enumerate(order["forward"]):
        # When block i's forward starts, blocks 0 .. i + PREFETCH have been all-gathered, in order.
        assert seen == list(range(min(last, i + PREFETCH) + 1)), f"forward of block {i}: gathered {seen}"
    for i, seen in enumerate(default_order["forward"]):
        assert seen == list(range(i + 1)), f"default forward of block {i}: gathered {seen}"
    for j, seen in enumerate(order["backward"]):
        i = last - j  # backward runs the blocks in reverse
        # Nearest first, and when block i's backward starts, block i - 1 is gathered already (by block
        # i + 1's prefetch: a module's own pre-backward, which prefetches, runs after its backward pre-hook).
        reach = last if i == last else max(0, i - PREFETCH + 1)
        assert seen == list(range(last, reach - 1, -1)), f"backward of block {i}: gathered {seen}"
    for j, seen in enumerate(default_order["backward"]):
        assert seen == list(range(last, last - j - 1, -1)), f"default backward of block {last - j}: gathered {seen}"
    if rank == 0:
        print(f"all-gathered when each block's forward starts: explicit {order['forward']}, default "
              f"{default_order['forward']}", flush=True)
        print(f"all-gathered when each block's backward starts: explicit {order['backward']}, default "
              f"{default_order['backward']}", flush=True)
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

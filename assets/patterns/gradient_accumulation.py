"""
name: gradient-accumulation
min_torch: 2.8
title: Gradient accumulation without communication via set_requires_gradient_sync
world_size: 2
requires:
tags: fsdp2, fully_shard, set_requires_gradient_sync, no_sync, gradient accumulation, microbatch, training
mutant: sync-every-microbatch: `model.set_requires_gradient_sync(sync_each or is_last)` -> `model.set_requires_gradient_sync(True)`
mutant: no-division: `loss = nn.functional.mse_loss(model(x), y) / len(batches)` -> `loss = nn.functional.mse_loss(model(x), y)`
mutant: root-only: `model.set_requires_gradient_sync(sync_each or is_last)` -> `model.set_requires_gradient_sync(sync_each or is_last, recurse=False)`

FSDP2's replacement for FSDP1/DDP `no_sync()`: call
`model.set_requires_gradient_sync(False)` before the backward passes of all but the
last microbatch, and `True` before the last one. Skipped microbatches keep their
gradients unsharded on each rank (no reduce-scatter); the last backward reduce-scatters
the accumulated sum once. This trades memory (an unsharded gradient per block) for
less communication; with plenty of memory you can additionally call
`set_reshard_after_backward(False)` to skip re-all-gathering parameters between
microbatches.

The script proves the two ways agree: model A accumulates without communication,
model B (same init) syncs after every microbatch; after one accumulated step their
sharded gradients are equal. It counts the gradient reduce-scatters FSDP issues (it wraps
`dist.reduce_scatter_single`, what 2.13's FSDP2 calls,
torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:184; `dist.reduce_scatter_tensor`
in 2.4 to 2.12): A issues one per FSDP module per step, B one per module per microbatch. Then A
trains and the loss goes down. `set_requires_gradient_sync(requires_gradient_sync,
recurse=True)` is recursive by default (torch 2.13, _fully_shard.py:414); with `recurse=False`
only the root stops syncing and every block still reduce-scatters each microbatch.

Divide each microbatch loss by the number of microbatches so the accumulated
gradient is the mean over the whole batch: asserted against model C (same init), one
backward over all microbatches concatenated (equal-sized microbatches, a mean loss).

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/gradient_accumulation.py
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FSDPModule, fully_shard

DIM, MICROBATCHES, MICRO_BATCH, STEPS = 32, 4, 8, 15


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



def count_reduce_scatters() -> list[int]:
    """Wrap the reduce-scatter functions FSDP2 looks up on `torch.distributed` at each call; the returned
    one-element list counts the calls."""
    calls = [0]

    def spy(collective):
        def wrapper(*args, **kwargs):
            calls[0] += 1
            return collective(*args, **kwargs)
        return wrapper

    for name in ("reduce_scatter_single", "reduce_scatter_tensor"):  # 2.13 / 2.4 to 2.12
        if hasattr(dist, name):
            setattr(dist, name, spy(getattr(dist, name)))
    return calls


def make_sharded_model(device: torch.device) -> nn.Sequential:
    torch.manual_seed(0)  # identical init for both models and on every rank
    model = nn.Sequential(
        nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM)
    ).to(device)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    return model


def accumulate(model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]], sync_each: bool) -> float:
    """One optimizer step's worth of backward passes; returns the summed (scaled) loss."""
    assert isinstance(model, FSDPModule)
    total = 0.0
    for i, (x, y) in enumerate(batches):
        is_last = i == len(batches) - 1
        # recurse=True (default) sets the flag on every FSDP module under the root.
        model.set_requires_gradient_sync(sync_each or is_last)
        loss = nn.functional.mse_loss(model(x), y) / len(batches)
        loss.backward()
        if not (sync_each or is_last):
            # Nothing was reduce-scattered: the sharded .grad stays empty, the unsharded
            # gradient waits inside FSDP for the last microbatch.
            assert all(p.grad is None for p in model.parameters()), "gradient was synced early"
        total += loss.item()
    return total


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    teacher = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    data_gen = torch.Generator().manual_seed(100 + rank)

    def microbatches() -> list[tuple[torch.Tensor, torch.Tensor]]:
        xs = [torch.randn(MICRO_BATCH, DIM, generator=data_gen).to(device) for _ in range(MICROBATCHES)]
        return [(x, x @ teacher.to(device)) for x in xs]

    model_a = make_sharded_model(device)  # accumulates locally, one reduce-scatter per step
    model_b = make_sharded_model(device)  # reduce-scatters after every microbatch

    batches = microbatches()
    reduce_scatters = count_reduce_scatters()
    units = sum(isinstance(m, nn.Linear) for m in model_a)  # one per sharded Linear: the root owns no parameter
    accumulate(model_a, batches, sync_each=False)
    assert reduce_scatters[0] == units, f"accumulating: {reduce_scatters[0]} reduce-scatters, expected {units}"
    reduce_scatters[0] = 0
    accumulate(model_b, batches, sync_each=True)
    assert reduce_scatters[0] == units * MICROBATCHES, f"syncing each microbatch: {reduce_scatters[0]}"
    for (name, pa), pb in zip(model_a.named_parameters(), model_b.parameters()):
        ga, gb = pa.grad.to_local(), pb.grad.to_local()  # DTensor grads: compare this rank's shard
        torch.testing.assert_close(ga, gb, rtol=1e-5, atol=1e-6, msg=f"{name}: accumulated grads differ")
    # The division by the number of microbatches: the accumulated gradient is the one big batch's.
    model_c = make_sharded_model(device)
    x_all, y_all = torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches])
    nn.functional.mse_loss(model_c(x_all), y_all).backward()
    for (name, pa), pc in zip(model_a.named_parameters(), model_c.parameters()):
        torch.testing.assert_close(pa.grad.to_local(), pc.grad.to_local(), rtol=1e-5, atol=1e-6,
                                   msg=f"{name}: accumulated grads differ from one batch of all microbatches")
    if rank == 0:
        print("no-sync accumulation matches per-microbatch sync and one big batch: gradients equal", flush=True)

    optim = torch.optim.AdamW(model_a.parameters(), lr=1e-2)
    model_a.zero_grad()
    fixed = microbatches()  # one fixed batch: the loss must fall as A fits it
    losses: list[float] = []
    for _ in range(STEPS):
        loss = accumulate(model_a, fixed, sync_each=False)
        optim.step()
        optim.zero_grad()
        logged = torch.tensor(loss, device=device)
        dist.all_reduce(logged, op=dist.ReduceOp.AVG)
        losses.append(logged.item())

    if rank == 0:
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {STEPS} steps of {MICROBATCHES} microbatches", flush=True)
    assert losses[-1] < 0.5 * losses[0], f"loss did not go down: {losses[0]:.4f} -> {losses[-1]:.4f}"
    shutdown()


if __name__ == "__main__":
    main()

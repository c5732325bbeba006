"""
name: ddp-join-uneven-inputs
min_torch: 2.6
title: DDP with the Join context manager for uneven inputs across ranks
world_size: 2
requires: stated-ranks
tags: ddp, DistributedDataParallel, Join, uneven inputs, join, hang, data parallel, training
mutant: no-join: `with Join([model]):  # without this` -> `if True:  # without this` => RuntimeError
mutant: divide-by-active-ranks: `with Join([model]):  # without this` -> `with Join([model], divide_by_initial_world_size=False):  # without this`

When ranks get different numbers of batches, plain DDP breaks: the rank that runs out
stops calling backward, and the others' gradient all-reduce has no partner. It waits until
the group's timeout (30 min on gloo, 10 min on NCCL by default) and then raises, or, when the
early rank goes on to another collective, the two may match up wrongly. This script sets a
60 s timeout so a broken run fails within a minute.
`with Join([model]):` fixes it: a rank that has finished "shadows" the collectives
of the ranks still training (it contributes zeros to their all-reduces) until every
rank has joined. By default the gradient is still divided by the full world size
(`divide_by_initial_world_size=True`), so late batches count with a smaller weight;
pass `False` to divide by the ranks still active.

Join needs every participant to be `Joinable`: DDP and ZeroRedundancyOptimizer are,
FSDP (1 and 2) is not; with FSDP make inputs even instead (DistributedSampler with
drop_last=True, or cap every rank at the global minimum number of batches).

Here rank r gets 4 + 3r batches. The script trains, checks the replicas are still
identical afterwards, and checks the loss on a held-out batch went down. On a step where
rank 1 trains alone it compares DDP's gradient with the local one: half of it (divided by
the initial world size, 2). `Join` and `divide_by_initial_world_size` are as in torch 2.13's
torch/distributed/algorithms/join.py and DDP's `join_hook` (torch/nn/parallel/distributed.py).

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/ddp_join_uneven_inputs.py
"""

from __future__ import annotations

import copy
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

DIM, BATCH = 16, 8


def init_distributed() -> torch.device:
    """nccl + cuda:LOCAL_RANK when CUDA is available, else gloo + cpu (DIST_BACKEND overrides)."""
    backend = os.environ.get("DIST_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        # A collective left without a partner (what the no-join mutant produces) fails after this,
        # not after gloo's default 30 minutes.
        dist.init_process_group("gloo", timeout=timedelta(seconds=60))
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



def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.ReLU(), nn.Linear(2 * DIM, DIM)).to(device)
    model = DDP(net, device_ids=[device.index] if device.type == "cuda" else None)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)

    teacher = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    data_gen = torch.Generator().manual_seed(100 + rank)
    num_batches = 4 + 3 * rank  # uneven on purpose
    batches = [torch.randn(BATCH, DIM, generator=data_gen).to(device) for _ in range(num_batches)]
    held_out = torch.randn(64, DIM, generator=torch.Generator().manual_seed(7)).to(device)

    def held_out_loss() -> float:
        with torch.no_grad():  # the local module: no collectives, so any rank may call it alone
            return nn.functional.mse_loss(model.module(held_out), held_out @ teacher.to(device)).item()

    before = held_out_loss()
    epochs = 6
    alone_from = epochs * 4  # rank 0's number of steps: from then on the other ranks train without it
    step, compared = 0, 0
    with Join([model]):  # without this, rank 0 finishes early and rank 1's all-reduce has no partner
        for _ in range(epochs):  # a few epochs over this rank's (uneven) shard of data
            for x in batches:
                target = x @ teacher.to(device)
                local = copy.deepcopy(model.module) if step == alone_from else None
                loss = nn.functional.mse_loss(model(x), target)
                loss.backward()
                if local is not None:
                    # The same batch without DDP: the gradient this rank computes on its own.
                    nn.functional.mse_loss(local(x), target).backward()
                    for mine, synced in zip(local.parameters(), model.module.parameters()):
                        # rank 0 has joined and contributes zeros; the sum is divided by the initial world size
                        torch.testing.assert_close(synced.grad, mine.grad / dist.get_world_size())
                    compared += 1
                optim.step()
                optim.zero_grad()
                step += 1
    after = held_out_loss()
    assert compared == (1 if rank > 0 else 0), compared

    # DDP keeps replicas identical even with Join: compare every parameter with rank 0's.
    for name, param in model.module.named_parameters():
        reference = param.detach().clone()
        dist.broadcast(reference, src=0)
        assert torch.equal(reference, param.detach()), f"{name}: replicas diverged"

    print(f"rank {rank}: {num_batches} batches/epoch", flush=True)
    dist.barrier()
    if rank == 0:
        print(f"loss {before:.4f} -> {after:.4f} (held-out batch); replicas identical", flush=True)
    assert after < 0.5 * before, f"loss did not go down: {before:.4f} -> {after:.4f}"
    shutdown()


if __name__ == "__main__":
    main()

"""
name: hsdp-2d-mesh
min_torch: 2.8
title: HSDP (hybrid sharding) on a 2-D device mesh with fully_shard(mesh=...)
world_size: 4
requires: stated-ranks
tags: fsdp2, fully_shard, hsdp, hybrid sharding, device mesh, init_device_mesh, replicate, shard, multi-node, HYBRID_SHARD, meta-device, init_weights
mutant: per-rank-seed: `torch.manual_seed(seed)  #` -> `torch.manual_seed(seed + dist.get_rank())  #`
mutant: in-place-on-shards: `m._parameters[n] = full  # init full` -> `pass  # init full`; `if full.isnan().any():` -> `if False:`; `p.copy_(distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None))` -> `pass`

Hybrid sharded data parallel: shard parameters within a group of ranks (typically
the GPUs of one node, over fast NVLink) and replicate that sharded model across
groups (nodes, over the slower network). Gradients are reduce-scattered inside each
shard group, then all-reduced across replicas. This is FSDP1's
`ShardingStrategy.HYBRID_SHARD`; in FSDP2 you pass a 2-D mesh:

    mesh = init_device_mesh("cuda", (num_nodes, gpus_per_node), mesh_dim_names=("replicate", "shard"))
    fully_shard(block, mesh=mesh)

Dim 0 is replicate, dim 1 is shard (the order fully_shard expects). Each parameter
becomes a DTensor with placements (Replicate(), Shard(0)).

The model is built on the meta device and initialised after sharding by SKILL.md's
`init_weights`: one seed on every rank, each module's init on full tensors, this rank's
slice kept. Replicas must start equal: gradients are all-reduced across "replicate", the
weights never re-synchronised, so replicas that start different (a per-rank seed) stay
different for good.

Why 4 ranks: the smallest mesh where both dimensions are larger than 1 (2 replicas x
2 shards). The script checks the placements, that replicas hold bit-identical shards
and the two shards of a replica differ after init, trains until the loss goes down, and
checks the replicas again after training.

Run: torchrun --standalone --nproc-per-node 4 assets/patterns/hsdp_2d_mesh.py
Across 2 nodes of 2 GPUs: torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint HOST:29500 ...
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

DIM, BLOCKS, STEPS, BATCH = 32, 3, 25, 16


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



def init_weights(model: nn.Module, seed: int = 0) -> None:
    """After fully_shard + to_empty: __init__'s inits replayed on full tensors, one seed; each rank keeps its slice."""
    torch.manual_seed(seed)  # the same seed on every rank
    done: set[int] = set()  # tied weights keep their first owner's init

    def visit(m: nn.Module, held: list | None) -> None:  # children first, as __init__ builds them
        cls = type(m)  # not an init a CheckpointWrapper forwards from its block (run twice)
        init = next((getattr(m, n) for n in ("reset_parameters", "_reset_parameters") if hasattr(cls, n)), None)
        hf = hasattr(cls, "_init_weights")  # Hugging Face style: __init__ ends with apply(self._init_weights)
        clones = isinstance(m, (nn.TransformerEncoder, nn.TransformerDecoder))  # deep copies of one layer
        # A parent's init may write its children (nn.Transformer, HF, MHA): hold them full until it ran.
        hold = held is None and bool(init or hf or clones) and any(True for c in m.children() for _ in c.parameters())
        inner = [] if hold else held
        for child in [m.layers[0], *list(m.children())[1:]] if clones else m.children():
            visit(child, inner)
        for layer in m.layers[1:] if clones else ():  # copies of layer 0's values: no draws, as deepcopy
            for a, b in zip(m.layers[0].modules(), layer.modules()):
                for n, p in b.named_parameters(recurse=False):
                    b._parameters[n] = a._parameters[n].clone()
                    inner.append((b, n, p, b._parameters[n]))
        mine = [(m, n, p, torch.full(p.shape, torch.nan, dtype=p.dtype, device=p.device))
                for n, p in m.named_parameters(recurse=False)]
        for _, n, _, full in mine:
            m._parameters[n] = full  # init full plain tensors, then put the shards back
        if init:
            init()
        elif hf:
            m.apply(m._init_weights)
        if hasattr(m, "init_buffers"):
            m.init_buffers()  # tables computed in __init__ (RoPE) were on meta
        if held is not None:  # an ancestor's init is to come: stay full, tied as __init__ ties them
            first = {id(p): full for _, _, p, full in reversed(held)}
            for _, n, p, _ in mine:
                m._parameters[n] = first.get(id(p), m._parameters[n])
            held += mine
            return
        with torch.no_grad():
            for sub, n, p, full in (inner or []) + mine:
                sub._parameters[n] = p
                if full.isnan().any():
                    raise TypeError(f"{type(sub).__name__}.{n}: no init writes it; give {type(sub).__name__} "
                                    "a reset_parameters() (or load the weights: pretrained-into-meta)")
                if id(p) not in done:
                    done.add(id(p))  # this rank's slice, no communication
                    p.copy_(distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None))

    visit(model, None)


def check_replicas(model: nn.Module, mesh: DeviceMesh, when: str) -> None:
    """Every shard is bit-identical across "replicate"; the shards of one replica differ."""
    for name, param in model.named_parameters():
        local = param.to_local().contiguous()
        for dim in ("replicate", "shard"):
            group = mesh.get_group(dim)
            copies = [torch.empty_like(local) for _ in range(dist.get_world_size(group))]
            dist.all_gather(copies, local, group=group)
            equal = all(torch.equal(copies[0], c) for c in copies)
            if dim == "replicate":
                assert equal, f"{name}: replicas differ after {when}"
            elif "weight" in name:
                assert not equal, f"{name}: the shards of a replica repeat after {when}"


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


def main() -> None:
    device = init_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world % 2 == 0 and world >= 4, "run with 4 (or another even number >= 4) ranks"
    shard_size = 2
    mesh = init_device_mesh(device.type, (world // shard_size, shard_size), mesh_dim_names=("replicate", "shard"))

    with torch.device("meta"):
        model = nn.Sequential(*(Block(DIM) for _ in range(BLOCKS)), nn.Linear(DIM, DIM))
    for block in model[:-1]:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device=device)
    init_weights(model, seed=0)
    check_replicas(model, mesh, "init")
    for name, param in model.named_parameters():
        assert param.placements == (Replicate(), Shard(0)), (name, param.placements)

    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    teacher = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    data_gen = torch.Generator().manual_seed(100 + rank)  # every rank is its own data-parallel replica
    x = torch.randn(BATCH, DIM, generator=data_gen).to(device)
    y = x @ teacher.to(device)

    losses: list[float] = []
    for _ in range(STEPS):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # reduce-scatter over "shard", then all-reduce over "replicate"
        optim.step()
        optim.zero_grad()
        logged = loss.detach().clone()
        dist.all_reduce(logged, op=dist.ReduceOp.AVG)
        losses.append(logged.item())

    # Replicas must still agree exactly after training.
    check_replicas(model, mesh, f"{STEPS} steps")

    if rank == 0:
        print(f"mesh {tuple(mesh.shape)} {mesh.mesh_dim_names}; replicas identical after init and training, "
              "shards distinct", flush=True)
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {STEPS} steps", flush=True)
    assert losses[-1] < 0.5 * losses[0], f"loss did not go down: {losses[0]:.4f} -> {losses[-1]:.4f}"
    shutdown()


if __name__ == "__main__":
    main()

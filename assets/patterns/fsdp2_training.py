"""
name: fsdp2-training
min_torch: 2.8
title: FSDP2 training loop with meta-device init and init_weights
world_size: 2
requires:
tags: fsdp2, fully_shard, meta-device, to_empty, reset_parameters, init_weights, training, optimizer
mutant: in-place-on-shards: `m._parameters[n] = full  # init full` -> `pass  # init full`; `if full.isnan().any():` -> `if False:`; `p.copy_(distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None))` -> `pass`
mutant: per-rank-seed: `torch.manual_seed(seed)  #` -> `torch.manual_seed(seed + dist.get_rank())  #`

The canonical FSDP2 recipe: build the model on the meta device (no memory), call
`fully_shard` on every transformer block and then on the root, materialize only the
local shards with `to_empty(device=...)`, initialize them with SKILL.md's `init_weights`,
then train with an ordinary optimizer created *after* sharding (it sees DTensor shards).

Why each step:
- meta device: a model too big for one rank is never allocated in full anywhere.
- fully_shard per block, then root: each block becomes one all-gather/reduce-scatter
  unit, so only one block is unsharded at a time; the root call groups the leftovers
  (embedding, head) and drives prefetching.
- to_empty + init_weights: meta tensors have no storage; to_empty allocates the sharded
  storage (uninitialised) and init_weights fills it: every module's reset_parameters runs
  on full tensors drawn from one seed on every rank, and each rank keeps its slice. A plain
  `reset_parameters()` loop on the sharded DTensors would, on CPU, draw the same values on
  every rank (rank 1's shards equal rank 0's); seeding per rank would make HSDP and TP
  replicas differ (SKILL.md pitfall 3). Every module that owns parameters must define
  reset_parameters (nn.Linear/nn.LayerNorm do); init_weights raises otherwise.
  Checked: every parameter equals the plain model's init with the same seed, and the two
  ranks' shards differ.
- optimizer after fully_shard: it must hold the sharded DTensor parameters, not the
  original ones that fully_shard replaced.

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/fsdp2_training.py
Works on CPU (gloo) and GPU (nccl, one rank per GPU); DIST_BACKEND=gloo forces CPU.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

DIM, BLOCKS, STEPS, BATCH = 32, 4, 30, 16


def init_distributed() -> torch.device:
    """nccl + cuda:LOCAL_RANK when CUDA is available, else gloo + cpu (DIST_BACKEND overrides)."""
    backend = os.environ.get("DIST_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        # device_id binds the process group to this GPU eagerly (no guessing, earlier errors).
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


class Block(nn.Module):
    """A pre-norm MLP block: the unit FSDP2 shards and all-gathers as one."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Model(nn.Module):
    def __init__(self, dim: int, blocks: int) -> None:
        super().__init__()
        self.inp = nn.Linear(dim, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(blocks))
        self.head = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()

    # 1. Build on the meta device: shapes and dtypes only, no storage.
    with torch.device("meta"):
        model = Model(DIM, BLOCKS)

    # 2. Shard bottom-up: every block, then the root (which picks up inp and head).
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    assert isinstance(model, FSDPModule)  # fully_shard swaps the class in place
    assert isinstance(model.inp.weight, DTensor)  # parameters are now DTensor shards

    # 3. Allocate the local shards (uninitialised), then initialize them: init_weights gives
    #    every parameter the value a plain `torch.manual_seed(0); Model(...)` gives.
    model.to_empty(device=device)
    init_weights(model, seed=0)
    torch.manual_seed(0)
    plain = Model(DIM, BLOCKS).to(device)
    for name, param in model.named_parameters():
        assert torch.equal(param.full_tensor(), plain.get_parameter(name)), f"{name}: not the plain init"
    local = model.head.weight.to_local()
    shards = [torch.empty_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(shards, local.contiguous())
    assert not torch.equal(shards[0], shards[1]), "rank 1's shard equals rank 0's"

    # 4. Optimizer after sharding, over the DTensor parameters.
    optim = torch.optim.AdamW(model.parameters(), lr=3e-3)

    # A fixed teacher (same on every rank) and per-rank data: each rank is one data-parallel replica.
    teacher = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    data_gen = torch.Generator().manual_seed(100 + rank)

    losses: list[float] = []
    for step in range(STEPS):
        x = torch.randn(BATCH, DIM, generator=data_gen).to(device)
        y = torch.tanh(x @ teacher.to(device))
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # reduce-scatters gradients into each rank's shard
        optim.step()
        optim.zero_grad()
        # Average the loss across ranks for logging (the gradient is already averaged by FSDP).
        logged = loss.detach().clone()
        dist.all_reduce(logged, op=dist.ReduceOp.AVG)
        losses.append(logged.item())

    if rank == 0:
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {STEPS} steps", flush=True)
    assert losses[-1] < 0.5 * losses[0], f"loss did not go down: {losses[0]:.4f} -> {losses[-1]:.4f}"
    shutdown()


if __name__ == "__main__":
    main()

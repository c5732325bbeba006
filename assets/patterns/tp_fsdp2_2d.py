"""
name: tp-fsdp2-2d
min_torch: 2.9
title: Tensor parallel + FSDP2 on a 2-D mesh, with gradient clipping across the mixed meshes
world_size: 4
requires: stated-ranks
tags: fsdp2, fully_shard, tensor parallel, parallelize_module, ColwiseParallel, RowwiseParallel, DeviceMesh, init_device_mesh, 2-D mesh, clip_grad_norm_, get_total_norm, clip_grads_with_norm_, meta-device, init_weights
mutant: per-rank-seed: `torch.manual_seed(seed)  #` -> `torch.manual_seed(seed + dist.get_rank())  #`
mutant: in-place-on-shards: `m._parameters[n] = full  # init full` -> `pass  # init full`; `if full.isnan().any():` -> `if False:`; `p.copy_(distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None))` -> `pass`

2-D parallelism: a ("dp", "tp") mesh of 2 x 2. Each block's MLP is tensor-parallel
across "tp" (`ColwiseParallel` for the up projection, `RowwiseParallel` for the down
projection: one all-reduce per block), then `fully_shard(..., mesh=mesh["dp"])` shards
everything across "dp". Order matters: `parallelize_module` first, then `fully_shard`.
The model is built on the meta device and initialised after sharding by SKILL.md's
`init_weights` (one seed on every rank, each module's init on full tensors, this rank's
slice kept): RowwiseParallel's bias is Replicate on "tp", so a per-rank seed would give the
two tp ranks different biases for good.

Gradient clipping: the TP linears' parameters end up on the 2-D mesh, the LayerNorms'
(not tensor-parallel) on the 1-D dp mesh, and `torch.nn.utils.clip_grad_norm_` raises
"All operands in aten.stack.default must have the same mesh". `clip_grad_norm_by_mesh`
below groups gradients by mesh, takes `get_total_norm` of each group (`full_tensor()` of
the DTensor result), combines them into the global norm, and `clip_grads_with_norm_`
clips each group with it.

Checked: every rank's sharded model starts from exactly the plain replica's init; with the
same global batch (the two "dp" ranks see different halves, the two "tp" ranks of a pair
the same half) the 2-D model's losses equal those of one plain replica trained on the
whole batch with plain clip_grad_norm_, step by step.

Run: torchrun --standalone --nproc-per-node 4 assets/patterns/tp_fsdp2_2d.py
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

DIM, BLOCKS, STEPS, BATCH, MAX_NORM = 32, 2, 8, 8, 0.5


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
    """Destroy the process group; on gloo leave with os._exit (SKILL.md pitfall 18)."""
    gloo = dist.get_backend() == "gloo"
    dist.destroy_process_group()
    if gloo:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.norm = nn.LayerNorm(DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


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


def clip_grad_norm_by_mesh(params: list[nn.Parameter], max_norm: float) -> torch.Tensor:
    """Global gradient norm over parameters on different meshes; clips in place and returns it."""
    groups: dict[object, list[nn.Parameter]] = {}
    for p in params:
        if p.grad is not None:
            groups.setdefault(p.grad.device_mesh if isinstance(p.grad, DTensor) else None, []).append(p)
    norms = []
    for group in groups.values():
        norm = torch.nn.utils.get_total_norm([p.grad for p in group])
        norms.append(norm.full_tensor() if isinstance(norm, DTensor) else norm)
    total = torch.linalg.vector_norm(torch.stack(norms))
    for group in groups.values():
        torch.nn.utils.clip_grads_with_norm_(group, max_norm, total)
    return total


def main() -> None:
    device = init_distributed()
    mesh = init_device_mesh(device.type, (2, 2), mesh_dim_names=("dp", "tp"))
    dp_rank = mesh["dp"].get_local_rank()
    torch.manual_seed(0)
    reference = Model().to(device)  # one plain replica, for the equality check
    with torch.device("meta"):
        model = Model()  # no memory until the shards are allocated

    # 1. Tensor parallel inside each block, across "tp".
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
    # 2. Then FSDP2 across "dp": per block, then the root.
    for block in model.blocks:
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    model.to_empty(device=device)
    init_weights(model, seed=0)  # the reference's values, on every rank: replicas equal
    for name, param in model.named_parameters():
        assert torch.equal(param.full_tensor(), reference.get_parameter(name)), f"{name}: not the reference's init"
    meshes = {p.device_mesh.mesh_dim_names for p in model.parameters()}
    assert meshes == {("dp", "tp"), ("dp",)}, meshes  # mixed: plain clip_grad_norm_ would raise

    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_optim = torch.optim.SGD(reference.parameters(), lr=0.1)
    teacher = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    gen = torch.Generator().manual_seed(100)  # the same global batch on every rank
    losses = []
    for _ in range(STEPS):
        x = torch.randn(2 * BATCH, DIM, generator=gen)
        y = torch.tanh(x @ teacher)
        x, y = x.to(device), y.to(device)
        mine = slice(dp_rank * BATCH, (dp_rank + 1) * BATCH)  # this dp rank's half
        loss = nn.functional.mse_loss(model(x[mine]), y[mine])
        loss.backward()
        norm = clip_grad_norm_by_mesh(list(model.parameters()), MAX_NORM)
        optim.step()
        optim.zero_grad()

        ref_loss = nn.functional.mse_loss(reference(x), y)
        ref_loss.backward()
        ref_norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), MAX_NORM)
        ref_optim.step()
        ref_optim.zero_grad()

        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss, op=dist.ReduceOp.AVG)  # tp ranks repeat their pair's loss: AVG is right
        torch.testing.assert_close(global_loss, ref_loss.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(norm, ref_norm, rtol=1e-5, atol=1e-6)
        losses.append(global_loss.item())
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.full_tensor(), q, rtol=1e-4, atol=1e-6)
    assert losses[-1] < losses[0]
    if dist.get_rank() == 0:
        print(f"TP x FSDP2 on a 2 x 2 mesh: losses and clipped grad norms equal a plain replica's at all {STEPS} "
              f"steps; loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    shutdown()


if __name__ == "__main__":
    main()

"""
name: compile-per-block
min_torch: 2.8
title: torch.compile per block with FSDP2 fully_shard, losses equal to eager
world_size: 2
requires:
tags: fsdp2, fully_shard, torch.compile, compile, aot_eager, inductor, performance
mutant: not-compiled: `block.compile(backend=counting_backend)` -> `pass`

Compile each transformer block on its own (`block.compile()`, in place) after
`fully_shard(block)`: FSDP2's hooks stay outside the compiled region (graph breaks at
block boundaries are where FSDP all-gathers anyway), every block has the same structure
so the graph compiles once and is reused, and compile time stays small.

The script trains the same model eagerly and compiled, with the same data, and asserts
equal losses at every step (to float tolerance: a compiler may reorder float ops). It
also counts the graphs the compiler backend is handed (a wrapper around the backend):
at least one, so the blocks really are compiled, and at most 2 for BLOCKS x STEPS block
calls on torch 2.13, so the blocks reuse compiled graphs rather than compiling each call.
`nn.Module.compile()` compiles the module in place (torch/nn/modules/module.py:3044 in
torch 2.13): its parameter names stay as they were, which the script asserts.

Backend: `aot_eager` by default (AOTAutograd tracing without code generation), which
runs on any CPU without a C++ toolchain and keeps this check fast. On GPUs use the
default `inductor` (set COMPILE_BACKEND=inductor to try it here; on CPU inductor needs a
C++ compiler, `cc --version`).

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/compile_per_block.py
"""

from __future__ import annotations

import copy
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

DIM, BLOCKS, STEPS = 32, 3, 8
BACKEND = os.environ.get("COMPILE_BACKEND", "aot_eager")


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
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


compiled_graphs: list[int] = []  # node count of each graph the backend compiles


def counting_backend(graph_module: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
    """The chosen backend, counting what it compiles (torch._dynamo.lookup_backend resolves the name)."""
    compiled_graphs.append(len(graph_module.graph.nodes))
    return torch._dynamo.lookup_backend(BACKEND)(graph_module, example_inputs)


def shard(model: Model, compile_blocks: bool) -> Model:
    for block in model.blocks:
        fully_shard(block)
        if compile_blocks:
            block.compile(backend=counting_backend)  # in place: names and the FSDP module stay the same
    fully_shard(model)
    return model


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    torch.manual_seed(0)
    base = Model().to(device)
    eager, compiled = shard(copy.deepcopy(base), False), shard(copy.deepcopy(base), True)
    assert [n for n, _ in eager.named_parameters()] == [n for n, _ in compiled.named_parameters()]
    optims = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (eager, compiled)]
    teacher = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    gen = torch.Generator().manual_seed(100 + rank)
    pairs: list[tuple[float, float]] = []
    for _ in range(STEPS):
        x = torch.randn(16, DIM, generator=gen)
        x, y = x.to(device), torch.tanh(x @ teacher).to(device)
        step = []
        for model, optim in zip((eager, compiled), optims):
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optim.step()
            optim.zero_grad()
            logged = loss.detach().clone()
            dist.all_reduce(logged, op=dist.ReduceOp.AVG)  # the mean over ranks: the data-parallel loss
            step.append(logged.item())
        pairs.append((step[0], step[1]))
    for eager_loss, compiled_loss in pairs:
        assert abs(eager_loss - compiled_loss) <= 1e-5 * max(1.0, abs(eager_loss)), pairs
    assert pairs[-1][0] < pairs[0][0]
    assert 1 <= len(compiled_graphs) <= 2, f"{len(compiled_graphs)} graphs compiled for {BLOCKS * STEPS} block calls"
    if rank == 0:
        print(f"torch.compile(backend={BACKEND!r}) per block: losses equal to eager at all {STEPS} steps; "
              f"loss {pairs[0][1]:.4f} -> {pairs[-1][1]:.4f}; {len(compiled_graphs)} graphs compiled for "
              f"{BLOCKS * STEPS} block calls", flush=True)
    shutdown()


if __name__ == "__main__":
    main()

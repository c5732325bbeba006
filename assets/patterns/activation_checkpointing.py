"""
name: activation-checkpointing
min_torch: 2.7
title: Activation checkpointing with FSDP2 (checkpoint_wrapper or torch.utils.checkpoint), gradients equal to without it
world_size: 2
requires:
tags: fsdp2, fully_shard, activation checkpointing, checkpoint_wrapper, apply_activation_checkpointing, torch.utils.checkpoint, recompute, memory, state_dict names
mutant: wrapped-too-small: `apply_activation_checkpointing(wrapped, check_fn=lambda m: isinstance(m, Block))` -> `apply_activation_checkpointing(wrapped, check_fn=lambda m: isinstance(m, nn.LayerNorm))`
mutant: checkpoint-call-dropped: `x = checkpoint(block, x, use_reentrant=False) if self.checkpoint_in_forward else block(x)` -> `x = block(x)`

Activation checkpointing (AC) drops a block's activations after forward and recomputes
them in backward: less activation memory for one more forward per block. This pattern
applies it before `fully_shard`, per block, so the wrapper is the FSDP unit (the usual
order; not a requirement this pattern tests). Two ways, both asserted here to give the
same gradients as no AC at all:

1. `apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))`
   wraps each block in a `CheckpointWrapper`. Parameter names gain
   `_checkpoint_wrapped_module.` (`named_parameters()`, optimizer param names), but
   `state_dict()` and `get_model_state_dict()` strip it: checkpoints keep the plain
   names and load into a model without AC. Shard the wrapper (`fully_shard(wrapped)`).
2. `torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)` inside the
   parent's forward: no wrapper, names unchanged.

`use_reentrant=False` is what checkpoint_wrapper uses by default
(`CheckpointImpl.NO_REENTRANT`) and what torch/utils/checkpoint.py's docstring recommends
("It is recommended that you use ``use_reentrant=False``"); this pattern does not test the
reentrant variant.

That AC happens is observed: each block counts its forward calls, and with AC every
block's forward runs twice per step (once in forward, once recomputed in backward),
without AC once. `apply_activation_checkpointing` and `checkpoint_wrapper` live in
torch/distributed/algorithms/_checkpoint/checkpoint_wrapper.py in torch 2.15 (a private
module path, public API for years; its import path may move).

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/activation_checkpointing.py
"""

from __future__ import annotations

import copy
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing,
)
from torch.distributed.checkpoint.state_dict import get_model_state_dict
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint

DIM, BLOCKS, STEPS = 32, 3, 5


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
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1  # a recompute in backward calls forward again
        return x + self.mlp(self.norm(x))


class Model(nn.Module):
    def __init__(self, checkpoint_in_forward: bool = False) -> None:
        super().__init__()
        self.checkpoint_in_forward = checkpoint_in_forward
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            # Way 2: checkpoint the call; the module tree (and every name) stays as it is.
            x = checkpoint(block, x, use_reentrant=False) if self.checkpoint_in_forward else block(x)
        return self.head(x)


def shard(model: Model) -> Model:
    for block in model.blocks:  # after AC wrapping: the wrapper is the FSDP unit
        fully_shard(block)
    fully_shard(model)
    return model


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    torch.manual_seed(0)
    base = Model().to(device)
    plain_names = [name for name, _ in base.named_parameters()]

    plain = shard(copy.deepcopy(base))
    wrapped = copy.deepcopy(base)
    apply_activation_checkpointing(wrapped, check_fn=lambda m: isinstance(m, Block))  # way 1, before fully_shard
    wrapped = shard(wrapped)
    in_forward = copy.deepcopy(base)
    in_forward.checkpoint_in_forward = True
    in_forward = shard(in_forward)

    # Names: the wrapper shows in named_parameters, not in state dicts.
    wrapped_names = [name for name, _ in wrapped.named_parameters()]
    assert wrapped_names[0] == "blocks.0._checkpoint_wrapped_module.norm.weight", wrapped_names[0]
    assert list(wrapped.state_dict()) == list(plain.state_dict()) == list(get_model_state_dict(wrapped))
    assert [name for name, _ in in_forward.named_parameters()] == plain_names

    optims = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (plain, wrapped, in_forward)]
    gen = torch.Generator().manual_seed(100 + rank)
    losses: list[float] = []
    for _ in range(STEPS):
        x = torch.randn(8, DIM, generator=gen).to(device)
        step_losses = []
        for model in (plain, wrapped, in_forward):
            blocks = [m for m in model.modules() if isinstance(m, Block)]
            for block in blocks:
                block.calls = 0
            loss = model(x).square().mean()
            loss.backward()
            step_losses.append(loss.item())
            # Forward once per block, plus once more in backward where activations are recomputed.
            expected = 1 if model is plain else 2
            assert [b.calls for b in blocks] == [expected] * BLOCKS, (type(model).__name__, [b.calls for b in blocks])
        # Gradients (and so the whole training run) equal with and without AC.
        for ac_model in (wrapped, in_forward):
            for a, b in zip(plain.parameters(), ac_model.parameters()):
                torch.testing.assert_close(a.grad.full_tensor(), b.grad.full_tensor(), rtol=1e-6, atol=1e-7)
        for optim in optims:
            optim.step()
            optim.zero_grad()
        assert step_losses[0] == step_losses[1] == step_losses[2], step_losses
        losses.append(step_losses[0])
    if rank == 0:
        print(f"AC gradients equal to no AC at every one of {STEPS} steps (checkpoint_wrapper and "
              f"torch.utils.checkpoint); loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    shutdown()


if __name__ == "__main__":
    main()

"""
name: frozen-params-lora
min_torch: 2.8
title: Frozen parameters with FSDP2 (LoRA-style fine-tuning): train adapters, keep the base weights fixed
world_size: 2
requires:
tags: fsdp2, fully_shard, lora, frozen parameters, requires_grad, fine-tuning, adapters, peft, get_model_state_dict
mutant: base-not-frozen: `model.requires_grad_(False)` -> `model.requires_grad_(True)`
mutant: b-not-zero: `nn.Parameter(torch.zeros(base.out_features, r))` -> `nn.Parameter(torch.randn(base.out_features, r))`

LoRA: each frozen base `nn.Linear` gets a trainable low-rank update `B @ A` (B starts at
zero, so training starts from the base model). With FSDP2, frozen and trainable
parameters may share one `fully_shard` unit: freeze (`requires_grad_(False)`) *before*
sharding, shard as usual, and give the optimizer only the trainable parameters. Frozen
parameters get no gradient (`.grad is None`) and no reduce-scatter; they are still
all-gathered for compute.

Asserted: before training the model's outputs equal the base model's (B = 0); base weights
(every tensor but the LoRA ones) get no gradient and are bit-identical after training,
adapters changed, loss down, and
the adapters-only state dict (filter `get_model_state_dict` by the trainable names)
holds exactly the LoRA tensors, full or sharded.

Frozen and trainable parameters in one `fully_shard` unit, and `get_model_state_dict` /
`StateDictOptions(full_state_dict=True, cpu_offload=True)`: as in torch 2.13 (checked here).

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/frozen_params_lora.py
"""

from __future__ import annotations

import copy
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
)
from torch.distributed.fsdp import fully_shard

DIM, RANK_R, BLOCKS, STEPS = 32, 4, 2, 30


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


class LoRALinear(nn.Module):
    """A frozen Linear plus a trainable rank-r update scaled by alpha / r."""

    def __init__(self, base: nn.Linear, r: int, alpha: float = 8.0) -> None:
        super().__init__()
        self.base = base.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.randn(r, base.in_features) / r)
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, r))  # zero: starts as the base model
        self.scale = alpha / r

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.lora_a.t() @ self.lora_b.t()) * self.scale


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.proj(torch.tanh(self.norm(x)))


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(*(Block() for _ in range(BLOCKS))).to(device)  # the "pretrained" base
    base_model = copy.deepcopy(model)  # a plain copy, to compare outputs with before training
    model.requires_grad_(False)
    for block in model:
        block.proj = LoRALinear(block.proj, RANK_R).to(device)  # adapters are trainable
    # Shard after freezing; frozen and trainable parameters share each block's unit.
    for block in model:
        fully_shard(block)
    fully_shard(model)

    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    # The base: every tensor but the adapters, whatever requires_grad says.
    frozen_before = {n: p.full_tensor().clone() for n, p in model.named_parameters() if "lora_" not in n}
    probe = torch.randn(4, DIM, generator=torch.Generator().manual_seed(7)).to(device)
    with torch.no_grad():
        torch.testing.assert_close(model(probe), base_model(probe), msg="the adapters change the untrained model")
    optim = torch.optim.AdamW((p for p in model.parameters() if p.requires_grad), lr=1e-2)

    target = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    gen = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(16, DIM, generator=gen).to(device)
        loss = nn.functional.mse_loss(model(x), x + torch.tanh(x @ target.to(device)))
        loss.backward()
        assert all(p.grad is None for n, p in model.named_parameters() if n in frozen_before), "a base weight got a grad"
        optim.step()
        optim.zero_grad()
        logged = loss.detach().clone()
        dist.all_reduce(logged, op=dist.ReduceOp.AVG)
        losses.append(logged.item())

    for name, p in model.named_parameters():
        if name in frozen_before:
            assert torch.equal(p.full_tensor(), frozen_before[name]), f"frozen {name} changed"
        else:
            assert p.full_tensor().abs().sum() > 0, name
    # Checked after training, so a base left trainable shows above as a changed "frozen" weight first.
    assert trainable == {f"{i}.proj.lora_{ab}" for i in range(BLOCKS) for ab in "ab"}, trainable
    # Save only the adapters: filter the (collective) state dict by the trainable names.
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    adapters = {k: v for k, v in full.items() if k in trainable}
    if rank == 0:
        assert set(adapters) == trainable and adapters["0.proj.lora_b"].shape == (DIM, RANK_R)
        print(f"{len(frozen_before)} frozen tensors unchanged, {len(trainable)} LoRA tensors trained; "
              f"adapter state dict {sorted(adapters)[:2]}...; loss {losses[0]:.4f} -> {losses[-1]:.4f}", flush=True)
    assert losses[-1] < 0.8 * losses[0], losses
    shutdown()


if __name__ == "__main__":
    main()

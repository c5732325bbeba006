"""
name: pretrained-into-meta
min_torch: 2.7
title: Load pretrained full weights into a meta-initialised FSDP2 model (tied embeddings, broadcast from rank 0)
world_size: 2
requires:
tags: fsdp2, fully_shard, pretrained, set_model_state_dict, broadcast_from_rank0, full_state_dict, meta-device, tied embeddings, weight tying, fine-tuning, reshard, no_grad
mutant: no-reshard: `model.reshard()  # the root` -> `pass  # the root`
mutant: embed-own-unit: `    fully_shard(model)  # the root unit: embed + head + norm` -> `    fully_shard(model.embed), fully_shard(model)`

Fine-tuning a checkpoint without ever holding the full model on more than one rank:
every rank builds the model on the meta device and shards it; only rank 0 reads the
pretrained file (a plain `torch.save` state dict); `set_model_state_dict(...,
StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))` scatters each tensor
from rank 0 into the other ranks' shards. The script asserts the sharded model gives the
same outputs as the plain pretrained model, and that tied weights stay one parameter.

Why each step:
- tie the weights (`head.weight = embed.weight`) *before* fully_shard, and keep both
  modules in the same FSDP unit (here the root): FSDP2 then shards the one shared
  parameter once; tying after sharding would tie a DTensor to a module FSDP never sees.
- `to_empty` first, for the buffers: without it set_model_state_dict still fills the parameters
  and the persistent buffers, but a non-persistent buffer is in no state dict and stays on meta
  (assets/checks/load_into_meta_without_to_empty.py; its rows in references/verification-releases.md).
- broadcast_from_rank0: the other ranks pass an empty dict; no rank but 0 reads the
  file, and no rank but 0 holds the full weights (rank 0 holds them once, on CPU).
- non-persistent buffers are not in a state dict: recompute them after loading (see
  the core recipe's `init_weights` / `init_buffers`).
- `model.reshard()` after the no_grad check forward: the root keeps its parameters
  unsharded after forward (reshard_after_forward's default for the root), and with no
  backward to follow they stay plain tensors. An optimizer built then holds those and
  never updates embed / head / norm (measured: they stayed at the loaded values while the
  blocks trained), and `full_tensor()` on them raises AttributeError (SKILL.md pitfalls).
  Building the optimizer before any forward avoids it too.

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/pretrained_into_meta.py
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    set_model_state_dict,
)
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

VOCAB, DIM, BLOCKS = 64, 32, 2


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


class TiedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.embed.weight  # tied input/output embeddings

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    path = [os.path.join(tempfile.mkdtemp(prefix="pretrained-"), "model.pt") if rank == 0 else ""]
    dist.broadcast_object_list(path, src=0)

    # The "pretrained" checkpoint: a plain model trained elsewhere, saved with torch.save.
    torch.manual_seed(0)
    pretrained = TiedLM()
    if rank == 0:
        torch.save(pretrained.state_dict(), path[0])

    # 1. Every rank: meta model, tied, sharded per block then root (embed + head share the root unit).
    with torch.device("meta"):
        model = TiedLM()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)  # the root unit: embed + head + norm
    model.to_empty(device=device)
    assert model.head.weight is model.embed.weight, "the tie survives fully_shard and to_empty"

    # 2. Only rank 0 reads the file; the others pass {} and receive their shards.
    full = torch.load(path[0], map_location="cpu", mmap=True, weights_only=True) if rank == 0 else {}
    set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))

    # 3. Same outputs as the plain pretrained model, on every rank; still one tied parameter.
    tokens = torch.randint(0, VOCAB, (4, 8), generator=torch.Generator().manual_seed(rank))
    with torch.no_grad():
        expected = pretrained(tokens)
        actual = model(tokens.to(device)).cpu()
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    assert model.head.weight is model.embed.weight
    model.reshard()  # the root stayed unsharded after the no_grad forward: shard it again
    assert all(isinstance(p, DTensor) for p in model.parameters()), "the root's parameters are still unsharded"
    loaded = {name: p.full_tensor() for name, p in model.named_parameters()}
    n_params = sum(1 for _ in model.parameters())
    assert n_params == sum(1 for _ in pretrained.parameters())  # the shared weight counted once

    # 4. Fine-tune a few steps: the tie holds (one gradient, one update).
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(5):
        logits = model(tokens.to(device))
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens.to(device).reshape(-1))
        loss.backward()
        optim.step()
        optim.zero_grad()
        losses.append(loss.item())
    assert model.head.weight is model.embed.weight and losses[-1] < losses[0]
    model.reshard()
    unchanged = [name for name, p in model.named_parameters() if torch.equal(p.full_tensor(), loaded[name])]
    assert not unchanged, f"the optimizer never updated {unchanged}"
    if rank == 0:
        print(f"loaded {len(full)} tensors from rank 0 into meta-initialised shards; outputs equal the pretrained "
              f"model; tied weight shared ({n_params} parameters); fine-tune loss {losses[0]:.4f} -> {losses[-1]:.4f}",
              flush=True)
        os.remove(path[0])
    shutdown()


if __name__ == "__main__":
    main()

"""
name: no-grad-root-unsharded
claim: After a forward under torch.no_grad() the root module's parameters stay unsharded plain tensors (reshard_after_forward's default for the root): full_tensor() raises AttributeError and an optimizer built then never updates them; model.reshard() after it, or an optimizer built before it, trains every parameter.
backs: pitfalls
world_size: 2
mutant: root-reshards: `fully_shard(model)  # root` -> `fully_shard(model, reshard_after_forward=True)  # root`
mutant: no-reshard-in-fix: `model.reshard()  # the fix` -> `pass  # the fix`
mutant: optimizer-after-forward: `train(model, early, x)` -> `train(model, late, x)`

FSDP2's root keeps its parameters unsharded after forward by default
(`reshard_after_forward=None`: the backward all-gathers them again right away). A check
forward under `no_grad` (no backward follows) leaves them so: the root's own parameters
(here inp and head) are then the unsharded plain nn.Parameters, not DTensors.
- `model.head.weight.full_tensor()` raises AttributeError.
- An optimizer built now holds those plain tensors: 3 SGD steps later (the backward
  reshards the root, gradients land on the sharded DTensors) inp and head are exactly
  their initial values while the blocks trained.
- The fixes: `model.reshard()` after the no_grad forward (every parameter is a DTensor
  again and all of them train), or an optimizer built before the forward (it holds the
  DTensors: all of them train).
The `root-reshards` mutant shards the root with reshard_after_forward=True: nothing stays
unsharded, so the failure the check expects does not happen.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor


def build() -> nn.Module:
    torch.manual_seed(0)
    model = Stack()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)  # root
    return model


def train(model: nn.Module, optim: torch.optim.Optimizer, x: torch.Tensor) -> None:
    for _ in range(3):
        model(x).square().mean().backward()
        optim.step()
        optim.zero_grad()


device = init()
x = torch.randn(4, 16, generator=torch.Generator().manual_seed(dist.get_rank())).to(device)

model = build()
initial = {n: p.full_tensor() for n, p in model.named_parameters()}
with torch.no_grad():
    model(x)  # a check forward, no backward
plain = sorted(n for n, p in model.named_parameters() if not isinstance(p, DTensor))
assert plain == ["head.bias", "head.weight", "inp.bias", "inp.weight"], plain
try:
    model.head.weight.full_tensor()
    raise AssertionError("full_tensor() worked on the unsharded root")
except AttributeError as exc:
    assert "full_tensor" in str(exc), exc
optim = torch.optim.SGD(model.parameters(), lr=0.1)  # built while the root is unsharded
train(model, optim, x)
model.reshard()
unchanged = sorted(n for n, p in model.named_parameters() if torch.equal(p.full_tensor(), initial[n]))
assert unchanged == plain, f"unchanged after training: {unchanged}"
say(f"after a no_grad forward: {plain} are plain tensors, full_tensor() raises AttributeError; "
    f"an optimizer built then left them at their initial values over 3 steps")

model = build()
with torch.no_grad():
    model(x)
model.reshard()  # the fix
assert all(isinstance(p, DTensor) for p in model.parameters())
optim = torch.optim.SGD(model.parameters(), lr=0.1)
train(model, optim, x)
model.reshard()
unchanged = [n for n, p in model.named_parameters() if torch.equal(p.full_tensor(), initial[n])]
assert not unchanged, f"with model.reshard() first, still unchanged: {unchanged}"
say("with model.reshard() after the no_grad forward: every parameter a DTensor, every one trained")

model = build()
early = torch.optim.SGD(model.parameters(), lr=0.1)  # built first, while every parameter is a DTensor
with torch.no_grad():
    model(x)
late = torch.optim.SGD(model.parameters(), lr=0.1)  # built after the forward (the mutant trains with it)
train(model, early, x)
model.reshard()
unchanged = [n for n, p in model.named_parameters() if torch.equal(p.full_tensor(), initial[n])]
assert not unchanged, f"with the optimizer built first, still unchanged: {unchanged}"
say("with the optimizer built before the no_grad forward: every parameter trained")
shutdown()

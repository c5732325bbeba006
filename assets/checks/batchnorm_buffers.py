"""
name: batchnorm-buffers
claim: FSDP2 does not synchronise BatchNorm's running statistics (per-rank buffers): eval outputs differ per rank until they are all-reduced; SyncBatchNorm raises on CPU tensors; a bf16 MixedPrecisionPolicy over BatchNorm raises a dtype error unless BatchNorm is sharded first with float32 params and a bf16 output_dtype.
backs: pitfalls
world_size: 2
mutant: same-data: `manual_seed(dist.get_rank())` -> `manual_seed(0)`; ` + dist.get_rank()` -> ``
mutant: no-buffer-sync: `dist.all_reduce(buffer)  # summed` -> `pass  # summed`
mutant: bn-in-bf16: `MixedPrecisionPolicy(param_dtype=torch.float32, output_dtype` -> `MixedPrecisionPolicy(param_dtype=torch.bfloat16, output_dtype` => RuntimeError

On 2 gloo ranks, each with its own data (shifted by its rank):
- `fully_shard` shards BatchNorm's weight and bias but leaves `running_mean`/`running_var`
  plain per-rank buffers: after 3 training steps they differ between ranks, and so do the
  eval-mode outputs for the same input. `dist.all_reduce(buffer)` then `/= world_size` on every rank
  (before eval or saving) makes the eval outputs equal.
- `nn.SyncBatchNorm` on CPU tensors raises ValueError ("expected input tensor to be on
  GPU ...").
- `fully_shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))` over a
  BatchNorm1d raises RuntimeError "expected scalar type BFloat16 but found Float" in the
  forward (the fp32 running stats meet bf16 input and params). Sharding the BatchNorm first
  with its own policy, float32 params and `output_dtype=torch.bfloat16`, trains: its params
  stay fp32, its output is bf16 for the next layer.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 4))


def everyones(t: torch.Tensor) -> list[torch.Tensor]:
    rows = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(rows, t.contiguous())
    return rows


device = init()
gen = torch.Generator().manual_seed(dist.get_rank())
batches = [(torch.randn(16, 8, generator=gen) + dist.get_rank()).to(device) for _ in range(3)]
probe = torch.ones(2, 8, device=device)

model = net().to(device)
fully_shard(model)
optim = torch.optim.SGD(model.parameters(), lr=0.1)
for x in batches:
    model(x).square().mean().backward()
    optim.step()
    optim.zero_grad()
bn = model[1]
assert not isinstance(bn.running_mean, type(bn.weight)), "the buffers are plain tensors, not DTensors"
means = everyones(bn.running_mean)
assert not torch.equal(means[0], means[1]), "running_mean equal across ranks"
model.eval()
with torch.no_grad():
    outs = everyones(model(probe))
assert not torch.equal(outs[0], outs[1]), "eval outputs equal across ranks before syncing the buffers"
for buffer in (bn.running_mean, bn.running_var):
    dist.all_reduce(buffer)  # summed: ReduceOp.AVG on gloo needs torch 2.8 (2.7.1 raised, the release matrix)
    buffer /= dist.get_world_size()
with torch.no_grad():
    outs = everyones(model(probe))
assert torch.equal(outs[0], outs[1]), "eval outputs differ after averaging the buffers"
say("BatchNorm running stats differ per rank after 3 steps; eval outputs differ until the buffers are all-reduced")

try:
    nn.SyncBatchNorm(8)(batches[0])
    raise AssertionError("SyncBatchNorm ran on CPU")
except ValueError as exc:
    assert "expected input tensor to be on GPU" in str(exc), exc

bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
model = net().to(device)
fully_shard(model, mp_policy=bf16)
try:
    model(batches[0])
    raise AssertionError("bf16 BatchNorm ran")
except RuntimeError as exc:
    assert "expected scalar type BFloat16 but found Float" in str(exc), exc
model = net().to(device)
fully_shard(model[1], mp_policy=MixedPrecisionPolicy(param_dtype=torch.float32, output_dtype=torch.bfloat16))
fully_shard(model, mp_policy=bf16)
out = model(batches[0])
out.float().square().mean().backward()
assert out.dtype == torch.bfloat16 and model[1].weight.grad is not None
say("SyncBatchNorm raises on CPU; bf16 MixedPrecisionPolicy over BatchNorm raises 'expected scalar type BFloat16 "
    "but found Float'; BatchNorm sharded first with fp32 params + bf16 output_dtype trains")
shutdown()

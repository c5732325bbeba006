"""
name: mixed-precision-policy
claim: model.half() leaves only fp16 weights, so an update below fp16's resolution (SGD lr 1e-3 on a 1e-4 gradient) is lost on every weight of magnitude 0.01 to 1, while the fp32 shards MixedPrecisionPolicy keeps take it; MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) computes in bf16, reduce-scatters the gradients in fp32, and keeps the sharded parameters and their gradients fp32, without autocast.
backs: pitfalls
world_size: 2
mutant: bf16-reduction: `reduce_dtype=torch.float32)` -> `reduce_dtype=torch.bfloat16)`
mutant: no-half: `halved = Stack().half()` -> `halved = Stack()`
mutant: fp32-compute: `param_dtype=torch.bfloat16,` -> `param_dtype=torch.float32,`

Inside forward the all-gathered weights are bf16 (so is the matmul output). The gradient
reduction is observed where FSDP2 issues it: `dist.reduce_scatter_single` (`reduce_scatter_tensor` before 2.13; called by
`torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`, wrapped here) receives fp32
inputs on every module, so the sum over ranks is not rounded to bf16. The stored shards, the
gradients and the optimizer's view stay fp32. `model.half()` instead converts the only copy
of the weights to fp16: an SGD step of 1e-3 * 1e-4 = 1e-7 is below half a unit in the last place
of fp16 values of magnitude 0.01 to 1 (8e-6 to 1e-3 apart), so those weights do not move; the same step
on the policy's fp32 shards moves them.
"""

import torch
import torch.distributed as dist
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

init()
halved = Stack().half()
before = [p.detach().clone() for p in halved.parameters()]
for p in halved.parameters():
    p.grad = torch.full_like(p, 1e-4)
torch.optim.SGD(halved.parameters(), lr=1e-3).step()
# Every weight of magnitude 0.01 to 1 (fp16's spacing there: 8e-6 to 1e-3) keeps its value.
lost = all(torch.equal(p[b.abs() >= 0.01], b[b.abs() >= 0.01]) for p, b in zip(halved.parameters(), before))
assert lost, "a 1e-7 update moved half-precision weights of magnitude >= 0.01"
assert all(p.dtype == torch.float16 for p in halved.parameters())  # nothing fp32 is left to take it

reduced: list[torch.dtype] = []
# The collective FSDP2 reduces gradients with: reduce_scatter_single from 2.13, reduce_scatter_tensor before.
REDUCE = "reduce_scatter_single" if hasattr(dist, "reduce_scatter_single") else "reduce_scatter_tensor"
_reduce_scatter = getattr(dist, REDUCE)


def recording(*args, **kwargs):
    """FSDP2's gradient reduce-scatter: record the dtype it sums in."""
    reduced.append((kwargs["input"] if "input" in kwargs else args[1]).dtype)
    return _reduce_scatter(*args, **kwargs)


setattr(dist, REDUCE, recording)

model = Stack()
policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for block in model.blocks:
    fully_shard(block, mp_policy=policy)
fully_shard(model, mp_policy=policy)
seen: dict[str, torch.dtype] = {}
model.blocks[0].lin.register_forward_hook(lambda m, i, o: seen.update(weight=m.weight.dtype, output=o.dtype))
model(torch.randn(4, 16)).float().square().mean().backward()  # no autocast
assert seen == {"weight": torch.bfloat16, "output": torch.bfloat16}, seen
assert len(reduced) == 3 and set(reduced) == {torch.float32}, reduced  # root + 2 blocks, each summed in fp32
assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
shards = [p.to_local().detach().clone() for p in model.parameters()]
for p in model.parameters():
    p.grad.to_local().fill_(1e-4)  # the same tiny step as above
torch.optim.SGD(model.parameters(), lr=1e-3).step()
# fp32's spacing up to 1 is at most 1.2e-7: every such weight moves.
moved = all(bool((p.to_local() != b)[b.abs() >= 0.01].all()) for p, b in zip(model.parameters(), shards))
assert moved, "a 1e-7 update left fp32 shards of magnitude >= 0.01 unchanged"
say(f"MixedPrecisionPolicy: compute {seen['output']}, {len(reduced)} reduce-scatters in {reduced[0]}, shards and "
    "grads float32, all moved by a 1e-7 step; model.half(): every parameter float16, none moved")
shutdown()

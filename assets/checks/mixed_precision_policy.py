"""
name: mixed-precision-policy
claim: model.half() leaves no fp32 copy of the weights; MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) computes in bf16, reduce-scatters the gradients in fp32, and keeps the sharded parameters and their gradients fp32, without autocast.
backs: pitfalls
world_size: 2
mutant: bf16-reduction: `reduce_dtype=torch.float32)` -> `reduce_dtype=torch.bfloat16)`
mutant: fp32-compute: `param_dtype=torch.bfloat16,` -> `param_dtype=torch.float32,`

Inside forward the all-gathered weights are bf16 (so is the matmul output). The gradient
reduction is observed where FSDP2 issues it: `dist.reduce_scatter_single` (`reduce_scatter_tensor` before 2.13; called by
`torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`, wrapped here) receives fp32
inputs on every module, so the sum over ranks is not rounded to bf16. The stored shards, the
gradients and the optimizer's view stay fp32. `model.half()` instead converts the only copy
of the weights to fp16.
"""

import torch
import torch.distributed as dist
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

init()
halved = Stack().half()
assert all(p.dtype == torch.float16 for p in halved.parameters())  # nothing fp32 is left

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
say(f"MixedPrecisionPolicy: compute {seen['output']}, {len(reduced)} reduce-scatters in {reduced[0]}, shards and "
    "grads float32; model.half(): every parameter float16")
shutdown()

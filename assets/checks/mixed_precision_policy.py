"""
name: mixed-precision-policy
claim: model.half() leaves no fp32 copy of the weights; MixedPrecisionPolicy computes in bf16 while the sharded parameters and their gradients stay fp32, without autocast.
backs: pitfalls
world_size: 2

`MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)`: inside
forward the all-gathered weights are bf16 (so is the matmul output), the stored shards,
the gradients and the optimizer's view stay fp32. `model.half()` instead converts the only
copy of the weights to fp16.
"""

import torch
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

init()
halved = Stack().half()
assert all(p.dtype == torch.float16 for p in halved.parameters())  # nothing fp32 is left

model = Stack()
policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for block in model.blocks:
    fully_shard(block, mp_policy=policy)
fully_shard(model, mp_policy=policy)
seen: dict[str, torch.dtype] = {}
model.blocks[0].lin.register_forward_hook(lambda m, i, o: seen.update(weight=m.weight.dtype, output=o.dtype))
model(torch.randn(4, 16)).float().square().mean().backward()  # no autocast
assert seen == {"weight": torch.bfloat16, "output": torch.bfloat16}, seen
assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
say(f"MixedPrecisionPolicy: compute {seen['output']}, shards and grads float32; model.half(): every parameter float16")
shutdown()

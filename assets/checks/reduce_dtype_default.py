"""
name: reduce-dtype-default
claim: MixedPrecisionPolicy(param_dtype=torch.bfloat16) with reduce_dtype left None reduce-scatters fp32 parameters' gradients in bf16 before torch 2.15 and in fp32 from 2.15 (set reduce_dtype=torch.bfloat16 to keep the old behaviour, or reduce_dtype=torch.float32 to get fp32 on every release).
backs: what-changed
world_size: 2
mutant: old-default-on-215: `REDUCES_IN_FP32 = torch_release() >= (2, 15)` -> `REDUCES_IN_FP32 = torch_release() >= (2, 16)`
mutant: explicit-bf16: `MixedPrecisionPolicy(param_dtype=torch.bfloat16)` -> `MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)`

The 2.15 docstring of MixedPrecisionPolicy ("versionchanged:: 2.15"): with `reduce_dtype=None`
gradients follow the parameter's grad dtype, fp32 for fp32 parameters, where earlier releases
reduced in `param_dtype`. Observed where FSDP2 issues the reduction (the reduce-scatter it calls,
wrapped here): the dtype of its input on every module. FSDP1 still reduces in `param_dtype`.
"""

import torch
import torch.distributed as dist
from _dist import Stack, init, say, shutdown, torch_release
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

REDUCES_IN_FP32 = torch_release() >= (2, 15)
init()
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
policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
for block in model.blocks:
    fully_shard(block, mp_policy=policy)
fully_shard(model, mp_policy=policy)
model(torch.randn(4, 16)).float().square().mean().backward()
want = torch.float32 if REDUCES_IN_FP32 else torch.bfloat16
assert len(reduced) == 3 and set(reduced) == {want}, (torch.__version__, reduced)  # root + 2 blocks
assert all(p.grad.dtype == torch.float32 for p in model.parameters())
say(f"torch {torch.__version__}: reduce_dtype=None reduce-scatters in {reduced[0]} (param_dtype bf16, fp32 params)")
shutdown()

"""
name: new-in-215
claim: torch 2.15 adds FSDP2 manual backward finalization: root.set_manual_backward_finalization(True), backward passes with gradient sync off, then set_requires_gradient_sync(True) and root.finalize_backward() (async_op=True returns a GradientReductionHandle to wait on) reduce the gradients once, equal to the usual accumulation; until then no parameter has a gradient. MixedPrecisionPolicy(param_dtype_override_fn=fn) keeps the parameters for which fn returns their own dtype in that dtype.
backs: what-changed
world_size: 2
mutant: never-finalized: `handle = manual.finalize_backward(async_op=True)` -> `handle = None`
mutant: sync-left-off: `manual.set_requires_gradient_sync(True)  # before finalizing` -> `pass`
mutant: no-override: `param_dtype_override_fn=keep_norms)` -> `param_dtype_override_fn=None)`

Manual finalization separates the gradient reduction from any backward call (schedules that
overlap it with other work): the docstring of `FSDPModule.finalize_backward` asks to disable
gradient sync for the backward passes and re-enable it before finalizing. Checked against the
same model trained the usual way (sync off for the first microbatch, on for the last): equal
gradients on every parameter. The override keeps the LayerNorms in fp32 while the Linear layers
compute in bf16. Skipped before 2.15, which has neither.
"""

import copy

import torch
import torch.nn as nn
from _dist import Stack, batches, init, say, shutdown, skip_unless
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

skip_unless(hasattr(FSDPModule, "finalize_backward"), "FSDPModule.finalize_backward and param_dtype_override_fn are "
            "new in 2.15")
from torch.distributed.fsdp import GradientReductionHandle  # noqa: E402 (2.15 only)

init()
rank = torch.distributed.get_rank()
torch.manual_seed(0)
base = Stack()


def shard(model: nn.Module, **kwargs: object) -> nn.Module:
    for block in model.blocks:
        fully_shard(block, **kwargs)
    return fully_shard(model, **kwargs)


data = [next(batches(rank, seed=100 + i)) for i in range(2)]
usual, manual = shard(copy.deepcopy(base)), shard(copy.deepcopy(base))
for i, (x, y) in enumerate(data):  # the usual accumulation: reduce on the last microbatch's backward
    usual.set_requires_gradient_sync(i == len(data) - 1)
    nn.functional.mse_loss(usual(x), y).backward()

manual.set_manual_backward_finalization(True)
manual.set_requires_gradient_sync(False)
for x, y in data:
    nn.functional.mse_loss(manual(x), y).backward()
assert all(p.grad is None for p in manual.parameters()), "gradients before finalize_backward"
manual.set_requires_gradient_sync(True)  # before finalizing
handle = manual.finalize_backward(async_op=True)
assert isinstance(handle, GradientReductionHandle), type(handle)
handle.wait()
for (name, p), q in zip(manual.named_parameters(), usual.parameters()):
    assert p.grad is not None and torch.allclose(p.grad.full_tensor(), q.grad.full_tensor()), name

model = copy.deepcopy(base)
norms = {id(p) for block in model.blocks for p in block.norm.parameters()}


def keep_norms(param: nn.Parameter) -> torch.dtype | None:
    return param.dtype if id(param) in norms else None  # its own dtype: kept; None: param_dtype


shard(model, mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, param_dtype_override_fn=keep_norms))
seen: dict[str, torch.dtype] = {}
model.blocks[0].norm.register_forward_hook(lambda m, i, o: seen.update(norm=m.weight.dtype))
model.blocks[0].lin.register_forward_hook(lambda m, i, o: seen.update(lin=m.weight.dtype))
model(data[0][0]).float().sum().backward()
assert seen == {"norm": torch.float32, "lin": torch.bfloat16}, seen
say(f"finalize_backward(async_op=True) -> {type(handle).__name__}: gradients equal to the usual accumulation; "
    f"param_dtype_override_fn kept the norms {seen['norm']}, linears {seen['lin']}")
shutdown()

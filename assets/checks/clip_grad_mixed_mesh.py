"""
name: clip-grad-mixed-mesh
claim: clip_grad_norm_ raises when TP + FSDP2 leave parameters on two meshes (which exception and message depends on the release: "must have the same mesh", or "Sharding propagation failed" for aten.stack); computing the norm per mesh and clipping per mesh works.
backs: pitfalls
world_size: 4
requires: stated-ranks
mutant: clip-each-mesh-alone: `torch.nn.utils.clip_grads_with_norm_(group, max_norm, total)` -> `torch.nn.utils.clip_grad_norm_(group, max_norm)`
mutant: norms-summed: `total = torch.linalg.vector_norm(torch.stack(norms))` -> `total = torch.stack(norms).sum()`

TP on a (dp=2, tp=2) mesh, then `fully_shard(mesh=mesh["dp"])`: the TP linears' parameters
live on the 2-D mesh, the LayerNorm's on the 1-D dp mesh. `clip_grad_norm_` stacks the
per-parameter norms and raises "All operands in aten.stack.default must have the same
mesh" (a RuntimeError from 2.10; a ValueError on 2.7.1; 2.9.1 raised RuntimeError "Sharding propagation
failed for Op(op=aten.stack.default ...)"). Grouping the gradients by mesh, `get_total_norm` per group (`full_tensor()` of each),
one total, then `clip_grads_with_norm_` per group clips to the same global norm.
"""

import torch
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(self.norm(x))))


def clip_grad_norm_by_mesh(params: list[nn.Parameter], max_norm: float) -> torch.Tensor:
    """The global gradient norm over parameters on different meshes; clips in place, returns it."""
    groups: dict[object, list[nn.Parameter]] = {}
    for p in params:
        if p.grad is not None:
            groups.setdefault(p.grad.device_mesh if isinstance(p.grad, DTensor) else None, []).append(p)
    norms = []
    for group in groups.values():
        norm = torch.nn.utils.get_total_norm([p.grad for p in group])
        norms.append(norm.full_tensor() if isinstance(norm, DTensor) else norm)
    total = torch.linalg.vector_norm(torch.stack(norms))
    for group in groups.values():
        torch.nn.utils.clip_grads_with_norm_(group, max_norm, total)
    return total


device = init()
mesh = init_device_mesh(device.type, (2, 2), mesh_dim_names=("dp", "tp"))
torch.manual_seed(0)
model = MLP()
parallelize_module(model, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
fully_shard(model, mesh=mesh["dp"])
meshes = {p.device_mesh.mesh_dim_names for p in model.parameters()}
assert meshes == {("dp", "tp"), ("dp",)}, meshes
model(torch.randn(4, 16, device=device)).square().mean().backward()
try:
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    raise AssertionError("clip_grad_norm_ worked across two meshes")
except (RuntimeError, ValueError) as exc:  # which one, and its words, vary by release
    raised = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
assert "same mesh" in raised or "Sharding propagation failed for Op(op=aten.stack" in raised, raised
params = list(model.parameters())
before = torch.linalg.vector_norm(torch.stack([p.grad.full_tensor().norm() for p in params]))
total = clip_grad_norm_by_mesh(params, max_norm=0.1)
after = torch.linalg.vector_norm(torch.stack([p.grad.full_tensor().norm() for p in params]))
torch.testing.assert_close(total, before)
torch.testing.assert_close(after, torch.tensor(0.1), rtol=1e-4, atol=1e-6)
say(f"torch {torch.__version__}: clip_grad_norm_ on 2 meshes raises {raised[:60]!r}; per-mesh norm {total:.4f} = full norm {before:.4f}, "
    f"clipped to {after:.4f}")
shutdown()

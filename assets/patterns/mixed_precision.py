"""
name: mixed-precision
min_torch: 2.8
title: Mixed precision with MixedPrecisionPolicy (bf16 compute, fp32 master weights and reduction)
world_size: 2
requires:
tags: fsdp2, fully_shard, MixedPrecisionPolicy, bf16, bfloat16, param_dtype, reduce_dtype, output_dtype, training
mutant: bf16-reduction: `block_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)` -> `block_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)`
mutant: bf16-output: `param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.float32` -> `param_dtype=torch.bfloat16, reduce_dtype=torch.float32`
mutant: fp32-compute: `block_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16,` -> `block_policy = MixedPrecisionPolicy(param_dtype=torch.float32,`; `param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.float32` -> `param_dtype=torch.float32, reduce_dtype=torch.float32, output_dtype=torch.float32`

`MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)` makes
FSDP2 all-gather parameters in bf16 and run forward/backward in bf16, while the
sharded parameters the optimizer updates stay in fp32 and gradients are
reduce-scattered in fp32 (numerically safer than reducing in bf16).

Leave `reduce_dtype` out and the release decides: before 2.15 the reduction runs in
`param_dtype` (bf16 here), from 2.15 in the parameters' own dtype (fp32 here): the
`reduce-dtype-default` claim check runs both (assets/checks/reduce_dtype_default.py). Set
it explicitly, as here, to get fp32 on every release; `bf16-reduction` shows the check fails
when the reduction is bf16.

What the script checks, so you can see the policy at work:
- inside forward, each Linear sees a bf16 weight (a forward pre-hook records it);
- every gradient reduce-scatter FSDP issues gets an fp32 input: the script wraps the
  collective FSDP2 calls (`dist.reduce_scatter_single` in 2.13,
  torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:184; `dist.reduce_scatter_tensor`
  in 2.4 to 2.12, by those releases' wheels) and records the dtype of what is reduced;
- the sharded parameters and their gradients stay fp32 (the optimizer's master copy);
- `output_dtype=torch.float32` on the root hands the loss an fp32 tensor.

No torch.autocast is needed: FSDP2 casts the parameters itself, and
`cast_forward_inputs=True` (the default) casts floating-point inputs to param_dtype.
bf16 runs on CPU with gloo too (slowly); fp16 works the same way on GPU but usually needs
a gradient scaler, bf16 does not.

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/mixed_precision.py
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

DIM, BLOCKS, STEPS, BATCH = 32, 3, 30, 16


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
    """Destroy the process group; on gloo, then leave without interpreter teardown."""
    gloo = dist.get_backend() == "gloo"
    dist.destroy_process_group()
    if gloo:
        # torch 2.13 on CPU: objects that outlive main() (DTensor caches under FSDP, DDP's C++
        # reducer) keep the gloo group alive after destroy_process_group, and its worker thread
        # can release a Python-owned tensor while the interpreter shuts down, aborting the process
        # ("terminate called without an active exception", intermittently: 10 of 20 runs
        # of fsdp2-training in one measurement on a busy 2-core machine, 0 of 10 in a quieter one).
        # The work is done and flushed, so skip the teardown. NCCL groups are shut down by
        # destroy_process_group: no early exit there.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)



class Residual(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


def make_model() -> nn.Sequential:
    return nn.Sequential(*(Residual(DIM) for _ in range(BLOCKS)), nn.Linear(DIM, DIM))


def record_reduced_dtypes() -> list[torch.dtype]:
    """Wrap the reduce-scatter functions FSDP2 looks up on `torch.distributed` at each call and return
    the list they append the dtype of every reduced tensor to: what `reduce_dtype` really does."""
    seen: list[torch.dtype] = []

    def spy(collective):
        def wrapper(*args, **kwargs):
            reduced = kwargs["input"] if "input" in kwargs else args[1]
            seen.append(reduced.dtype)
            return collective(*args, **kwargs)
        return wrapper

    # 2.13's FSDP2 calls reduce_scatter_single (reduce_scatter_tensor is deprecated there); 2.4 to
    # 2.12 call reduce_scatter_tensor. Wrap whichever exist.
    for name in ("reduce_scatter_single", "reduce_scatter_tensor"):
        if hasattr(dist, name):
            setattr(dist, name, spy(getattr(dist, name)))
    return seen


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    torch.manual_seed(0)  # same init on every rank: fully_shard then keeps each rank's slice
    model = make_model().to(device)

    # Blocks compute in bf16 and reduce gradients in fp32; the root also returns fp32 outputs.
    block_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    root_policy = MixedPrecisionPolicy(
        param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.float32
    )
    for block in model[:-1]:
        fully_shard(block, mp_policy=block_policy)
    fully_shard(model, mp_policy=root_policy)

    # Record the dtype each Linear's weight has at the moment it runs.
    seen_weight_dtypes: set[torch.dtype] = set()

    def record_dtype(module: nn.Module, args: tuple) -> None:
        seen_weight_dtypes.add(module.weight.dtype)

    for module in model.modules():
        if isinstance(module, nn.Linear):
            module.register_forward_pre_hook(record_dtype)

    reduced_dtypes = record_reduced_dtypes()
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    teacher = torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(1)) / DIM**0.5
    data_gen = torch.Generator().manual_seed(100 + rank)

    losses: list[float] = []
    for step in range(STEPS):
        x = torch.randn(BATCH, DIM, generator=data_gen).to(device)
        y = torch.tanh(x @ teacher.to(device))
        out = model(x)
        assert out.dtype == torch.float32, out.dtype  # output_dtype on the root
        loss = nn.functional.mse_loss(out, y)
        loss.backward()
        if step == 0:
            # Sharded parameters and their gradients stay fp32: the optimizer's master weights.
            for name, param in model.named_parameters():
                assert param.dtype == torch.float32, (name, param.dtype)
                assert param.grad is not None and param.grad.dtype == torch.float32, name
        optim.step()
        optim.zero_grad()
        logged = loss.detach().clone()
        dist.all_reduce(logged, op=dist.ReduceOp.AVG)
        losses.append(logged.item())

    assert seen_weight_dtypes == {torch.bfloat16}, f"forward saw {seen_weight_dtypes}, expected bf16 only"
    # One reduce-scatter per FSDP module (3 blocks + the root) per step, every one in fp32.
    assert len(reduced_dtypes) == STEPS * (BLOCKS + 1), f"{len(reduced_dtypes)} reduce-scatters"
    assert set(reduced_dtypes) == {torch.float32}, f"gradients were reduced in {sorted(map(str, set(reduced_dtypes)))}"
    if rank == 0:
        print("forward weight dtypes:", sorted(str(d) for d in seen_weight_dtypes), flush=True)
        print(f"{len(reduced_dtypes)} gradient reduce-scatters, dtypes {sorted(map(str, set(reduced_dtypes)))}", flush=True)
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} over {STEPS} steps", flush=True)
    assert losses[-1] < 0.5 * losses[0], f"loss did not go down: {losses[0]:.4f} -> {losses[-1]:.4f}"
    shutdown()


if __name__ == "__main__":
    main()

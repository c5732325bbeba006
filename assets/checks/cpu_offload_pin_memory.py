"""
name: cpu-offload-pin-memory
claim: On a machine without a GPU, CPUOffloadPolicy() (pin_memory=True, the default) raises in fully_shard: "Found no NVIDIA driver on your system" with a CUDA build of torch (the package registry's Linux default) from 2.9, "CPU device type not an accelerator" with one before 2.9, "Cannot access accelerator device" with a CPU build; CPUOffloadPolicy(pin_memory=False) trains on gloo with either.
backs: pitfalls
world_size: 2
mutant: pinned-works-on-cpu: `fully_shard(Stack(), offload_policy=CPUOffloadPolicy())` -> `fully_shard(Stack(), offload_policy=CPUOffloadPolicy(pin_memory=False))`
mutant: old-message-on-215: `elif torch_release() >= (2, 9):` -> `elif torch_release() >= (2, 16):`
mutant: cpu-build-message-on-a-cuda-build: `if torch.version.cuda is None:` -> `if torch.version.cuda is not None:`
mutant: default-policy-on-root: `fully_shard(model, offload_policy=CPUOffloadPolicy(pin_memory=False))` -> `fully_shard(model, offload_policy=CPUOffloadPolicy())` => RuntimeError

Pinning host memory needs an accelerator. Without one, only the default `pin_memory=True`
fails, in `fully_shard` itself, and how depends on the build: a CUDA build (what `pip install torch`
gives on Linux, on login nodes and CI runners too) asks the CUDA runtime and gets "Found no NVIDIA
driver" (from 2.9; 2.7.1 and 2.8.0 said "CPU device type not an accelerator."); a CPU build says "Cannot
access accelerator device". The release matrix runs both kinds; `CPUOffloadPolicy(pin_memory=False)` shards, trains and keeps the sharded
parameters and gradients on the CPU.
"""

import torch
import torch.nn as nn
from _dist import Stack, batches, init, say, shutdown, torch_release
from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard

# What pinning without an accelerator raises depends on the build, and on a CUDA build on the release.
if torch.version.cuda is None:
    PIN_ERROR = "Cannot access accelerator device"
elif torch_release() >= (2, 9):
    PIN_ERROR = "Found no NVIDIA driver"
else:
    PIN_ERROR = "CPU device type not an accelerator"
init()
if not torch.accelerator.is_available():
    try:
        fully_shard(Stack(), offload_policy=CPUOffloadPolicy())  # raises here, when it pins the shards
        raise AssertionError("pin_memory=True worked without an accelerator")
    except RuntimeError as exc:
        assert PIN_ERROR in str(exc), exc

torch.manual_seed(0)
model = Stack()
for block in model.blocks:
    fully_shard(block, offload_policy=CPUOffloadPolicy(pin_memory=False))
fully_shard(model, offload_policy=CPUOffloadPolicy(pin_memory=False))
optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
data = batches(torch.distributed.get_rank())
losses = []
for _ in range(10):
    x, y = next(data)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optim.step()
    optim.zero_grad()
    losses.append(loss.item())
assert all(p.device.type == "cpu" for p in model.parameters())
assert losses[-1] < losses[0], losses
say(f"pin_memory=True without an accelerator raises ({PIN_ERROR}, torch {torch.__version__}); pin_memory=False trains: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
shutdown()

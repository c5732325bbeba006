"""
name: device-id-eager-init
claim: init_process_group(device_id=...) binds the group to that GPU and creates its NCCL communicator at init (before any collective); it does not call torch.cuda.set_device, so each rank must.
backs: pitfalls
world_size: 2
requires: cuda
rests_on: torch/distributed/distributed_c10d.py:3206 `eager_backend.eager_connect_single_device(device_id)`
mutant: init-sets-device: `dist.init_process_group("nccl", device_id=device)  # no set_device on purpose` -> `dist.init_process_group("nccl", device_id=device) or torch.cuda.set_device(device)`
mutant: lazy-init: `dist.init_process_group("nccl", device_id=device)  # no set_device on purpose` -> `dist.init_process_group("nccl")`

GPU-only (NCCL, two GPUs). What it rests on, in the installed torch:
- torch/distributed/distributed_c10d.py:2095-2096 `if device_id: pg.bound_device_id = device_id`
  (the group records the device), and :2333-2335: when the backend supports splitting (NCCL),
  `eager_connect_single_device(device_id)` creates the communicator at init, so a bad GPU or
  network setup fails in init_process_group, not at the first collective;
- distributed_c10d.py calls `torch.cuda.set_device` nowhere (the name appears only in
  docstrings), so the current CUDA device stays what it was.
To tell "left alone" from "set to device_id" on every rank, each rank first makes a device
other than its own current (`(local_rank + 1) % device_count`): after init it is still current,
and `torch.empty(1, device="cuda")` lands there (without any set_device: GPU 0 on every rank).
"""

import os

import torch
import torch.distributed as dist
from _dist import say, shutdown

local_rank = int(os.environ["LOCAL_RANK"])
device = torch.device("cuda", local_rank)
other = (local_rank + 1) % torch.cuda.device_count()
assert other != local_rank, "needs two GPUs"
torch.cuda.set_device(other)  # some other device current, so that set_device(device) would show
dist.init_process_group("nccl", device_id=device)  # no set_device on purpose
assert dist.group.WORLD.bound_device_id == device, dist.group.WORLD.bound_device_id
nccl = dist.group.WORLD._get_backend(device)
assert nccl._is_initialized(), "no NCCL communicator after init_process_group(device_id=...)"  # eager
assert torch.cuda.current_device() == other, f"device_id= made cuda:{torch.cuda.current_device()} current"
assert torch.empty(1, device="cuda").device.index == other
torch.cuda.set_device(device)
tensor = torch.ones(1, device="cuda")
dist.all_reduce(tensor)
assert tensor.item() == dist.get_world_size()
say("device_id bound the group and created the NCCL communicator at init; the current device stayed the one "
    "set before, on every rank, until set_device")
shutdown()

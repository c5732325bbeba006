"""
name: device-id-eager-init
claim: init_process_group(device_id=...) binds the group to that GPU and connects NCCL eagerly; it does not call torch.cuda.set_device, so each rank must.
backs: pitfalls
world_size: 2
requires: cuda
rests_on: torch/distributed/distributed_c10d.py:2335 `eager_backend.eager_connect_single_device(device_id)`

On NCCL, `device_id=` makes init_process_group create the communicator for that GPU at
once (errors show up at init, not at the first collective) and records it as the group's
`bound_device_id`. The current CUDA device stays what it was: without
`torch.cuda.set_device(local_rank)` every rank's default CUDA tensors land on GPU 0.
"""

import os

import torch
import torch.distributed as dist
from _dist import say, shutdown

local_rank = int(os.environ["LOCAL_RANK"])
device = torch.device("cuda", local_rank)
assert torch.cuda.current_device() == 0
dist.init_process_group("nccl", device_id=device)  # no set_device on purpose
assert dist.group.WORLD.bound_device_id == device
assert torch.cuda.current_device() == 0, "device_id= called set_device"
assert torch.empty(1, device="cuda").device.index == 0  # every rank would allocate on GPU 0
torch.cuda.set_device(device)
tensor = torch.ones(1, device="cuda")
dist.all_reduce(tensor)
assert tensor.item() == dist.get_world_size()
say("device_id bound the group and left the current device at 0 on every rank until set_device")
shutdown()

"""
name: async-save-needs-cpu-backend
claim: dcp.async_save refuses a process group without a CPU backend (the NCCL-only group the upstream async-checkpoint tutorial sets up: AssertionError "A CPU backend must be enabled for async save"); with "cpu:gloo,cuda:nccl" it saves.
backs: doc-bug
world_size: 1
requires: cuda
rests_on: torch/distributed/checkpoint/state_dict_saver.py:302 `if torch.device("cpu") not in pg._device_types:`
mutant: tutorial-with-cpu-backend: `dist.init_process_group("nccl", device_id=device)  # the tutorial's` -> `dist.init_process_group("cpu:gloo,cuda:nccl", device_id=device)  # the tutorial's`

Records a doc-bug in the generated references: "Asynchronous Saving with Distributed
Checkpoint (DCP)" (references/checkpoint.md, from pytorch/tutorials) calls
`dist.init_process_group("nccl", ...)` and then `dcp.async_save`, which on torch 2.15
raises at its first lines (state_dict_saver.py:300-305) because the group has no CPU
backend. The references are generated from upstream, so the text stays; this check keeps
the correction true: on the tutorial's group async_save raises, on a
"cpu:gloo,cuda:nccl" group it saves and the result loads back.
"""

import os
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from _dist import say, shutdown

device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
torch.cuda.set_device(device)
dist.init_process_group("nccl", device_id=device)  # the tutorial's
state = {"weight": torch.arange(6.0, device=device)}
with tempfile.TemporaryDirectory() as scratch:
    try:
        dcp.async_save(state, checkpoint_id=scratch).result()
        refused = None
    except AssertionError as exc:
        refused = str(exc)
dist.destroy_process_group()
assert refused and "A CPU backend must be enabled for async save" in refused, f"async_save on NCCL only: {refused}"

dist.init_process_group("cpu:gloo,cuda:nccl", device_id=device)
path = [tempfile.mkdtemp() if dist.get_rank() == 0 else ""]
dist.broadcast_object_list(path)
dcp.async_save(state, checkpoint_id=path[0]).result()
loaded = {"weight": torch.zeros(6, device=device)}
dcp.load(loaded, checkpoint_id=path[0])
assert torch.equal(loaded["weight"], state["weight"])
say(f"NCCL-only group: AssertionError: {refused}; cpu:gloo,cuda:nccl: async_save saved and loaded back")
shutdown()

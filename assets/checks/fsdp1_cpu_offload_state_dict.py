"""
name: fsdp1-cpu-offload-state-dict
claim: On a CPU-only run, an FSDP1 full state dict with offload_to_cpu=True raises on rank 0 ("setStorage ... out of bounds for storage of size 0"); offload_to_cpu=False or DCP's get_model_state_dict work.
backs: pitfalls
world_size: 2
requires: stated-ranks

FSDP1 on gloo (`device_id=torch.device("cpu")`: FSDP1 refuses to start on CPU otherwise).
`FullStateDictConfig(offload_to_cpu=True, rank0_only=True)` makes rank 0 clone a freed
storage; the same call with offload_to_cpu=False, and DCP's
`get_model_state_dict(..., full_state_dict=True, cpu_offload=True)`, return the weights.
"""

import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say
from torch.distributed.fsdp import FullStateDictConfig, StateDictType
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

init()
rank = dist.get_rank()
warnings.simplefilter("ignore", FutureWarning)  # FSDP1's state_dict_type is deprecated in 2.13
model = FSDP(nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8)), device_id=torch.device("cpu"))
with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(offload_to_cpu=False, rank0_only=True)):
    kept = model.state_dict()
assert (len(kept) == 4) == (rank == 0), list(kept)
error = ""
try:
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(offload_to_cpu=True, rank0_only=True)):
        model.state_dict()
except RuntimeError as exc:
    error = str(exc).splitlines()[0]
if rank == 0:
    assert "out of bounds for storage of size 0" in error, error
    say(f"offload_to_cpu=False: {len(kept)} tensors on rank 0; offload_to_cpu=True on CPU: RuntimeError: {error[:90]}")
# Rank 0 left the state-dict call part way: leave without another collective.
sys.stdout.flush()
os._exit(0)

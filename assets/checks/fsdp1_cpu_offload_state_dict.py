"""
name: fsdp1-cpu-offload-state-dict
claim: On a CPU-only run before torch 2.14, an FSDP1 full state dict with offload_to_cpu=True raises on rank 0 ("setStorage ... out of bounds for storage of size 0"), and so does DCP's get_model_state_dict(full_state_dict=True, cpu_offload=True) on an FSDP1 model; offload_to_cpu=False, or get_model_state_dict(full_state_dict=True) without cpu_offload, return the weights. From 2.14 both offloading calls return the same weights.
backs: pitfalls
world_size: 2
requires: stated-ranks
mutant: raises-on-215-too: `RAISES = torch_release() < (2, 14)` -> `RAISES = torch_release() < (2, 16)`
mutant: dcp-offload-kept-on-device: `v.device.type == "cpu" for v in dcp_offloaded.values()` -> `v.device.type == "meta" for v in dcp_offloaded.values()`
mutant: offloaded-weights-differ: `offloaded = model.state_dict()` -> `offloaded = {k: v + 1 for k, v in model.state_dict().items()}`

FSDP1 on gloo (`device_id=torch.device("cpu")`: FSDP1 refuses to start on CPU otherwise).
`FullStateDictConfig(offload_to_cpu=True, rank0_only=True)` makes rank 0 clone a freed
storage; DCP's `get_model_state_dict(..., StateDictOptions(full_state_dict=True, cpu_offload=True))`
on an FSDP1 model takes the same path and fails the same way (on a second model: a failed call
leaves its model mid-unshard). The same call with offload_to_cpu=False, and
`get_model_state_dict(..., StateDictOptions(full_state_dict=True))`, return equal weights on rank 0.
From 2.14 both offloading calls return the weights, equal to the others, on the same CPU-only host.
Which release, not which build: the registry's CUDA builds of 2.11.0 and 2.12.1 raised as 2.13.0+cpu
did, its CUDA builds of 2.14.1 and 2.15.0 did not (the release matrix has each run).
"""

import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, torch_release
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.fsdp import FullStateDictConfig, StateDictType
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

# Which release, not which build: CUDA builds before 2.14 raised as 2.13.0+cpu did (the release matrix).
RAISES = torch_release() < (2, 14)
init()
rank = dist.get_rank()
warnings.simplefilter("ignore", FutureWarning)  # FSDP1's state_dict_type is deprecated in 2.13
model = FSDP(nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8)), device_id=torch.device("cpu"))
with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(offload_to_cpu=False, rank0_only=True)):
    kept = model.state_dict()
assert (len(kept) == 4) == (rank == 0), list(kept)
via_dcp = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
if rank == 0:
    assert via_dcp.keys() == kept.keys() and all(torch.equal(via_dcp[k], kept[k]) for k in kept), list(via_dcp)
dcp_error, dcp_offloaded = "", {}
other = FSDP(nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8)), device_id=torch.device("cpu"))
try:  # DCP's cpu_offload=True goes the same way on an FSDP1 model (a second one: a failed call spoils its model)
    dcp_offloaded = get_model_state_dict(other, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
except RuntimeError as exc:
    dcp_error = str(exc).splitlines()[0]
error, offloaded = "", {}
try:
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(offload_to_cpu=True, rank0_only=True)):
        offloaded = model.state_dict()
except RuntimeError as exc:
    error = str(exc).splitlines()[0]
if rank == 0 and RAISES:
    assert "out of bounds for storage of size 0" in error, error
    assert "out of bounds for storage of size 0" in dcp_error, dcp_error
    say(f"offload_to_cpu=False: {len(kept)} tensors on rank 0, equal to get_model_state_dict(full, cpu_offload); "
        f"offload_to_cpu=True on CPU: RuntimeError: {error[:90]}")
elif rank == 0:
    assert not error and not dcp_error, (error, dcp_error)
    assert offloaded.keys() == kept.keys() and all(torch.equal(offloaded[k], kept[k]) for k in kept), list(offloaded)
    assert dcp_offloaded.keys() == kept.keys() and all(v.device.type == "cpu" for v in dcp_offloaded.values())
    say(f"torch {torch.__version__}: offload_to_cpu=True and get_model_state_dict(full, cpu_offload) return the "
        f"{len(kept)} tensors on a CPU-only run, equal to offload_to_cpu=False")
# Rank 0 left the state-dict call part way (before 2.14): leave without another collective.
sys.stdout.flush()
os._exit(0)

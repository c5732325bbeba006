"""
name: migration-map-names
claim: The FSDP1 -> FSDP2 migration map's names exist as stated in torch 2.13 (wrapper prefix vs in-place class swap, fully_shard's parameters, policies' fields, FSDPModule methods).
backs: migration-map
world_size: 2
requires: stated-ranks

Checks each row of the map in fsdp1_to_fsdp2_migration.py that names an API: FSDP1 wraps
(`_fsdp_wrapped_module.` in names), FSDP2 swaps the class in place (`FSDP<Class>`) and
keeps names; fully_shard takes mesh / reshard_after_forward (bool or int) / mp_policy /
offload_policy / ignored_params and no use_orig_params; MixedPrecisionPolicy's fields;
DeviceMesh.from_group; the FSDPModule methods the map points to; register_fsdp_forward_method;
FSDP1's state_dict_type warns FutureWarning.
"""

import dataclasses
import inspect
import warnings

import torch
import torch.distributed as dist
from _dist import Stack, init, say, shutdown
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import (
    FSDPModule,
    FullyShardedDataParallel,
    MixedPrecisionPolicy,
    StateDictType,
    fully_shard,
    register_fsdp_forward_method,
)
from torch.distributed.tensor import DTensor, Shard

init()
names = [n for n, _ in Stack().named_parameters()]

fsdp1 = FullyShardedDataParallel(Stack(), device_id=torch.device("cpu"), use_orig_params=True)
assert any("_fsdp_wrapped_module." in n for n, _ in fsdp1.named_parameters())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with FullyShardedDataParallel.state_dict_type(fsdp1, StateDictType.SHARDED_STATE_DICT):
        pass
assert any(issubclass(w.category, FutureWarning) for w in caught), [str(w.message) for w in caught]

model = Stack()
for block in model.blocks:
    fully_shard(block, reshard_after_forward=2)  # an int: reshard to groups of 2 ranks after forward
fully_shard(model)
assert type(model).__name__ == "FSDPStack" and isinstance(model, FSDPModule)
assert [n for n, _ in model.named_parameters()] == names
assert all(isinstance(p, DTensor) and p.placements == (Shard(0),) for p in model.parameters())
params = inspect.signature(fully_shard).parameters
assert {"mesh", "reshard_after_forward", "mp_policy", "offload_policy", "ignored_params"} <= set(params)
assert "use_orig_params" not in params and "auto_wrap_policy" not in params
assert {f.name for f in dataclasses.fields(MixedPrecisionPolicy)} == {
    "param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs"}
assert callable(DeviceMesh.from_group) and callable(register_fsdp_forward_method)
for method in ("set_requires_gradient_sync", "set_modules_to_forward_prefetch", "set_modules_to_backward_prefetch",
               "unshard", "reshard", "set_reduce_scatter_divide_factor", "set_all_reduce_hook",
               "set_custom_reduce_scatter", "set_reshard_after_backward", "set_reshard_after_forward"):
    assert callable(getattr(FSDPModule, method)), method
model(torch.randn(4, 16)).sum().backward()  # the int reshard_after_forward runs on 2 ranks
say(f"FSDP1 wraps (prefix _fsdp_wrapped_module.), FSDP2 class {type(model).__name__} keeps {len(names)} names; "
    "fully_shard/MixedPrecisionPolicy/FSDPModule names as in the map; state_dict_type warns FutureWarning")
dist.barrier()
shutdown()

"""
name: migration-map-names
claim: The FSDP1 -> FSDP2 migration map's API rows behave as stated: FSDP1 wraps (names gain `_fsdp_wrapped_module.`) while fully_shard swaps the class in place and keeps the names (its full state dict loads into the plain model); fully_shard has no use_orig_params or auto_wrap_policy; ignored_params stay unsharded and their gradients are not reduced across ranks; DeviceMesh.from_group shards over an existing group; MixedPrecisionPolicy has the four fields (2.15 adds param_dtype_override_fn); FSDP1's state_dict_type warns FutureWarning.
backs: migration-map
world_size: 2
requires: stated-ranks
mutant: names-from-the-wrapper: `fsdp2_names = [n for n, _ in model.named_parameters()]` -> `fsdp2_names = [n for n, _ in fsdp1.named_parameters()]`
mutant: nothing-ignored: `ignored_params={model.head.bias}` -> `ignored_params=set()`
mutant: same-data: `generator=torch.Generator().manual_seed(dist.get_rank()))` -> `generator=torch.Generator().manual_seed(0))`
mutant: no-new-field-on-215: `if torch_release() >= (2, 15):` -> `if torch_release() >= (2, 16):`
mutant: mesh-of-a-subgroup: `DeviceMesh.from_group(dist.group.WORLD, "cpu")` -> `DeviceMesh.from_group(dist.new_group([dist.get_rank()]), "cpu")`

Each row of the map in assets/patterns/fsdp1_to_fsdp2_migration.py that names an API, checked
by what it does, not only that the name exists:
- FSDP1 (`FullyShardedDataParallel(..., use_orig_params=True)`) returns a wrapper whose parameter
  names carry `_fsdp_wrapped_module.`; `fully_shard` makes the class `FSDP<Class>` in place,
  keeps every name, and its full state dict (`get_model_state_dict(..., full_state_dict=True)`)
  loads with `strict=True` into the unsharded model, equal to the sharded weights;
- `fully_shard(use_orig_params=True)` and `auto_wrap_policy=` raise TypeError;
- `ignored_params={...}` leaves that parameter a plain full tensor, the others DTensors, and
  its gradient is not reduced: on per-rank data each rank's differs (replicas drift apart);
- `DeviceMesh.from_group(pg, "cpu")` (FSDP1's `process_group=`): fully_shard on it shards each
  parameter over the group's ranks (half a weight per rank here);
- MixedPrecisionPolicy's fields are param_dtype, reduce_dtype, output_dtype, cast_forward_inputs (2.15 adds
  param_dtype_override_fn);
- FSDP1's `state_dict_type` warns FutureWarning (use get_state_dict / set_state_dict).
"""

import dataclasses
import warnings

import torch
import torch.distributed as dist
from _dist import Stack, init, say, shutdown, torch_release
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import (
    FSDPModule,
    FullyShardedDataParallel,
    MixedPrecisionPolicy,
    StateDictType,
    fully_shard,
)
from torch.distributed.tensor import DTensor, Shard

init()
world = dist.get_world_size()
names = [n for n, _ in Stack().named_parameters()]

fsdp1 = FullyShardedDataParallel(Stack(), device_id=torch.device("cpu"), use_orig_params=True)
assert all("_fsdp_wrapped_module." in n for n, _ in fsdp1.named_parameters())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with FullyShardedDataParallel.state_dict_type(fsdp1, StateDictType.SHARDED_STATE_DICT):
        pass
assert any(issubclass(w.category, FutureWarning) for w in caught), [str(w.message) for w in caught]

for removed in ({"use_orig_params": True}, {"auto_wrap_policy": None}):
    try:
        fully_shard(Stack(), **removed)
        raise AssertionError(f"fully_shard accepted {removed}")
    except TypeError:
        pass

torch.manual_seed(0)
model = Stack()
for block in model.blocks:
    fully_shard(block)
fully_shard(model, ignored_params={model.head.bias})
fsdp2_names = [n for n, _ in model.named_parameters()]
assert type(model).__name__ == "FSDPStack" and isinstance(model, FSDPModule)
assert fsdp2_names == names, fsdp2_names
assert not isinstance(model.head.bias, DTensor), "an ignored parameter was sharded"
assert all(isinstance(p, DTensor) and p.placements == (Shard(0),) for n, p in model.named_parameters()
           if n != "head.bias")
full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
plain = Stack()
plain.load_state_dict(full, strict=True)  # same names: an FSDP2 checkpoint loads into the unsharded model
for (name, p), q in zip(model.named_parameters(), plain.parameters()):
    torch.testing.assert_close(p.full_tensor() if isinstance(p, DTensor) else p, q, msg=name)

mesh = DeviceMesh.from_group(dist.group.WORLD, "cpu")
on_group = Stack()
fully_shard(on_group, mesh=mesh)
weight = on_group.inp.weight
assert weight.device_mesh.size() == world and weight.to_local().shape[0] == 16 // world, weight.to_local().shape

MP_FIELDS = {"param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs"}
if torch_release() >= (2, 15):  # 2.15 adds a per-parameter param_dtype: param_dtype_override_fn
    MP_FIELDS.add("param_dtype_override_fn")
assert {f.name for f in dataclasses.fields(MixedPrecisionPolicy)} == MP_FIELDS, dataclasses.fields(MixedPrecisionPolicy)
# Per-rank data: the ignored parameter's gradient is not reduced (each rank keeps its own), the others are.
x = torch.randn(4, 16, generator=torch.Generator().manual_seed(dist.get_rank()))
model(x).square().sum().backward()  # a data-dependent bias gradient (sum() would give 4 everywhere)
grads: list[torch.Tensor] = [torch.empty(0)] * world
dist.all_gather_object(grads, model.head.bias.grad)
assert not torch.equal(grads[0], grads[1]), "the ignored parameter's gradient was reduced across ranks"
say(f"FSDP1 wraps (prefix _fsdp_wrapped_module.); FSDP2 class {type(model).__name__} keeps {len(names)} names, "
    "its full state dict loads strict into the plain model; use_orig_params/auto_wrap_policy raise TypeError; "
    f"the ignored head.bias stays a full tensor; DeviceMesh.from_group shards {16 // world} of 16 rows per rank; "
    "state_dict_type warns FutureWarning")
dist.barrier()
shutdown()

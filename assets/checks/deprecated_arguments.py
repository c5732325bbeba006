"""
name: deprecated-arguments
claim: Two arguments warn FutureWarning when passed, though their functions do not: get_state_dict(..., submodules=...) (still works, its message says "will be removed in 2.5") and distribute_module's input_fn or output_fn taking two arguments (inputs, device_mesh), where three (module, inputs, device_mesh) do not warn.
backs: what-changed
world_size: 2
mutant: no-submodules: `get_state_dict(model, [optim], submodules={model[0]})` -> `get_state_dict(model, [optim])`
mutant: three-arg-input-fn: `input_fn=lambda inputs, mesh: replicated(inputs, mesh)` -> `input_fn=lambda mod, inputs, mesh: replicated(inputs, mesh)`
mutant: three-arg-output-fn: `output_fn=lambda outputs, mesh: outputs` -> `output_fn=lambda mod, outputs, mesh: outputs`

Deprecations a name-level list misses: the function is fine, one way of calling it warns (and a
`-W error` run or a warnings-as-errors test suite dies on it). `get_state_dict(submodules=)`
warns and still filters (torch/distributed/checkpoint/state_dict.py, `_verify_options`: "Getting
submodules only model/optim state_dict is deprecated"); filter the returned dict instead.
`distribute_module` counts its hooks' parameters (torch/distributed/tensor/_api.py: "Deprecating
input_fn that takes two arguments"): two warn, three do not.
"""

import warnings

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, distribute_module

init()
world = dist.get_world_size()


def deprecations(call: object) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()  # type: ignore[operator]
    return result, [str(w.message) for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))]


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
optim = torch.optim.SGD(model.parameters(), lr=0.1)
(model_sd, _), warned = deprecations(lambda: get_state_dict(model, [optim], submodules={model[0]}))
assert any("submodules" in w and "deprecated" in w for w in warned), warned
assert model_sd and all(k.startswith("0.") for k in model_sd), sorted(model_sd)  # it still filters
_, plain = deprecations(lambda: get_state_dict(model, [optim]))
assert not [w for w in plain if "submodules" in w], plain

mesh = init_device_mesh("cpu", (world,))


def replicated(inputs: tuple, mesh: object) -> tuple:  # distribute_module's parameters are DTensors now
    return tuple(DTensor.from_local(t, mesh, [Replicate()]) for t in inputs)  # type: ignore[arg-type]


old_in, in_warned = deprecations(
    lambda: distribute_module(nn.Linear(4, 4), mesh, input_fn=lambda inputs, mesh: replicated(inputs, mesh))
)
assert any("input_fn that takes two arguments" in w for w in in_warned), in_warned
old_out, out_warned = deprecations(
    lambda: distribute_module(nn.Linear(4, 4), mesh, output_fn=lambda outputs, mesh: outputs)
)
assert any("output_fn that takes two arguments" in w for w in out_warned), out_warned
new, new_warned = deprecations(lambda: distribute_module(
    nn.Linear(4, 4), mesh, input_fn=lambda mod, inputs, mesh: replicated(inputs, mesh),
    output_fn=lambda mod, outputs, mesh: outputs.to_local(),
))
assert not new_warned, new_warned
x = torch.ones(1, 4)
assert isinstance(old_in(x), DTensor)  # type: ignore[operator]  # the 2-argument hook still runs
assert type(new(x)) is torch.Tensor  # type: ignore[operator]  # both 3-argument hooks run

say(f"torch {torch.__version__}: get_state_dict(submodules=) warns and keeps {len(model_sd)} keys of model[0]; "
    "2-argument input_fn/output_fn warn, 3-argument ones do not")
shutdown()

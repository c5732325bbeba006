"""
name: mesh-flatten-slice
claim: Slicing a flattened DeviceMesh dim from the root mesh (mesh._flatten("dp_cp") then mesh["dp_cp"]) warns from 2.10 that it "will be deprecated" and that users need to keep the flattened mesh themselves (before 2.10 it is silent); using the mesh _flatten returns warns nothing.
backs: pitfalls
world_size: 2
mutant: silent-on-215: `WARNS = torch_release() >= (2, 10)` -> `WARNS = torch_release() >= (2, 16)`
mutant: keep-the-flattened: `sliced = mesh["ab"]  # from the root` -> `sliced = flat  # from the root`

torch 2.15 still returns the sub-mesh, with a UserWarning ("Slicing a flattened dim from
root mesh will be deprecated in PT 2.11. Users need to bookkeep the flattened mesh
directly."): keep the object `_flatten` returns. (assets/traps.md) The warning is new in 2.10:
2.9.1 returned the same sub-mesh silently (the release matrix).
"""

import warnings

import torch
from _dist import init, say, shutdown, torch_release
from torch.distributed.device_mesh import init_device_mesh

WARNS = torch_release() >= (2, 10)
device = init()
mesh = init_device_mesh(device.type, (1, 2), mesh_dim_names=("a", "b"))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    flat = mesh["a", "b"]._flatten("ab")
    clean = len(caught)
    sliced = mesh["ab"]  # from the root
messages = [str(w.message) for w in caught[clean:]]
assert clean == 0, [str(w.message) for w in caught]
assert sliced.size() == 2
deprecated = [m for m in messages if "Slicing a flattened dim from root mesh will be deprecated" in m]
assert bool(deprecated) == WARNS, (torch.__version__, messages)
say(f"torch {torch.__version__}: mesh['ab'] after _flatten: {messages or 'no warning'}")
shutdown()

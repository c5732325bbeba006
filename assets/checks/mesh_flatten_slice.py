"""
name: mesh-flatten-slice
claim: Slicing a flattened DeviceMesh dim from the root mesh (mesh._flatten("dp_cp") then mesh["dp_cp"]) warns that it "will be deprecated" and that users need to keep the flattened mesh themselves; using the mesh _flatten returns warns nothing.
backs: pitfalls
world_size: 2
mutant: keep-the-flattened: `sliced = mesh["ab"]  # from the root` -> `sliced = flat  # from the root`

torch 2.15 still returns the sub-mesh, with a UserWarning ("Slicing a flattened dim from
root mesh will be deprecated in PT 2.11. Users need to bookkeep the flattened mesh
directly."): keep the object `_flatten` returns. (assets/traps.md)
"""

import warnings

from _dist import init, say, shutdown
from torch.distributed.device_mesh import init_device_mesh

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
assert any("Slicing a flattened dim from root mesh will be deprecated" in m for m in messages), messages
say(f"mesh['ab'] after _flatten: {messages}")
shutdown()

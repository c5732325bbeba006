"""
name: reshard-after-forward-default
claim: fully_shard's reshard_after_forward defaults to None: True for every module but the root, which keeps its parameters unsharded from forward to backward.
backs: migration-map
world_size: 2
mutant: root-reshards-by-default: `fully_shard(model, **({} if root is None else {"reshard_after_forward": root}))` -> `fully_shard(model, reshard_after_forward=True if root is None else root)`

After a forward pass with the default, each block's parameters are sharded again
(DTensors) while the root's own parameters (inp, head) stay unsharded until backward;
`reshard_after_forward=True` on the root reshards it too, `False` on a block keeps it
(FSDP1's SHARD_GRAD_OP).
"""

import inspect

import torch
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

init()
assert inspect.signature(fully_shard).parameters["reshard_after_forward"].default is None


def sharded_after_forward(root: bool | None, block: bool | None) -> tuple[bool, bool]:
    model = Stack()
    for b in model.blocks:
        fully_shard(b, **({} if block is None else {"reshard_after_forward": block}))
    fully_shard(model, **({} if root is None else {"reshard_after_forward": root}))
    out = model(torch.randn(4, 16))
    state = isinstance(model.head.weight, DTensor), isinstance(model.blocks[0].lin.weight, DTensor)
    out.sum().backward()
    return state


assert sharded_after_forward(None, None) == (False, True)  # root kept, blocks resharded
assert sharded_after_forward(True, None) == (True, True)
assert sharded_after_forward(None, False) == (False, False)
say("default None: after forward the root's parameters stay unsharded, the blocks' are resharded; "
    "True on the root reshards it; False on a block keeps it")
shutdown()

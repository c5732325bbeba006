"""
name: reshard-after-forward-default
claim: fully_shard's reshard_after_forward defaults to None from 2.8: True for every module but the root, which keeps its parameters unsharded from forward to backward; before 2.8 it defaults to True and the root keeps its parameters unsharded after forward even when passed True.
backs: migration-map
world_size: 2
mutant: none-default-from-216: `NONE_DEFAULT = torch_release() >= (2, 8)` -> `NONE_DEFAULT = torch_release() >= (2, 16)`
mutant: root-reshards-by-default: `fully_shard(model, **({} if root is None else {"reshard_after_forward": root}))` -> `fully_shard(model, reshard_after_forward=True if root is None else root)`

After a forward pass with the default, each block's parameters are sharded again
(DTensors) while the root's own parameters (inp, head) stay unsharded until backward;
`reshard_after_forward=True` on the root reshards it too, `False` on a block keeps it
(FSDP1's SHARD_GRAD_OP). Before 2.8 the default was True, and the root's lazy init dropped
its post-forward reshard whatever it was passed (`_fsdp_state.py` `_lazy_init`: "For the root,
do not reshard after forward"): the same default behaviour, but True on the root kept it
unsharded too.
"""

import inspect

import torch
from _dist import Stack, init, say, shutdown, torch_release
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

NONE_DEFAULT = torch_release() >= (2, 8)  # 2.8 made it None, and True on the root a real choice
init()
default = inspect.signature(fully_shard).parameters["reshard_after_forward"].default
assert default is (None if NONE_DEFAULT else True), default


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
assert sharded_after_forward(True, None) == (NONE_DEFAULT, True)  # before 2.8 the root ignores True
assert sharded_after_forward(None, False) == (False, False)
say(f"torch {torch.__version__}: default {default}: after forward the root's parameters stay unsharded, the blocks' are resharded; "
    f"True on the root {'reshards it' if NONE_DEFAULT else 'is ignored'}; False on a block keeps it")
shutdown()

"""
name: fsdp1-full-shard-root
claim: FSDP1's FULL_SHARD already keeps the root's parameters unsharded from forward to backward and reshards every other unit after forward, as FSDP2's default reshard_after_forward=None does: the migration map's FULL_SHARD row is that default, no `True` on the root.
backs: migration-map
world_size: 2
rests_on: torch/distributed/fsdp/_runtime_utils.py:497 `not state._is_root`
mutant: root-freed: `KEEP_ROOT = "not state._is_root"  #` -> `KEEP_ROOT = "True"  #`
mutant: shard-grad-op: `sharding_strategy=ShardingStrategy.FULL_SHARD,  # the row` -> `sharding_strategy=ShardingStrategy.SHARD_GRAD_OP,  # the row`

FSDP1 decides in `_post_forward_reshard` (torch/distributed/fsdp/_runtime_utils.py:493-499 in
2.15): `free_unsharded_flat_param = not state._is_root and handle._sharding_strategy in
RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES`. Observed here: after a forward with gradients, the
root unit's unsharded flat parameter still has its storage, each block's has been freed
(storage size 0). The `root-freed` mutant reinstalls that function (in this process) with the
root freed too: the root check fails; `shard-grad-op` keeps the blocks too.
"""

import inspect

import torch
import torch.distributed.fsdp._runtime_utils as runtime
import torch.distributed.fsdp.fully_sharded_data_parallel as fsdp_module
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import ShardingStrategy
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

# FSDP1's rule, read from the installed torch and reinstalled as is; the root-freed mutant frees the root too.
KEEP_ROOT = "not state._is_root"  # the root's unsharded parameters are not freed after forward
source = inspect.getsource(runtime._post_forward_reshard)
assert "not state._is_root" in source, "FSDP1's post-forward rule changed: re-read _post_forward_reshard"
source = source.replace("not state._is_root", KEEP_ROOT)
exec(compile("from typing import no_type_check\n" + source, runtime.__file__, "exec"), runtime.__dict__)
fsdp_module._post_forward_reshard = runtime._post_forward_reshard  # FSDP.forward imported it by name

device = init()
torch.manual_seed(0)
model = FSDP(
    Stack(),
    sharding_strategy=ShardingStrategy.FULL_SHARD,  # the row
    auto_wrap_policy=ModuleWrapPolicy({type(Stack().blocks[0])}),
    device_id=device,
    use_orig_params=True,
)
model(torch.randn(4, 16, device=device)).sum()


def kept(unit: FSDP) -> bool:
    """Whether the unit's unsharded flat parameter still holds memory after forward."""
    return unit._handle.flat_param._full_param_padded.untyped_storage().size() > 0


blocks = [m for m in model.modules() if isinstance(m, FSDP) and m is not model]
assert len(blocks) == 2
root_kept, blocks_kept = kept(model), [kept(b) for b in blocks]
assert root_kept, "FULL_SHARD freed the root's parameters after forward"
assert not any(blocks_kept), f"FULL_SHARD kept a block's parameters after forward: {blocks_kept}"
say(f"FSDP1 FULL_SHARD after forward: root unsharded kept {root_kept}, blocks kept {blocks_kept}")
shutdown()

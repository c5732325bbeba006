"""
name: load-into-meta-without-to-empty
claim: On a meta-built, fully_shard-ed model, set_model_state_dict(full_state_dict=True, broadcast_from_rank0=True) without to_empty fills the parameters with the pretrained values; from 2.15 the persistent buffers too (before 2.15 they are left on meta); a non-persistent buffer, in no state dict, stays on meta, which is what to_empty is still needed for.
backs: patterns
world_size: 2
mutant: buffers-loaded-earlier: `BUFFERS_LOADED = torch_release() >= (2, 15)` -> `BUFFERS_LOADED = torch_release() >= (2, 16)`
mutant: with-to-empty: `# no to_empty here` -> `model.to_empty(device=device)`

Backs the pretrained-into-meta pattern's "why to_empty" note. Rank 0 holds the pretrained
state dict, the other rank passes {}; the model was built on meta and sharded, and
`to_empty` is skipped. Asserted: every parameter's full tensor equals the pretrained one;
the persistent buffer is loaded (2.15) or still meta (earlier releases: the 2.13
fact-check found it so); the non-persistent buffer is still meta (no state dict holds it,
so only `to_empty` plus an init allocates it).
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, shutdown, torch_release
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.fsdp import fully_shard

BUFFERS_LOADED = torch_release() >= (2, 15)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("scale", torch.full((8,), 2.0))
        self.register_buffer("table", torch.arange(8.0), persistent=False)


device = init()
torch.manual_seed(0)
pretrained = Net()
with torch.device("meta"):
    model = Net()
fully_shard(model)
# no to_empty here
full = pretrained.state_dict() if dist.get_rank() == 0 else {}
set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
for name, p in model.named_parameters():
    assert not p.is_meta and torch.equal(p.full_tensor().cpu(), pretrained.get_parameter(name)), name
if BUFFERS_LOADED:
    assert not model.scale.is_meta and torch.equal(model.scale.cpu(), pretrained.scale), model.scale
else:
    assert model.scale.is_meta, "the persistent buffer was loaded"
assert model.table.is_meta, "the non-persistent buffer was allocated without to_empty"
say(f"without to_empty: parameters loaded; persistent buffer {'loaded' if BUFFERS_LOADED else 'still meta'}; "
    "non-persistent buffer still meta")
shutdown()

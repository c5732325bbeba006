"""
name: load-into-meta-without-to-empty
claim: On a meta-built, fully_shard-ed model, set_model_state_dict(full_state_dict=True, broadcast_from_rank0=True) without to_empty fills the parameters and the persistent buffers with the pretrained values; a non-persistent buffer, in no state dict, stays on meta, which is what to_empty is still needed for.
backs: patterns
world_size: 2
mutant: scale-not-saved: `full = pretrained.state_dict() if` -> `full = {k: v for k, v in pretrained.state_dict().items() if k != "scale"} if`; `set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))` -> `set_model_state_dict(model, full, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=False))`
mutant: table-persistent: `torch.arange(8.0), persistent=False)` -> `torch.arange(8.0), persistent=True)`
mutant: with-to-empty: `# no to_empty here` -> `model.to_empty(device=device)`

Backs the pretrained-into-meta pattern's "why to_empty" note. Rank 0 holds the pretrained
state dict, the other rank passes {}; the model was built on meta and sharded, and
`to_empty` is skipped. Asserted: every parameter's full tensor equals the pretrained one;
the persistent buffer is loaded too (the 2.13 fact-check had found it left on meta; the
release matrix's runs of this check on 2.13.0, 2.14.1 and 2.15.0 load it); the non-persistent
buffer is still meta (no state dict holds it, so only `to_empty` plus an init allocates it).
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.fsdp import fully_shard


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
assert not model.scale.is_meta and torch.equal(model.scale.cpu(), pretrained.scale), "the persistent buffer: meta"
assert model.table.is_meta, "the non-persistent buffer was allocated without to_empty"
say(f"torch {torch.__version__}, without to_empty: parameters and the persistent buffer loaded; "
    "non-persistent buffer still meta")
shutdown()

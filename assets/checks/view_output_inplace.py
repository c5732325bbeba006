"""
name: view-output-inplace
claim: An FSDP2 module whose forward returns a view tensor makes fully_shard warn (UserWarning "returned a view tensor. An in-place op on this view (e.g., `x += y`) will silently drop the pre-backward hook and skip the all-gather"); returning a non-view (or a .clone()) does not warn.
backs: pitfalls
world_size: 2
rests_on: torch/distributed/fsdp/_fully_shard/_fsdp_state.py:592 `"drop the pre-backward hook and skip the all-gather, which "`
mutant: clone-returned: `return out.view(-1, 8)  # a view` -> `return out.view(-1, 8).clone()  # a view`

The consequence (the pre-backward hook FSDP2 registers on the output is lost when an
in-place op rebases the view, so the block's parameters are not all-gathered for backward)
is the warning's own words in torch 2.15 (_fsdp_state.py, `_register_pre_backward_hook`);
this check asserts the warning and that a non-view output is quiet. Fix: out-of-place ops
(`out = out + y`) or `.clone()` the output. (assets/traps.md)
"""

import warnings

import torch
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.fsdp import fully_shard


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.lin(x)
        return out.view(-1, 8)  # a view


class Plain(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


init()
messages = {}
for label, cls in (("view", Block), ("plain", Plain)):
    model = nn.Sequential(cls(), nn.Linear(8, 8))
    fully_shard(model[0])
    fully_shard(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model(torch.randn(4, 8)).sum().backward()
    messages[label] = [str(w.message) for w in caught if "returned a view tensor" in str(w.message)]
assert messages["view"] and "will silently drop the pre-backward hook" in messages["view"][0], messages
assert not messages["plain"], messages
say(f"a view output warns: {messages['view'][0][:160]}; a plain output does not")
shutdown()

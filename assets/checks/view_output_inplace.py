"""
name: view-output-inplace
claim: An FSDP2 module whose forward returns a view tensor makes fully_shard warn from 2.13 (UserWarning "returned a view tensor. An in-place op on this view (e.g., `x += y`) will silently drop the pre-backward hook and skip the all-gather"); returning a non-view (or a .clone()) does not warn. Before 2.13 neither warns: the trap is silent.
backs: pitfalls
world_size: 2
rests_on: torch/distributed/fsdp/_fully_shard/_fsdp_state.py:592 `"drop the pre-backward hook and skip the all-gather, which "`
mutant: silent-on-215: `WARNS = torch_release() >= (2, 13)` -> `WARNS = torch_release() >= (2, 16)`
mutant: clone-returned: `return out.view(-1, 8)  # a view` -> `return out.view(-1, 8).clone()  # a view`

The consequence (the pre-backward hook FSDP2 registers on the output is lost when an
in-place op rebases the view, so the block's parameters are not all-gathered for backward)
is the warning's own words in torch 2.15 (_fsdp_state.py, `_register_pre_backward_hook`);
this check asserts the warning (from 2.13; earlier releases say nothing, view or not) and that a
non-view output is quiet. Fix: out-of-place ops
(`out = out + y`) or `.clone()` the output. (assets/traps.md)
"""

import warnings

import torch
import torch.nn as nn
from _dist import init, say, shutdown, torch_release
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


WARNS = torch_release() >= (2, 13)  # the release matrix: 2.11.0 and 2.12.1 returned views silently
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
if WARNS:
    assert messages["view"] and "will silently drop the pre-backward hook" in messages["view"][0], messages
else:
    assert not messages["view"], f"torch {torch.__version__} warned: {messages['view']}"
assert not messages["plain"], messages
say(f"torch {torch.__version__}: a view output " + (f"warns: {messages['view'][0][:160]}" if WARNS else "is silent")
    + "; a plain output does not warn")
shutdown()

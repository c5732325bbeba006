"""
name: fully-shard-refusals
claim: copy.deepcopy of a module after fully_shard raises AssertionError "FSDP does not support deepcopy" (an EMA copy must be made before sharding, or kept as tensors), and fully_shard refuses a 0-d (scalar) parameter with ValueError "Change NAME to a 1D tensor with numel equal to 1".
backs: pitfalls
world_size: 2
mutant: copy-before-sharding: `ema = copy.deepcopy(model)  # after fully_shard` -> `ema = copy.deepcopy(Stack())  # after fully_shard`
mutant: one-element-scale: `self.scale = nn.Parameter(torch.tensor(1.0))` -> `self.scale = nn.Parameter(torch.ones(1))`

Both refusals are what a user meets when porting DDP code: an EMA or teacher model made
with `copy.deepcopy(model)` after `fully_shard`, and a learned scalar (a temperature, a
gate) declared `nn.Parameter(torch.tensor(1.0))`. The deepcopy made before sharding (the
mutant) works; a 1-element 1-D parameter (the mutant) shards. Messages as torch 2.15
prints them. (assets/traps.md)
"""

import copy

import torch
import torch.nn as nn
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import fully_shard


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = nn.Parameter(torch.tensor(1.0))


init()
model = Stack()
fully_shard(model)
problems = []
try:
    ema = copy.deepcopy(model)  # after fully_shard
    problems.append("deepcopy of a sharded module worked")
except AssertionError as exc:
    if "FSDP does not support deepcopy" not in str(exc):
        problems.append(f"deepcopy raised another message: {exc}")
    say(f"deepcopy after fully_shard: AssertionError: {exc}")
try:
    fully_shard(Scaled())
    problems.append("fully_shard took a 0-d parameter")
except ValueError as exc:
    if "Change scale to a 1D tensor with numel equal to 1" not in str(exc):
        problems.append(f"the 0-d refusal says something else: {exc}")
    say(f"0-d parameter: ValueError: {exc}")
assert not problems, problems
shutdown()

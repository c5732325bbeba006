"""
name: init-cuda-rng-tracker
claim: On CUDA the recipe's init_weights equals the eager init with the same seed, and DTensor's RNG tracker overrides per-rank seeds for random ops on sharded DTensors (it copies rank 0's RNG state and logs that the same seed should be used).
backs: pitfalls
world_size: 2
requires: cuda
rests_on: torch/distributed/tensor/_random.py:216 `DTensor is synchronizing RNG states of every rank with the state from rank 0.`
mutant: one-seed: `torch.manual_seed(rank)  # per-rank` -> `torch.manual_seed(0)  # per-rank`

GPU only (NCCL, one GPU per rank; skipped on a CPU-only machine). On CUDA the first random op
on a DTensor creates an OffsetBasedRNGTracker (torch/distributed/tensor/_dispatch.py:342-356)
with run_state_sync=True: it broadcasts rank 0's RNG state to every rank and, where a rank's
state differed, logs "DTensor is synchronizing RNG states of every rank with the state from
rank 0. This behavior is deprecated. Please call `torch.manual_seed()` on every rank ... with
the same seed" (torch/distributed/tensor/_random.py:209-221). On CPU it cannot exist
(_random.py:203-207 raises for a cpu mesh; is_rng_supported_mesh warns and returns False).
Asserted: (1) SKILL.md's `init_weights` (verbatim; it runs no DTensor random op) gives every
parameter the eager CUDA init's value with the same seed; (2) a reset_parameters loop on the
sharded DTensors after `torch.manual_seed(rank)` makes rank 1 log the tracker's message, and
the two shards still differ (each is its slice of one draw).
"""

import logging

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import distribute_tensor


def init_weights(model: nn.Module, seed: int = 0) -> None:
    """After fully_shard + to_empty: each module's init on full tensors, one seed; each rank keeps its slice."""
    torch.manual_seed(seed)  # the same seed on every rank
    done: set[int] = set()  # tied weights keep their first owner's init

    def visit(m: nn.Module) -> None:  # children first, as __init__ builds them
        for child in m.children():
            visit(child)
        own = dict(m.named_parameters(recurse=False))
        init = getattr(m, "reset_parameters", None) or getattr(m, "_reset_parameters", None)
        if own and not init:
            raise TypeError(f"{type(m).__name__} has parameters but no reset_parameters()")
        full = {n: torch.empty(p.shape, dtype=p.dtype, device=p.device) for n, p in own.items()}
        if init:
            m._parameters.update(full)  # init full plain tensors, then put the shards back
            init()
            m._parameters.update(own)
        with torch.no_grad():
            for n, p in own.items():
                if id(p) not in done:
                    done.add(id(p))  # this rank's slice, no communication
                    p.copy_(distribute_tensor(full[n], p.device_mesh, p.placements, src_data_rank=None))
        if hasattr(m, "init_buffers"):
            m.init_buffers()  # tables computed in __init__ (RoPE) were on meta

    visit(model)


class Catch(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


device = init("nccl")
rank = dist.get_rank()
caught = Catch()
logging.getLogger("torch.distributed.tensor._random").addHandler(caught)

torch.manual_seed(0)
with torch.device(device):
    eager = Stack()
with torch.device("meta"):
    model = Stack()
for block in model.blocks:
    fully_shard(block)
fully_shard(model)
model.to_empty(device=device)
init_weights(model)
for name, p in model.named_parameters():
    assert torch.equal(p.full_tensor(), eager.get_parameter(name)), f"{name} differs from the eager CUDA init"
assert not caught.messages, caught.messages  # no DTensor random op ran

torch.manual_seed(rank)  # per-rank
for m in model.modules():
    if hasattr(m, "reset_parameters"):
        m.reset_parameters()
logged = torch.tensor([float(any("synchronizing RNG states" in m for m in caught.messages))], device=device)
dist.all_reduce(logged)
assert logged.item() >= 1, "no rank logged the RNG tracker's state synchronisation"
local = model.head.weight.to_local()
shards = [torch.empty_like(local) for _ in range(2)]
dist.all_gather(shards, local.contiguous())
assert not torch.equal(shards[0], shards[1]), "the tracker gave both ranks the same shard"
say("CUDA: init_weights equals the eager init; per-rank seeds on DTensors: the tracker synchronised the RNG "
    "state from rank 0 and logged it; shards distinct")
shutdown()

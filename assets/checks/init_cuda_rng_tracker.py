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
    """After fully_shard + to_empty: __init__'s inits replayed on full tensors, one seed; each rank keeps its slice."""
    torch.manual_seed(seed)  # the same seed on every rank
    done: set[int] = set()  # tied weights keep their first owner's init

    def visit(m: nn.Module, held: list | None) -> None:  # children first, as __init__ builds them
        cls = type(m)  # not an init a CheckpointWrapper forwards from its block (run twice)
        init = next((getattr(m, n) for n in ("reset_parameters", "_reset_parameters") if hasattr(cls, n)), None)
        hf = hasattr(cls, "_init_weights")  # Hugging Face style: __init__ ends with apply(self._init_weights)
        clones = isinstance(m, (nn.TransformerEncoder, nn.TransformerDecoder))  # deep copies of one layer
        # A parent's init may write its children (nn.Transformer, HF, MHA): hold them full until it ran.
        hold = held is None and bool(init or hf or clones) and any(True for c in m.children() for _ in c.parameters())
        inner = [] if hold else held
        for child in [m.layers[0], *list(m.children())[1:]] if clones else m.children():
            visit(child, inner)
        for layer in m.layers[1:] if clones else ():  # copies of layer 0's values: no draws, as deepcopy
            for a, b in zip(m.layers[0].modules(), layer.modules()):
                for n, p in b.named_parameters(recurse=False):
                    b._parameters[n] = a._parameters[n].clone()
                    inner.append((b, n, p, b._parameters[n]))
        mine = [(m, n, p, torch.full(p.shape, torch.nan, dtype=p.dtype, device=p.device))
                for n, p in m.named_parameters(recurse=False)]
        for _, n, _, full in mine:
            m._parameters[n] = full  # init full plain tensors, then put the shards back
        if init:
            init()
        elif hf:
            m.apply(m._init_weights)
        if hasattr(m, "init_buffers"):
            m.init_buffers()  # tables computed in __init__ (RoPE) were on meta
        if held is not None:  # an ancestor's init is to come: stay full, tied as __init__ ties them
            first = {id(p): full for _, _, p, full in reversed(held)}
            for _, n, p, _ in mine:
                m._parameters[n] = first.get(id(p), m._parameters[n])
            held += mine
            return
        with torch.no_grad():
            for sub, n, p, full in (inner or []) + mine:
                sub._parameters[n] = p
                if full.isnan().any():
                    raise TypeError(f"{type(sub).__name__}.{n}: no init writes it; give {type(sub).__name__} "
                                    "a reset_parameters() (or load the weights: pretrained-into-meta)")
                if id(p) not in done:
                    done.add(id(p))  # this rank's slice, no communication
                    p.copy_(distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None))

    visit(model, None)


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

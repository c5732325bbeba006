"""
name: state-dict-collectives
claim: model.state_dict() and the sharded get_model_state_dict return at once on one rank (each rank's DTensor shards); only full_state_dict=True is a collective every rank must call, and with cpu_offload=True only rank 0 gets the tensors (the other ranks an empty dict).
backs: pitfalls
world_size: 2
requires: stated-ranks
mutant: every-rank-calls: `    store.wait(["done"], wait)` -> `    get_model_state_dict(model, options=StateDictOptions(full_state_dict=True)) and store.wait(["done"], wait)`
mutant: offload-off: `full_state_dict=True, cpu_offload=True))` -> `full_state_dict=True, cpu_offload=False))`
mutant: sharded-alone: `get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))` -> `get_model_state_dict(model)`

Rank 0 alone calls `model.state_dict()` and the default (sharded) `get_model_state_dict`:
both return immediately, with DTensor values whose local part is rank 0's shard (what a
`torch.save` on rank 0 would store). Rank 0 alone asking for the full state dict blocks in
an all-gather: after 3 s it has neither returned nor raised (it would wait for the group's timeout,
30 min on gloo); with every rank calling it, it completes. With `cpu_offload=True` the
full dict lands on rank 0 only (torch/distributed/checkpoint/state_dict.py,
`_maybe_full_or_cpu_state_dict`: `ranks_only=(0,)` when cpu_offload): rank 1 gets
`{}`, so code that reads it on every rank must not offload, or must broadcast.
"""

import datetime
import os
import sys
import threading

import torch.distributed as dist
from _dist import Stack, init, say
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
)
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

init()
rank = dist.get_rank()
model = Stack()
fully_shard(model)
store = dist.distributed_c10d._get_default_store()
wait = datetime.timedelta(seconds=60)

# Every rank: a full state dict is a collective and works when all call it.
full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
if rank == 0:
    plain = model.state_dict()
    assert isinstance(plain["inp.weight"], DTensor) and plain["inp.weight"].to_local().shape[0] == 8
    sharded = get_model_state_dict(model)
    assert isinstance(sharded["inp.weight"], DTensor)
    assert full["inp.weight"].shape == (16, 16) and not isinstance(full["inp.weight"], DTensor)
    # Rank 0 alone: the full state dict waits for rank 1, which never joins.
    outcome: list[str] = []

    def alone() -> None:
        try:
            get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
            outcome.append("returned")
        except Exception as exc:  # noqa: BLE001 - the all-gather's error, whatever its type
            outcome.append(type(exc).__name__)

    thread = threading.Thread(target=alone, daemon=True)
    thread.start()
    thread.join(timeout=3)
    assert thread.is_alive() and not outcome, f"a full state dict on rank 0 alone did not block: {outcome}"
    say("rank 0 alone: state_dict() and sharded get_model_state_dict returned DTensor shards at once; "
        "full_state_dict=True was still blocked after 3 s")
    store.set("done", "1")
else:
    assert full == {}, f"rank {rank} got {len(full)} entries from a cpu_offload=True full state dict"
    store.wait(["done"], wait)
# Rank 0 has a collective left pending: leave without another one.
sys.stdout.flush()
os._exit(0)

"""
name: dcp-needs-shared-dir
claim: A DCP checkpoint directory must be one directory every rank sees; saved to per-rank local directories it cannot be loaded.
backs: pitfalls
world_size: 2
requires: stated-ranks
mutant: local-is-shared: `local = tempfile.mkdtemp(prefix=f"dcp-local{rank}-")` -> `local = shared[0]`
mutant: load-from-local: `dcp.load(state, checkpoint_id=shared[0])` -> `dcp.load(state, checkpoint_id=local)`

Each rank writes its own shard files, and only the coordinator (rank 0) writes the
`.metadata` that load needs. Here each rank saves to its own directory, as on node-local
disks: rank 1's directory has shards but no `.metadata`, and loading raises CheckpointException on every rank. Saved to one
shared directory, the same state loads back.
"""

import os
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from _dist import Stack, init, say, shutdown
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.fsdp import fully_shard

init()
rank = dist.get_rank()
model = Stack()
fully_shard(model)
shared = [tempfile.mkdtemp(prefix="dcp-shared-") if rank == 0 else ""]
dist.broadcast_object_list(shared, src=0)
local = tempfile.mkdtemp(prefix=f"dcp-local{rank}-")  # a "node-local" disk per rank

dcp.save({"model": model.state_dict()}, checkpoint_id=local)
has_metadata = os.path.exists(os.path.join(local, ".metadata"))
assert has_metadata == (rank == 0), (rank, os.listdir(local))
try:
    dcp.load({"model": model.state_dict()}, checkpoint_id=local)
    failed = ""
except CheckpointException as exc:  # a BaseException: it carries each failing rank's error
    failed = type(exc).__name__
flags = [None, None]
dist.all_gather_object(flags, failed)
assert any(flags), f"loading from per-rank directories worked: {flags}"

dcp.save({"model": model.state_dict()}, checkpoint_id=shared[0])
expected = {k: v.full_tensor().clone() for k, v in model.state_dict().items()}
with torch.no_grad():
    for p in model.parameters():
        p.zero_()
state = {"model": model.state_dict()}
dcp.load(state, checkpoint_id=shared[0])
assert all(torch.equal(v.full_tensor(), expected[k]) for k, v in model.state_dict().items())
say(f"per-rank directories: .metadata only on rank 0, load failed ({flags}); shared directory: round trip exact")
shutdown()

"""
name: dcp-format-utils-cli
claim: The DCP converter writes the whole checkpoint as saved (a {"app": {"model", "optim"}} checkpoint gives that nested dict, optimizer included) and runs as `python -m torch.distributed.checkpoint.format_utils dcp_to_torch SRC DST` (mode first); the upstream recipe's form `format_utils -m SRC DST MODE` (references/checkpoint.md, Formats) fails, and so does the mode name dcp_to_torch_save.
backs: doc-bug
world_size: 1
mutant: upstream-form-works: `MODULE + ["dcp_to_torch", ckpt, out], check=True` -> `MODULE + ["-m", ckpt, out, "dcp_to_torch"], check=True` => CalledProcessError
mutant: model-only: `dcp.save(nested, checkpoint_id=` -> `dcp.save({"app": {"model": state}}, checkpoint_id=`
mutant: old-mode-name: `MODULE + ["dcp_to_torch_save", ckpt, out]` -> `MODULE + ["dcp_to_torch", ckpt, out]`

Records a doc-bug in the generated references: the Distributed Checkpoint recipe
(pytorch/tutorials recipes_source/distributed_checkpoint_recipe.rst, "Formats") shows
`python -m torch.distributed.checkpoint.format_utils -m <checkpoint location> <location
to write formats to> <mode>`, but the module's argparse takes `mode src dst`, with mode
`torch_to_dcp` or `dcp_to_torch`. The references are generated from upstream, so the
text stays; this check keeps the correction true. It saves a small DCP checkpoint,
converts it with the working command, loads the torch.save file and compares, then runs
the upstream form and the `dcp_to_torch_save` mode name and asserts both are refused. A
checkpoint saved as `{"app": {"model": ..., "optim": ...}}` converts whole: the file holds
both, nested (`torch.load(out)["app"]["model"]` is the model).
"""

import os
import subprocess
import sys
import tempfile

import torch
import torch.distributed.checkpoint as dcp
from _dist import say

MODULE = [sys.executable, "-m", "torch.distributed.checkpoint.format_utils"]
state = {"weight": torch.arange(6.0).reshape(2, 3), "bias": torch.ones(2)}
with tempfile.TemporaryDirectory() as scratch:
    ckpt, out = os.path.join(scratch, "ckpt"), os.path.join(scratch, "model.pt")
    dcp.save(state, checkpoint_id=ckpt, no_dist=True)
    subprocess.run(MODULE + ["dcp_to_torch", ckpt, out], check=True, capture_output=True, text=True, timeout=120)
    loaded = torch.load(out)
    assert all(torch.equal(loaded[k], v) for k, v in state.items()), loaded
    # A training checkpoint (the dcp-checkpoint pattern's {"app": ...}) converts whole, nested as saved,
    # optimizer state included: the model is one key down, not the file itself.
    nested = {"app": {"model": state, "optim": {"exp_avg.weight": torch.zeros(2, 3)}}}
    dcp.save(nested, checkpoint_id=ckpt + "-app", no_dist=True)
    subprocess.run(MODULE + ["dcp_to_torch", ckpt + "-app", out], check=True, capture_output=True, text=True,
                   timeout=120)
    whole = torch.load(out)
    assert list(whole) == ["app"] and sorted(whole["app"]) == ["model", "optim"], whole.keys()
    assert all(torch.equal(whole["app"]["model"][k], v) for k, v in state.items())
    upstream = subprocess.run(MODULE + ["-m", ckpt, out, "dcp_to_torch"], capture_output=True, text=True, timeout=120, check=False)
    old_name = subprocess.run(MODULE + ["dcp_to_torch_save", ckpt, out], capture_output=True, text=True, timeout=120, check=False)
assert upstream.returncode == 2 and "error" in upstream.stderr, upstream.stderr
assert old_name.returncode == 2 and "invalid choice" in old_name.stderr, old_name.stderr
say("format_utils dcp_to_torch SRC DST converted and round-tripped; '-m SRC DST MODE' and 'dcp_to_torch_save' "
    f"are refused: {upstream.stderr.strip().splitlines()[-1][:100]}")

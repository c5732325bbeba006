"""Call each deprecated API that api-drift.md lists, cheaply on CPU, and report the warnings it emits.

Run as a script (`python tests/deprecated_calls.py GROUP`) by tests/test_deprecations_run.py, in its own
process: it creates a process group (one per process) and prints one JSON object
{name: {"warnings": [[category, message], ...], "error": "..." or null}}.
GROUP "gloo": a real 1-rank gloo group (file store). GROUP "fake": torch's fake backend at world size 2,
for the one warning that needs more than one rank (FSDP1's NO_SHARD is clamped silently at world size 1,
torch/distributed/fsdp/_init_utils.py `_init_core_state`).

RECIPES maps each listed name to the statements that call it (after PRELUDE); a call may fail after it
warned (a reduce_scatter gloo does not implement): the warning is what is checked, the error is reported.
"""

from __future__ import annotations

import json
import sys
import tempfile
import warnings

PRELUDE = """
import torch
import torch.nn as nn
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.distributed._functional_collectives as funcol
import torch.distributed.nn.functional as dnnf
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType, fully_shard
t = torch.ones(2)
out = torch.zeros(2)
"""

_FSDP1 = "model = FSDP(nn.Linear(2, 2), device_id=torch.device('cpu'))\n"
_OPTIM = (_FSDP1 + "optim = torch.optim.SGD(model.parameters(), lr=0.1)\n"
          "model(torch.ones(1, 2)).sum().backward()\noptim.step()\n")
_FUNCOL = "group = dist.group.WORLD\n"

# name -> (process group kind, statements)
RECIPES: dict[str, tuple[str, str]] = {
    "torch.distributed._functional_collectives.all_gather_into_tensor_coalesced": (
        "gloo", _FUNCOL + "[funcol.wait_tensor(r) for r in funcol.all_gather_into_tensor_coalesced([t], group)]"),
    "torch.distributed._functional_collectives.all_gather_tensor": (
        "gloo", _FUNCOL + "funcol.wait_tensor(funcol.all_gather_tensor(t, 0, group))"),
    "torch.distributed._functional_collectives.all_gather_tensor_autograd": (
        "gloo", _FUNCOL + "funcol.wait_tensor(funcol.all_gather_tensor_autograd(t, 0, group))"),
    "torch.distributed._functional_collectives.reduce_scatter_tensor": (
        "gloo", _FUNCOL + "funcol.wait_tensor(funcol.reduce_scatter_tensor(t, 'sum', 0, group))"),
    "torch.distributed._functional_collectives.reduce_scatter_tensor_autograd": (
        "gloo", _FUNCOL + "funcol.wait_tensor(funcol.reduce_scatter_tensor_autograd(t, 'sum', 0, group))"),
    "torch.distributed._functional_collectives.reduce_scatter_tensor_coalesced": (
        "gloo", _FUNCOL + "outs = funcol.reduce_scatter_tensor_coalesced([t], 'sum', [0], group)\n"
                          "[funcol.wait_tensor(r) for r in outs]"),
    "torch.distributed.all_gather_coalesced": ("gloo", "dist.all_gather_coalesced([[torch.zeros(2)]], [t])"),
    "torch.distributed.all_reduce_coalesced": ("gloo", "dist.all_reduce_coalesced([t])"),
    "torch.distributed.reduce_op": ("gloo", "dist.reduce_op.SUM"),
    "torch.distributed.checkpoint.save_state_dict": (
        "gloo", "dcp.save_state_dict({'x': t}, storage_writer=dcp.FileSystemWriter(TMP))"),
    "torch.distributed.checkpoint.load_state_dict": (
        "gloo", "dcp.save({'x': t}, checkpoint_id=TMP)\n"
                "dcp.load_state_dict({'x': out}, storage_reader=dcp.FileSystemReader(TMP))"),
    "torch.distributed.checkpoint.staging.AsyncStager.synchronize_staging": (
        "gloo", "from torch.distributed.checkpoint.staging import AsyncStager\n"
                "class Stager(AsyncStager):\n    def stage(self, state_dict):\n        return state_dict\n"
                "Stager().synchronize_staging()"),
    "torch.distributed.fsdp.FSDPModule.set_reduce_scatter_divide_factor": (
        "gloo", "fully_shard(nn.Linear(2, 2)).set_reduce_scatter_divide_factor(1.0)"),
    "torch.distributed.fsdp.FullyShardedDataParallel.full_optim_state_dict": (
        "gloo", _OPTIM + "FSDP.full_optim_state_dict(model, optim)"),
    "torch.distributed.fsdp.FullyShardedDataParallel.sharded_optim_state_dict": (
        "gloo", _OPTIM + "FSDP.sharded_optim_state_dict(model, optim)"),
    "torch.distributed.fsdp.FullyShardedDataParallel.shard_full_optim_state_dict": (
        "gloo", _OPTIM + "with warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n"
                "    osd = FSDP.optim_state_dict(model, optim)\n"
                "FSDP.shard_full_optim_state_dict(osd, model)"),
    "torch.distributed.fsdp.FullyShardedDataParallel.scatter_full_optim_state_dict": (
        "gloo", _OPTIM + "with warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n"
                "    osd = FSDP.optim_state_dict(model, optim)\n"
                "FSDP.scatter_full_optim_state_dict(osd, model)"),
    "torch.distributed.fsdp.FullyShardedDataParallel.flatten_sharded_optim_state_dict": (
        "gloo", _OPTIM + "with warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n"
                "    osd = FSDP.sharded_optim_state_dict(model, optim)\n"
                "FSDP.flatten_sharded_optim_state_dict(osd, model, optim)"),
    "torch.distributed.fsdp.FullyShardedDataParallel.set_state_dict_type": (
        "gloo", _FSDP1 + "FSDP.set_state_dict_type(model, StateDictType.FULL_STATE_DICT)"),
    "torch.distributed.fsdp.FullyShardedDataParallel.state_dict_type": (
        "gloo", _FSDP1 + "with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):\n    model.state_dict()"),
    "torch.distributed.fsdp.ShardingStrategy.NO_SHARD": (
        "fake", "from torch.distributed.fsdp import ShardingStrategy\n"
                "FSDP(nn.Linear(2, 2), device_id=torch.device('cpu'), sharding_strategy=ShardingStrategy.NO_SHARD)"),
    "torch.distributed.launch.main": (
        "gloo", "import contextlib, io\nfrom torch.distributed.launch import main\n"
                "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])"),
    "torch.distributed.nn.functional.all_gather": ("gloo", "dnnf.all_gather(t)"),
    "torch.distributed.nn.functional.all_reduce": ("gloo", "dnnf.all_reduce(t)"),
    "torch.distributed.nn.functional.all_to_all_single": ("gloo", "dnnf.all_to_all_single(out, t)"),
    "torch.distributed.nn.functional.broadcast": ("gloo", "dnnf.broadcast(t, 0)"),
    "torch.distributed.nn.functional.reduce_scatter": ("gloo", "dnnf.reduce_scatter(out, [t])"),
}


def _init(group: str, directory: str) -> None:
    import torch.distributed as dist

    if group == "fake":
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    else:
        dist.init_process_group("gloo", init_method=f"file://{directory}/store", rank=0, world_size=1)


def main(group: str) -> None:
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as directory:
        _init(group, directory)
        scope: dict[str, object] = {}
        exec(PRELUDE, scope)  # noqa: S102 - the fixed prelude above
        for number, (name, (kind, statements)) in enumerate(RECIPES.items()):
            if kind != group:
                continue
            local = dict(scope, TMP=f"{directory}/ckpt{number}", warnings=warnings)
            error = None
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    exec(statements, local)  # noqa: S102 - the recipe statements above
                except (Exception, SystemExit) as exc:  # noqa: BLE001 - a call may fail after it warned
                    error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            results[name] = {
                "warnings": [[w.category.__name__, str(w.message)] for w in caught],
                "error": error,
            }
        import torch.distributed as dist

        dist.destroy_process_group()
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])

"""
name: dcp-checkpoint
min_torch: 2.8
title: Sharded checkpoint save/load with torch.distributed.checkpoint (DCP), loaded at the same and at another world size, plus a full state dict for inference
world_size: 2
requires:
tags: fsdp2, checkpoint, dcp, torch.distributed.checkpoint, get_state_dict, set_state_dict, StateDictOptions, full_state_dict, cpu_offload, Stateful, resume, inference export, reshard, world size
mutant: no-load-at-one-rank: `dcp.load({"app": AppState(small_model, small_optim)}, checkpoint_id=ckpt, process_group=solo)` -> `pass`
mutant: export-not-full: `full_sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))` -> `full_sd = get_model_state_dict(model, options=StateDictOptions(cpu_offload=True))` => RuntimeError

Training checkpoints: each rank writes only its own shards, in parallel, with
`dcp.save`; `dcp.load` reads them back in place (and can reshard to another world
size or mesh). `get_state_dict(model, optimizer)` returns state dicts whose keys are
the original parameter names (FQNs), whatever the wrapping, so checkpoints survive
refactors of the sharding; `set_state_dict` loads them back. Wrapping model and
optimizer in a `Stateful` app state lets DCP call those for you.

Inference export: `get_model_state_dict(model, options=StateDictOptions(
full_state_dict=True, cpu_offload=True))` all-gathers a plain, unsharded state dict
of ordinary tensors onto rank 0's CPU (other ranks get an empty dict), which
`torch.save` writes and any non-distributed `nn.Module` loads. Offline, without a process group,
`python -m torch.distributed.checkpoint.format_utils dcp_to_torch CKPT_DIR out.pt` (mode first)
converts the whole DCP checkpoint as saved: here `torch.load("out.pt")["app"]["model"]` is the
model, next to the optimizer state, a larger file than the export (assets/checks/dcp_format_utils_cli.py).

What the script asserts:
1. the round trip restores identical tensors (model shards and optimizer state) into a
   freshly initialized model, and training continues identically from there;
2. another world size: the checkpoint the 2 ranks wrote is loaded by rank 0 alone, a 1-rank
   group (`dist.new_group([0])`, `DeviceMesh.from_group`, `fully_shard(..., mesh=...)`,
   `dcp.load(..., process_group=solo)`), as a restart on fewer GPUs would. Its model and
   optimizer state equal the saved state bit for bit (as full state dicts), and its next step
   on both ranks' batches together gives the 2-rank step's mean loss (to float tolerance:
   the gradient is averaged in another order). (A 2 -> 4 rank load, with per-rank RNG state,
   is in the dcp-resume pattern.)
3. the exported full state dict loads into a plain model that gives the same outputs.

APIs as in torch 2.13: `dcp.save/load(state_dict, checkpoint_id=..., process_group=...)`,
`torch.distributed.checkpoint.state_dict.get_state_dict/set_state_dict/get_model_state_dict`,
`DeviceMesh.from_group`.

The checkpoint directory must be visible to all ranks (a shared filesystem across
nodes); set CHECKPOINT_DIR to keep it, otherwise a temporary directory is used and removed.

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/dcp_checkpoint.py
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
import tempfile
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

DIM, STEPS, BATCH = 16, 3, 8


def init_distributed() -> torch.device:
    """nccl + cuda:LOCAL_RANK when CUDA is available, else gloo + cpu (DIST_BACKEND overrides)."""
    backend = os.environ.get("DIST_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device

def shutdown() -> None:
    """Destroy the process group; on gloo, then leave without interpreter teardown."""
    gloo = dist.get_backend() == "gloo"
    dist.destroy_process_group()
    if gloo:
        # torch 2.13 on CPU: objects that outlive main() (DTensor caches under FSDP, DDP's C++
        # reducer) keep the gloo group alive after destroy_process_group, and its worker thread
        # can release a Python-owned tensor while the interpreter shuts down, aborting the process
        # ("terminate called without an active exception", intermittently: 10 of 20 runs
        # of fsdp2-training in one measurement on a busy 2-core machine, 0 of 10 in a quieter one).
        # The work is done and flushed, so skip the teardown. NCCL groups are shut down by
        # destroy_process_group: no early exit there.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)



def make_model() -> nn.Sequential:
    return nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.ReLU(), nn.Linear(2 * DIM, 2 * DIM), nn.ReLU(), nn.Linear(2 * DIM, DIM))


def build(device: torch.device, seed: int, mesh: DeviceMesh | None = None) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = make_model().to(device)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)  # mesh=None: all ranks of the default group
    fully_shard(model, mesh=mesh)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


class AppState(Stateful):
    """What DCP saves and loads: DCP calls state_dict() on save and load_state_dict() on load."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.optimizer = model, optimizer

    def state_dict(self) -> dict[str, Any]:
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)  # sharded (DTensor) by default
        return {"model": model_sd, "optim": optim_sd}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        set_state_dict(
            self.model, self.optimizer, model_state_dict=state_dict["model"], optim_state_dict=state_dict["optim"]
        )


def train_step(model: nn.Module, optim: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optim.step()
    optim.zero_grad()
    return loss.item()


def local_tensors(tree: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    """Flatten a (nested) state dict into {path: this rank's local tensor copy}."""
    out: dict[str, torch.Tensor] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            out.update(local_tensors(value, f"{prefix}{key}."))
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            out.update(local_tensors(value, f"{prefix}{i}."))
    elif isinstance(tree, DTensor):
        out[prefix.rstrip(".")] = tree.to_local().detach().clone()
    elif isinstance(tree, torch.Tensor):
        out[prefix.rstrip(".")] = tree.detach().clone()
    return out


def assert_same_tree(saved: Any, loaded: Any, where: str) -> None:
    if isinstance(saved, dict):
        assert isinstance(loaded, dict) and saved.keys() == loaded.keys(), (where, sorted(saved), sorted(loaded))
        for key in saved:
            assert_same_tree(saved[key], loaded[key], f"{where}.{key}")
    elif isinstance(saved, (list, tuple)):
        assert isinstance(loaded, (list, tuple)) and len(saved) == len(loaded), where
        for i, (a, b) in enumerate(zip(saved, loaded)):
            assert_same_tree(a, b, f"{where}.{i}")
    elif isinstance(saved, torch.Tensor):
        assert torch.equal(saved, loaded.cpu()), f"{where} differs"
    else:
        assert saved == loaded, (where, saved, loaded)


def load_at_one_rank(device: torch.device, ckpt: str, saved_full: tuple[dict, dict], x: torch.Tensor,
                     expected_loss: float) -> None:
    """Rank 0 alone loads what every rank saved: DCP reshards to the smaller world size."""
    solo = dist.new_group([0])  # every rank calls new_group; only rank 0 is in it
    if dist.get_rank() != 0:
        return
    mesh = DeviceMesh.from_group(solo, device.type)
    small_model, small_optim = build(device, seed=321, mesh=mesh)
    dcp.load({"app": AppState(small_model, small_optim)}, checkpoint_id=ckpt, process_group=solo)
    loaded = get_state_dict(small_model, small_optim, options=StateDictOptions(full_state_dict=True))
    assert_same_tree(saved_full[0], loaded[0], "model")
    assert_same_tree(saved_full[1], loaded[1], "optim")
    loss = train_step(small_model, small_optim, x, x.flip(-1))
    assert abs(loss - expected_loss) <= 1e-5 * abs(expected_loss), (loss, expected_loss)
    print(f"loaded at 1 rank: model and optimizer state equal the 2-rank save; next-step loss {loss:.6f} "
          f"(2 ranks: {expected_loss:.6f})", flush=True)


def shared_checkpoint_dir() -> tuple[str, bool]:
    """CHECKPOINT_DIR if set (kept), else a temp dir made by rank 0 and broadcast (removed at the end)."""
    if os.environ.get("CHECKPOINT_DIR"):
        return os.environ["CHECKPOINT_DIR"], False
    holder = [tempfile.mkdtemp(prefix="dcp-pattern-") if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(holder, src=0)
    return str(holder[0]), True


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    ckpt_dir, temporary = shared_checkpoint_dir()
    def batches_of(r: int) -> list[torch.Tensor]:
        data_gen = torch.Generator().manual_seed(100 + r)
        return [torch.randn(BATCH, DIM, generator=data_gen).to(device) for _ in range(STEPS + 1)]

    batches = batches_of(rank)

    # Train a little so the optimizer has state (exp_avg, exp_avg_sq, step) worth saving.
    model, optim = build(device, seed=0)
    for x in batches[:STEPS]:
        train_step(model, optim, x, x.flip(-1))

    # --- Save: every rank writes its shards; metadata goes in ckpt_dir/.metadata.
    ckpt = os.path.join(ckpt_dir, "step3")
    dcp.save({"app": AppState(model, optim)}, checkpoint_id=ckpt)
    saved = local_tensors(AppState(model, optim).state_dict())
    # The same state as full state dicts on rank 0's CPU: what a load at another world size must give.
    # Deep-copied: tensors already on the CPU can come back as the live ones (AdamW's `step` here, in a
    # CPU run: without the copy the next optimizer step changed the "saved" value).
    saved_full = copy.deepcopy(
        get_state_dict(model, optim, options=StateDictOptions(full_state_dict=True, cpu_offload=True)))

    # --- Load into a differently initialized model and a fresh optimizer.
    restored_model, restored_optim = build(device, seed=123)
    # The optimizer has no state before its first step: loading fills it in.
    dcp.load({"app": AppState(restored_model, restored_optim)}, checkpoint_id=ckpt)
    restored = local_tensors(AppState(restored_model, restored_optim).state_dict())

    assert saved.keys() == restored.keys(), sorted(saved.keys() ^ restored.keys())
    for key in saved:
        assert torch.equal(saved[key], restored[key]), f"{key} differs after the round trip"
    # Same state => the next step gives bit-identical losses.
    x = batches[STEPS]
    loss_a, loss_b = train_step(model, optim, x, x.flip(-1)), train_step(restored_model, restored_optim, x, x.flip(-1))
    assert loss_a == loss_b, (loss_a, loss_b)
    if rank == 0:
        print(f"DCP round trip: {len(saved)} tensors identical on every rank; next-step loss {loss_a:.6f} == {loss_b:.6f}", flush=True)
    mean_loss = torch.tensor(loss_a)
    dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)  # the 2-rank step's loss over the global batch
    everyone = torch.cat([batches_of(r)[STEPS] for r in range(dist.get_world_size())])
    load_at_one_rank(device, ckpt, saved_full, everyone, mean_loss.item())

    # --- Export for inference: one full, unsharded state dict on rank 0's CPU.
    full_sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    probe = torch.randn(4, DIM, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        sharded_out = model(probe.to(device)).cpu()  # collective: every rank runs it
    if rank == 0:
        path = os.path.join(ckpt_dir, "model.pt")
        torch.save(full_sd, path)
        plain = make_model()  # an ordinary single-process module: no process group needed
        plain.load_state_dict(torch.load(path, weights_only=True))
        with torch.no_grad():
            torch.testing.assert_close(plain(probe), sharded_out)
        print(f"full state dict: {len(full_sd)} tensors -> {path}; plain model reproduces the sharded outputs", flush=True)
    else:
        assert full_sd == {}, "with cpu_offload=True only rank 0 holds the full state dict"

    dist.barrier()  # nobody deletes the directory while another rank still reads it
    if temporary and rank == 0:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    shutdown()


if __name__ == "__main__":
    main()

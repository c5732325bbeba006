"""
name: fsdp1-to-fsdp2-migration
min_torch: 2.9
title: FSDP1 -> FSDP2 migration map, argument by argument, checked side by side
world_size: 2
requires:
tags: fsdp1, fsdp2, migration, FullyShardedDataParallel, fully_shard, sharding_strategy, auto_wrap_policy, use_orig_params, no_sync, state_dict_type, MixedPrecision, CPUOffload, summon_full_params, set_gradient_divide_factor
mutant: write-through-unshard: `set_model_state_dict(model, {name: value}, options=StateDictOptions(full_state_dict=True, strict=False))` -> `[model.unshard(), model.get_parameter(name).detach().copy_(value), model.reshard()]`
mutant: divide-factor-on-root-only: `for module in model.modules():  # not recursive: set it on every FSDP module` -> `for module in [model]:`
mutant: no-force-sum-on-gloo: `module.set_force_sum_reduction_for_comms(True)` -> `pass` => RuntimeError

How each `FullyShardedDataParallel(...)` argument and method maps to FSDP2's
`fully_shard`. The script trains the same model both ways (FULL_SHARD + per-block
wrap policy + no_sync accumulation + gradient clipping in FSDP1; the FSDP2
equivalents) and asserts equal losses and equal exported full state dicts.

| FSDP1 (`FullyShardedDataParallel`) | FSDP2 (`fully_shard`) |
|---|---|
| `FSDP(model)` returns a wrapper (`_fsdp_wrapped_module.` in names) | `fully_shard(model)` changes `model` in place (class becomes `FSDP<Class>`), names unchanged |
| flat parameters; `use_orig_params=True` to see originals | always the original parameters, each a `DTensor` sharded on dim 0; `use_orig_params` is gone |
| `auto_wrap_policy=ModuleWrapPolicy({Block})` | call `fully_shard(block)` on each block yourself, then `fully_shard(model)` on the root |
| `sharding_strategy=FULL_SHARD` | the default `reshard_after_forward=None`: True for every module but the root, which keeps its parameters from forward to backward, as FSDP1's FULL_SHARD does |
| `sharding_strategy=SHARD_GRAD_OP` | `reshard_after_forward=False` |
| `sharding_strategy=HYBRID_SHARD` | `mesh=init_device_mesh(dev, (replicas, shards), mesh_dim_names=("replicate", "shard"))`, `reshard_after_forward` as for FULL_SHARD |
| `sharding_strategy=_HYBRID_SHARD_ZERO2` | 2-D mesh as above plus `reshard_after_forward=False` |
| `sharding_strategy=NO_SHARD` | `DistributedDataParallel` (or a 2-D mesh whose shard dim has size 1) |
| (none) | `reshard_after_forward=8`: reshard to a smaller group after forward (e.g. intra-node) |
| `process_group=pg` / `device_mesh=mesh` | `mesh=DeviceMesh` (`DeviceMesh.from_group(pg, device_type)` wraps an existing group) |
| `mixed_precision=MixedPrecision(param_dtype, reduce_dtype, buffer_dtype)` | `mp_policy=MixedPrecisionPolicy(param_dtype, reduce_dtype, output_dtype, cast_forward_inputs)`; buffers are not cast: `.to(dtype)` them yourself |
| `MixedPrecision(keep_low_precision_grads=True)` | no equivalent: sharded grads have the parameter's dtype |
| `cpu_offload=CPUOffload(offload_params=True)` | `offload_policy=CPUOffloadPolicy()` (pins host memory: needs a GPU); `CPUOffloadPolicy(pin_memory=False)` also works on CPU-only gloo |
| `backward_prefetch=BACKWARD_PRE` / `BACKWARD_POST` | default prefetching; explicit: `block.set_modules_to_backward_prefetch([...])` |
| `forward_prefetch=True` | `block.set_modules_to_forward_prefetch([...])` |
| `limit_all_gathers=True` | no such argument in FSDP2 |
| `device_id=rank` | move the module first (`model.to(device)`), or build on `meta` and `to_empty(device=...)` |
| `param_init_fn=...` with a meta-device model | `model.to_empty(device=...)` then `reset_parameters()` (or your init) after `fully_shard` |
| `sync_module_states=True` | no flag: seed identically on all ranks, or `set_model_state_dict(model, full_sd, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))` |
| `ignored_modules=` / `ignored_states=` | `ignored_params={...}` (a set of parameters, 2.7+): not sharded, and their gradients are not reduced (each rank keeps its own: all-reduce them yourself or the replicas drift apart) |
| `with model.no_sync():` | `model.set_requires_gradient_sync(False)`, then `True` before the last microbatch |
| `model.clip_grad_norm_(max_norm)` | `torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)` (DTensor grads on one mesh; with TP + FSDP2 clip per mesh, see the tp-fsdp2-2d pattern) |
| `FSDP.state_dict_type(model, SHARDED_STATE_DICT)` + `model.state_dict()` | `get_model_state_dict(model)` (or `model.state_dict()`: already DTensors) |
| `FULL_STATE_DICT` + `FullStateDictConfig(offload_to_cpu=True, rank0_only=True)` | `get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))` |
| `FSDP.optim_state_dict(model, optim)` / `optim_state_dict_to_load` | `get_optimizer_state_dict(model, optim)` / `set_optimizer_state_dict(...)` (or `get_state_dict`/`set_state_dict` for both) |
| `torch.save` of a sharded state dict per rank | `torch.distributed.checkpoint.save` / `load` (see the dcp-checkpoint pattern) |
| `with FSDP.summon_full_params(model):` to read | `get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))`, or `param.full_tensor()` per parameter: full copies (collectives: every rank calls them) |
| `summon_full_params(model, writeback=True)` to write | `set_model_state_dict(model, full_sd, options=StateDictOptions(full_state_dict=True))`, or per parameter `param.copy_(distribute_tensor(full, param.device_mesh, param.placements))` under `torch.no_grad()`. Not `model.unshard()` / `reshard()`: they are not recursive (a block's parameters stay sharded) and what you write into the unsharded parameters is dropped by `reshard()` |
| `model.register_comm_hook(...)` | no general hook; `set_gradient_divide_factor(f)` (call it on every FSDP module: it is not recursive; on gloo any factor but the world size also needs `set_force_sum_reduction_for_comms(True)`), `set_all_reduce_hook` (HSDP), `set_custom_reduce_scatter`. `set_reduce_scatter_divide_factor` is its deprecated old name |

Each row naming an API, and the reshard_after_forward default, is asserted by the claim checks
assets/checks/migration_map_names.py and reshard_after_forward_default.py; that FSDP1's FULL_SHARD also
keeps the root unsharded after forward by fsdp1_full_shard_root.py. The script itself shows
the summon_full_params and register_comm_hook rows at work on the trained FSDP2 model:
- reading full parameters (`full_tensor()` equals `get_model_state_dict(full_state_dict=True)`),
  writing them (`set_model_state_dict`, a DTensor `copy_`), and why not `unshard()`/`reshard()`:
  after the root's `unshard()` a block's parameters are still DTensors, and a write into the
  root's unsharded parameter is gone after `reshard()`;
- a sum instead of a mean over ranks (the usual FSDP1 comm hook): `set_gradient_divide_factor(1.0)`
  on every FSDP module gives gradients exactly world-size times the default; on gloo without
  `set_force_sum_reduction_for_comms(True)` the backward raises "Cannot use ReduceOp.PREMUL_SUM with
  Gloo" (FSDP2 picks PREMUL_SUM for a custom factor, torch/distributed/fsdp/_fully_shard/
  _fsdp_collectives.py, `_get_gradient_divide_factors`; NCCL has it).
Since which release: `set_gradient_divide_factor` and `set_force_sum_reduction_for_comms` are in
2.13's FSDPModule (_fully_shard.py:646, 659), where `set_reduce_scatter_divide_factor` carries
`@deprecated("Use set_gradient_divide_factor instead")` (_fully_shard.py:641). By the release
wheels, both new methods and that deprecation arrive in 2.8; 2.6 and 2.7 have only
`set_reduce_scatter_divide_factor`. `from torch.distributed.fsdp import fully_shard` works from 2.6;
2.4 and 2.5 have FSDP2 only as `torch.distributed._composable.fsdp`, and `fully_shard(ignored_params=)`
comes in 2.7 (the API timeline read from the release wheels: `fsdp-skill history
torch.distributed.fsdp.fully_shard`).

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/fsdp1_to_fsdp2_migration.py
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict
from torch.distributed.fsdp import FSDPModule, FullStateDictConfig, ShardingStrategy, StateDictType, fully_shard
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
from torch.distributed.tensor import DTensor, distribute_tensor

DIM, BLOCKS, STEPS, MICROBATCHES, BATCH, MAX_NORM = 16, 2, 3, 2, 8, 1.0


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



class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.relu(self.up(x)))


def make_model() -> nn.Sequential:
    torch.manual_seed(0)  # identical init on every rank replaces sync_module_states=True
    return nn.Sequential(*(Block(DIM) for _ in range(BLOCKS)), nn.Linear(DIM, DIM))


def fsdp1(device: torch.device) -> nn.Module:
    return FSDP(
        make_model(),
        sharding_strategy=ShardingStrategy.FULL_SHARD,
        auto_wrap_policy=ModuleWrapPolicy({Block}),
        device_id=device,
        use_orig_params=True,
    )


def fsdp2(device: torch.device) -> nn.Module:
    model = make_model().to(device)  # device_id=... becomes: move the module first
    for module in model.modules():  # auto_wrap_policy=ModuleWrapPolicy({Block}) becomes:
        if isinstance(module, Block):
            fully_shard(module)  # FULL_SHARD: the default, True for every module but the root
    fully_shard(model)
    return model


def train(model: nn.Module, flavour: str, batches: list[list[torch.Tensor]]) -> list[float]:
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for micro in batches:
        step_loss = 0.0
        for i, x in enumerate(micro):
            last = i == len(micro) - 1
            loss = nn.functional.mse_loss(model(x), x.roll(1, dims=-1)) / len(micro)
            if flavour == "fsdp1" and not last:
                with model.no_sync():  # FSDP1 accumulation
                    loss.backward()
            else:
                if flavour == "fsdp2":
                    model.set_requires_gradient_sync(last)  # FSDP2 accumulation
                loss.backward()
            step_loss += loss.item()
        if flavour == "fsdp1":
            model.clip_grad_norm_(MAX_NORM)
        else:
            torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        optim.step()
        optim.zero_grad()
        losses.append(step_loss)
    return losses


def full_state_dict(model: nn.Module, flavour: str) -> dict[str, torch.Tensor]:
    if flavour == "fsdp1":
        # offload_to_cpu=True on a CPU-only run raises on rank 0 ("setStorage ... storage of size 0", claim
        # check fsdp1-cpu-offload-state-dict): offload only from GPU.
        config = FullStateDictConfig(offload_to_cpu=next(model.parameters()).is_cuda, rank0_only=True)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, config):
            return model.state_dict()
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def write_full(model: nn.Module, name: str, value: torch.Tensor) -> None:
    """FSDP1's `summon_full_params(model, writeback=True)` + a write, in FSDP2: load a full tensor."""
    set_model_state_dict(model, {name: value}, options=StateDictOptions(full_state_dict=True, strict=False))


def summon_full_params_equivalents(model: nn.Module) -> None:
    """Reading and writing full parameters of an FSDP2 model; every rank runs this (collectives)."""
    full = {name: param.full_tensor() for name, param in model.named_parameters()}  # read: copies
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))  # the same, in one call
    assert full.keys() == state.keys() and all(torch.equal(full[k], state[k]) for k in full)

    root_weight = f"{BLOCKS}.weight"  # the final Linear: a parameter the root module itself owns
    value = torch.full_like(full[root_weight], 0.5)
    write_full(model, root_weight, value)
    assert torch.equal(model.get_parameter(root_weight).full_tensor(), value), "the write did not land"

    block_weight = model.get_parameter("0.up.weight")  # per parameter: a DTensor copy_ of a full tensor
    with torch.no_grad():
        block_weight.copy_(distribute_tensor(torch.ones_like(full["0.up.weight"]), block_weight.device_mesh,
                                             block_weight.placements))
    assert torch.equal(block_weight.full_tensor(), torch.ones_like(full["0.up.weight"]))

    # Why not unshard()/reshard(): not recursive, and writes into the unsharded parameters are dropped.
    model.unshard()
    assert isinstance(model.get_parameter("0.up.weight"), DTensor), "unshard() reached a block"
    unsharded = model.get_parameter(root_weight)
    assert not isinstance(unsharded, DTensor) and unsharded.shape == value.shape
    with torch.no_grad():
        unsharded.fill_(2.0)
    model.reshard()
    assert torch.equal(model.get_parameter(root_weight).full_tensor(), value), "the write survived reshard()"


def sum_gradients_over_ranks(model: nn.Module) -> None:
    """What an FSDP1 comm hook that sums instead of averaging becomes: a divide factor of 1."""
    for module in model.modules():  # not recursive: set it on every FSDP module
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)
            # A factor other than the world size makes FSDP2 reduce with PREMUL_SUM, which gloo lacks
            # ("Cannot use ReduceOp.PREMUL_SUM with Gloo"): force SUM plus a separate division.
            module.set_force_sum_reduction_for_comms(True)


def check_divide_factor(device: torch.device, x: torch.Tensor) -> None:
    averaged, summed = fsdp2(device), fsdp2(device)
    sum_gradients_over_ranks(summed)
    for model in (averaged, summed):
        model(x).square().mean().backward()
    world = dist.get_world_size()
    for (name, a), b in zip(averaged.named_parameters(), summed.parameters()):
        torch.testing.assert_close(b.grad.full_tensor(), world * a.grad.full_tensor(), msg=f"{name}: not summed")


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    data_gen = torch.Generator().manual_seed(100 + rank)
    batches = [[torch.randn(BATCH, DIM, generator=data_gen).to(device) for _ in range(MICROBATCHES)] for _ in range(STEPS)]

    results = {}
    for flavour, build in (("fsdp1", fsdp1), ("fsdp2", fsdp2)):
        model = build(device)
        losses = train(model, flavour, batches)
        results[flavour] = (losses, full_state_dict(model, flavour))
    fsdp2_model = model

    (losses1, sd1), (losses2, sd2) = results["fsdp1"], results["fsdp2"]
    torch.testing.assert_close(torch.tensor(losses1), torch.tensor(losses2))
    if rank == 0:
        assert sd1.keys() == sd2.keys(), sorted(sd1.keys() ^ sd2.keys())  # same names: no wrapper prefixes
        # Compared on the CPU: the NCCL pass at 1 rank got the two full state dicts on different devices. By the
        # source, at world size 1 FSDP1 switches to NO_SHARD (torch/distributed/fsdp/_init_utils.py:430) and, with
        # use_orig_params, skips the unshard hook that offloads (_state_dict_utils.py:57-60), so its dict stays
        # on the GPU although offload_to_cpu=True.
        sd1, sd2 = ({key: value.cpu() for key, value in sd.items()} for sd in (sd1, sd2))
        worst = max((sd1[key].float() - sd2[key].float()).abs().max().item() for key in sd1)
        for key in sd1:
            torch.testing.assert_close(sd1[key], sd2[key], msg=f"{key} differs between FSDP1 and FSDP2 (largest "
                                       f"difference over all tensors {worst:.3g})")
        print("FSDP1 losses:", [f"{v:.5f}" for v in losses1], flush=True)
        print("FSDP2 losses:", [f"{v:.5f}" for v in losses2], flush=True)
        print(f"full state dicts agree on {len(sd1)} tensors (largest difference {worst:.3g}): {sorted(sd1)[:3]} ...",
              flush=True)

    summon_full_params_equivalents(fsdp2_model)
    check_divide_factor(device, batches[0][0])
    if rank == 0:
        print("summon_full_params: read with full_tensor()/get_model_state_dict, write with set_model_state_dict or "
              "a DTensor copy_; unshard() left the blocks sharded and reshard() dropped a write", flush=True)
        print(f"set_gradient_divide_factor(1.0) on every FSDP module: gradients {dist.get_world_size()}x the "
              "default mean", flush=True)
    shutdown()


if __name__ == "__main__":
    main()

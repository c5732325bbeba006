"""Prompt texts the server offers: task playbooks that point the model at the right tools.

They state the well-established mapping and the order of work, and leave exact signatures to the
tools (`get_api`), so they do not go stale when a default changes between torch versions.
"""

from __future__ import annotations

MIGRATE_FSDP1_TO_FSDP2 = """\
Migrate this training code from FSDP1 (`FullyShardedDataParallel`) to FSDP2 (`fully_shard`), \
for torch {torch_version}. Use the pytorch-fsdp tools for every API you touch: `get_api` for exact \
signatures and defaults, `search_docs` for behaviour, `get_pattern` for runnable scripts \
(`list_patterns` shows them; there is an FSDP1 → FSDP2 migration map when patterns are installed).

Work in this order:
1. Wrapping. Replace `FullyShardedDataParallel(model, auto_wrap_policy=...)` with explicit calls: \
`fully_shard(block)` on each transformer block (what the wrap policy selected), then \
`fully_shard(model)` on the root. Modules are changed in place (their class becomes an \
`FSDPModule` subclass); parameters become `DTensor`s sharded on dim 0.
2. Arguments, one by one:
   - `sharding_strategy=FULL_SHARD` → `reshard_after_forward=True`; `SHARD_GRAD_OP` → \
`reshard_after_forward=False`; `HYBRID_SHARD` / `_HYBRID_SHARD_ZERO2` → pass a 2-D `DeviceMesh` \
(replicate dim, shard dim) as `mesh=` (HSDP), with `reshard_after_forward` as above.
   - `mixed_precision=MixedPrecision(param_dtype, reduce_dtype, buffer_dtype)` → \
`mp_policy=MixedPrecisionPolicy(param_dtype=..., reduce_dtype=..., output_dtype=..., cast_forward_inputs=...)` \
(no buffer dtype: cast buffers yourself).
   - `cpu_offload=CPUOffload(offload_params=True)` → `offload_policy=CPUOffloadPolicy()`.
   - `device_id` / `process_group` → `mesh=init_device_mesh(device_type, (world_size,))`.
   - `param_init_fn` / `sync_module_states` → build the model on the `meta` device, shard it, then \
`model.to_empty(device=...)` and initialise (`reset_parameters()`), or load a full state dict \
with `set_model_state_dict(..., options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))`.
   - `use_orig_params` → gone (always original parameters); `limit_all_gathers` → gone.
   - `forward_prefetch` / `backward_prefetch` → implicit prefetching by default; explicit with \
`set_modules_to_forward_prefetch` / `set_modules_to_backward_prefetch`.
3. Training loop: create the optimizer *after* `fully_shard` (it must see the DTensor parameters). \
Replace `with model.no_sync():` by `model.set_requires_gradient_sync(False)` for the accumulation \
micro-batches (and `True` for the last). `model.clip_grad_norm_` → `torch.nn.utils.clip_grad_norm_`.
4. Checkpoints: replace `FSDP.state_dict_type(...)` / `FullStateDictConfig` with \
`torch.distributed.checkpoint` (DCP) for sharded save/load and \
`torch.distributed.checkpoint.state_dict.get_model_state_dict` / `get_optimizer_state_dict` \
(`StateDictOptions(full_state_dict=True, cpu_offload=True)` for a full, rank-0 copy for inference).
5. `summon_full_params` → `DTensor.full_tensor()` on the parameters you need, or \
`model.unshard()` / `model.reshard()`.

Answer with the migrated code, then a table: FSDP1 argument → FSDP2 replacement → note. \
Flag anything you could not map instead of guessing.

{code_block}"""

DEBUG_DISTRIBUTED_HANG = """\
Help debug a distributed PyTorch job that hangs or times out (torch {torch_version}, backend: \
{backend}). Symptom: {symptom}

Use the pytorch-fsdp tools for details (`search_docs`, `get_api`, `read_reference`); when \
patterns are installed, `get_pattern` on the hang-debugging recipe gives a runnable script.

First place the hang: at `init_process_group` or the first collective (setup), or later in \
training (a mismatch). Then go through these in that order and say which applies:
1. Setup, first when it stops at init or at the first collective across nodes: every rank must \
reach the same rendezvous endpoint (`MASTER_ADDR`/`MASTER_PORT`, or torchrun's \
`--rdzv-endpoint host:port`; `--standalone` picks its own port and is single-node only) with the \
same world size; a firewall between nodes, or the wrong network interface, stalls the first \
collective: set `NCCL_SOCKET_IFNAME` / `GLOO_SOCKET_IFNAME` to the interface the nodes share and \
`NCCL_DEBUG=INFO` to see which one NCCL picked. `init_process_group(..., device_id=device)` \
connects NCCL eagerly, so these errors surface at init instead of the first collective.
2. Mismatched collectives: one rank skips or reorders a collective (a data-dependent `if`, an \
uneven last batch, a rank-0-only `barrier` or logging collective); the others wait until the \
timeout. Re-run with `TORCH_DISTRIBUTED_DEBUG=DETAIL` in the launch environment (it is read at \
`import torch`; it checks that collectives match across ranks) and, on gloo, replace the \
suspicious `barrier()` with `dist.monitored_barrier(timeout=...)` to name the rank that never \
arrives.
3. Uneven inputs: ranks run different numbers of steps. DDP: the `Join` context manager; FSDP \
is not `Joinable`: `DistributedSampler` (equal counts per rank) or the same number of iterations.
4. NCCL specifics: `NCCL_DEBUG=INFO` (and `NCCL_DEBUG_SUBSYS=ALL`) for transport errors; each \
rank must use its own GPU (`torch.cuda.set_device(local_rank)`: `device_id=` does not call it); \
the timeout in `init_process_group(timeout=...)` must cover the slowest step (checkpoint I/O, \
first compile).
5. The flight recorder, which records the last collectives of every rank: with NCCL's \
environment-variable recorder set `TORCH_NCCL_TRACE_BUFFER_SIZE` (e.g. 2000) and \
`TORCH_NCCL_DUMP_ON_TIMEOUT=1`; the flight-recorder tutorial in the references covers the \
TorchComms `FlightRecorderHook` with the `torch.distributed.debug` server (`search_docs("flight \
recorder")`). Reproduce, then compare the per-rank dumps to find the first collective where the \
ranks diverge.
6. Teardown: call `dist.destroy_process_group()` on every rank at the end.

Finish with the exact environment variables and code changes to try, in order."""


def migrate_prompt(code: str, torch_version: str) -> str:
    block = f"The code to migrate:\n```python\n{code.strip()}\n```" if code.strip() else (
        "Ask the user for their FSDP1 wrapping code, training step and checkpoint code if they did not give it."
    )
    return MIGRATE_FSDP1_TO_FSDP2.format(torch_version=torch_version, code_block=block)


def hang_prompt(symptom: str, backend: str, torch_version: str) -> str:
    return DEBUG_DISTRIBUTED_HANG.format(
        torch_version=torch_version,
        backend=backend.strip() or "not stated (ask: nccl or gloo?)",
        symptom=symptom.strip() or "not described yet; ask which call it stops in, on how many ranks and nodes.",
    )

"""
name: debug-hangs
min_torch: 2.8
title: Debugging hangs and collective mismatches (TORCH_DISTRIBUTED_DEBUG, monitored_barrier, NCCL_DEBUG, flight recorder)
world_size: 2
requires: stated-ranks
tags: debugging, hang, timeout, deadlock, TORCH_DISTRIBUTED_DEBUG, monitored_barrier, NCCL_DEBUG, flight recorder, TORCH_NCCL_TRACE_BUFFER_SIZE, TORCH_FR_BUFFER_SIZE, desync
mutant: no-detail: `os.environ.setdefault("TORCH_DISTRIBUTED_DEBUG", "DETAIL")` -> `os.environ.setdefault("TORCH_DISTRIBUTED_DEBUG", "OFF")`
mutant: flight-recorder-off: `os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")` -> `os.environ["TORCH_FR_BUFFER_SIZE"] = "0"`
mutant: barrier-without-timeout: `dist.monitored_barrier(group=gloo, timeout=SHORT, wait_all_ranks=True)` -> `dist.barrier(group=gloo)`

Most stuck jobs come from one rank not issuing a collective the others issued (an
early return, a data-dependent branch, uneven batches), or from ranks issuing different
collectives (shapes, order). Neither hangs forever, and neither always hangs:
- a collective that only some ranks issue waits for the group's timeout, then raises
  (defaults: 30 min for gloo and the other non-NCCL backends, 10 min for NCCL:
  torch/distributed/constants.py, kProcessGroupNCCLDefaultTimeout in
  torch/include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp:157-158);
- an all_reduce of different shapes on gloo *returns* on one rank, with a wrong result and
  no error, while the other rank waits until the timeout (shown below, step 2).
This script reproduces such faults on gloo, each caught in seconds:

1. `TORCH_DISTRIBUTED_DEBUG=DETAIL`: every collective on a group created while DETAIL is on
   is first checked across ranks (op, shape, dtype); a mismatch raises "Detected mismatch
   between collectives on ranks" naming both sides.
2. The same mismatch without DETAIL: rank 0's all_reduce returns a wrong sum, rank 1's times
   out after the group's (here short) timeout.
3. `dist.monitored_barrier(group, timeout, wait_all_ranks=True)`: a barrier that names the
   ranks that did not arrive ("Ranks 1 failed to pass monitoredBarrier"). It is gloo-only:
   under NCCL, create a side group with `dist.new_group(backend="gloo")`.
4. The flight recorder: a ring buffer of the last N collectives per rank with sequence id,
   op, sizes, state and Python stack; comparing ranks' last sequence ids shows which
   collective a rank never joined. In torch 2.13 it is on by default with N = 2000:
   `TORCH_FR_BUFFER_SIZE` (older name `TORCH_NCCL_TRACE_BUFFER_SIZE`, read second) sets N, 0
   turns it off (torch/include/torch/csrc/distributed/c10d/FlightRecorder.hpp:110-111; a
   torchcomms group reads the same two, torch/distributed/distributed_c10d.py:2126-2129).
   Earlier releases, by their wheels' FlightRecorder headers: the default is 0 (off) up to
   2.10 and 2000 from 2.11; `TORCH_FR_BUFFER_SIZE` is read from 2.8, 2.6 and 2.7 read only
   `TORCH_NCCL_TRACE_BUFFER_SIZE`. So set it (both names, for old releases) before 2.11.

Checklist for a real NCCL hang (set these in the launch environment, before init; the NCCL
ones cannot be run here, CPU only, and rest on the 2.13 headers cited):
- `NCCL_DEBUG=INFO` (`NCCL_DEBUG_SUBSYS=INIT,COLL,NET`): NCCL's own init/transport logs;
  `WARN` for errors only.
- `TORCH_NCCL_DUMP_ON_TIMEOUT=1` with the flight recorder on (the default in 2.13) and
  `TORCH_NCCL_ENABLE_MONITORING=1` (ProcessGroupNCCL.hpp:71-75): on a watchdog timeout each
  rank dumps its flight recorder to `TORCH_FR_DUMP_TEMP_FILE` + rank (older name
  `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`; the file name is prefix + rank, FlightRecorder.hpp:80-84),
  e.g. `TORCH_FR_DUMP_TEMP_FILE=/tmp/fr_trace_` -> /tmp/fr_trace_<rank>; analyse all ranks
  together with `python -m torch.distributed.flight_recorder.fr_trace /tmp -p fr_trace_`.
- `init_process_group(..., timeout=timedelta(minutes=10))`: a shorter timeout turns a long
  wait into an error (and a dump) sooner.
- `TORCH_NCCL_ASYNC_ERROR_HANDLING`: what the NCCL watchdog does on an error or timeout:
  1 tears the process down, 3 tears it down without aborting the communicators first
  (ProcessGroupNCCL.hpp:160-172); torchrun sets 1 in its workers unless you set it
  (torch/distributed/elastic/agent/server/local_elastic_agent.py:430-432).
- `py-spy dump --pid <pid>` on every rank: where each one is stuck in Python.
- `TORCH_DISTRIBUTED_DEBUG=DETAIL` costs an extra all-gather per collective: debug only.

Run: torchrun --standalone --nproc-per-node 2 assets/patterns/debug_hangs.py
"""

from __future__ import annotations

import os
import sys

# Both knobs are read before any group exists: DETAIL when torch.distributed is imported and when
# each group is created, the flight recorder's size when it is first used. Set them before
# importing torch (normally in the launch environment; setdefault keeps what the launcher set).
# 2000 is the default from 2.11 on (0, off, before): spelled out so the script says what it relies on.
os.environ.setdefault("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")

import pickle  # noqa: E402
import time  # noqa: E402
from datetime import timedelta  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

STUCK_RANK = 1
SHORT = timedelta(seconds=2)  # side groups time out fast so the demo never hangs
CHECKED = timedelta(seconds=30)  # DETAIL's cross-rank check runs on this group's timeout: room for a busy CPU


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



def demo_collective_mismatch(device: torch.device) -> str:
    """Ranks all-reduce tensors of different shapes; DETAIL mode catches it before it runs."""
    group = dist.new_group(timeout=CHECKED)  # a throwaway group: the default one stays clean
    tensor = torch.ones(2 + dist.get_rank(), device=device)  # shape [2] on rank 0, [3] on rank 1
    try:
        dist.all_reduce(tensor, group=group)
    except RuntimeError as exc:
        message = str(exc).splitlines()[0]
        assert "Detected mismatch between collectives" in message, message
        return message
    raise AssertionError(f"TORCH_DISTRIBUTED_DEBUG=DETAIL did not catch the shape mismatch (got {tensor.tolist()})")


def demo_silent_mismatch() -> str:
    """The same shape mismatch on a group created without DETAIL: no check, no hang on rank 0."""
    group = dist.new_group(backend="gloo", timeout=SHORT)
    tensor = torch.ones(2 + dist.get_rank())
    try:
        dist.all_reduce(tensor, group=group)
    except RuntimeError as exc:
        return f"raised after the group's timeout: {str(exc).splitlines()[0][-60:]}"
    return f"returned {tensor.tolist()}, no error"


def demo_monitored_barrier() -> str | None:
    """STUCK_RANK never reaches the barrier; rank 0 gets an error naming it."""
    gloo = dist.new_group(backend="gloo", timeout=SHORT)  # monitored_barrier needs gloo
    if dist.get_rank() == STUCK_RANK:
        time.sleep(SHORT.total_seconds() + 1)  # "stuck" (a data loader, an early return, ...)
        return None
    try:
        dist.monitored_barrier(group=gloo, timeout=SHORT, wait_all_ranks=True)
    except RuntimeError as exc:
        return str(exc).splitlines()[0]
    raise AssertionError("monitored_barrier did not report the missing rank")


def demo_flight_recorder(device: torch.device) -> None:
    """STUCK_RANK skips one all_reduce; the ranks' flight recorders show which one."""
    side = dist.new_group(backend="gloo", timeout=SHORT)
    tensor = torch.ones(4)
    dist.all_reduce(tensor, group=side)  # everyone: sequence 1 on this group
    if dist.get_rank() != STUCK_RANK:
        try:
            dist.all_reduce(tensor, group=side)  # nobody answers: times out after SHORT
        except RuntimeError as exc:
            print(f"rank {dist.get_rank()}: all_reduce timed out: {str(exc).splitlines()[0][-70:]}", flush=True)
    else:
        time.sleep(SHORT.total_seconds() + 1)

    # torch._C._distributed_c10d._dump_fr_trace() is the in-process dump (private API; with
    # TORCH_FR_DUMP_TEMP_FILE/TORCH_NCCL_DUMP_ON_TIMEOUT the NCCL watchdog writes the same data).
    trace = pickle.loads(torch._C._distributed_c10d._dump_fr_trace())
    # Entries of every group are in one buffer: keep this side group's (process_group = (name, description)).
    entries = [e for e in trace["entries"]
               if e["process_group"][0] == side.group_name and "all_reduce" in e["profiling_name"]]
    mine = [(e["collective_seq_id"], e["profiling_name"], e["state"], e["frames"][-1]["line"]) for e in entries]
    everyone: list[list[tuple] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)  # the healthy default group carries the evidence
    if dist.get_rank() == 0:
        last_seq = {rank: max((e[0] for e in recs), default=0) for rank, recs in enumerate(everyone)}
        for rank, recs in enumerate(everyone):
            tail = ", ".join(f"seq {s} {name} {state}" for s, name, state, _ in recs[-2:])
            print(f"flight recorder rank {rank}: ... {tail}", flush=True)
        behind = [rank for rank, seq in last_seq.items() if seq < max(last_seq.values())]
        print(f"ranks behind (never issued the last all_reduce): {behind}", flush=True)
        assert behind == [STUCK_RANK], last_seq


def main() -> None:
    device = init_distributed()
    rank = dist.get_rank()
    if rank == 0:
        print(f"debug level: {dist.get_debug_level()}; flight recorder entries: {os.environ['TORCH_FR_BUFFER_SIZE']}", flush=True)

    message = demo_collective_mismatch(device)
    print(f"rank {rank}: mismatch caught: {message[:110]}...", flush=True)
    # DETAIL wraps each group created while it is on, checking every collective with a
    # monitored barrier first: that alone would catch the next faults. Turn it off so the next
    # groups show what happens without it, and what monitored_barrier and the flight recorder
    # report by themselves.
    dist.set_debug_level(dist.DebugLevel.OFF)

    outcome = demo_silent_mismatch()
    print(f"rank {rank}: the same mismatch without DETAIL: {outcome}", flush=True)
    if rank == 0:  # [1, 1] + the first two of rank 1's [1, 1, 1]: a wrong result, reported as success
        assert outcome == "returned [2.0, 2.0], no error", outcome
    else:
        assert outcome.startswith("raised"), outcome
    dist.barrier()  # rank 0 waits here until rank 1's all_reduce has timed out: creating a group needs both

    missing = demo_monitored_barrier()
    if missing is not None:
        print(f"rank {rank}: monitored_barrier: {missing}", flush=True)
        assert f"{STUCK_RANK}" in missing, missing

    demo_flight_recorder(device)

    dist.barrier()  # the default group is healthy throughout: faults were confined to side groups
    shutdown()


if __name__ == "__main__":
    main()

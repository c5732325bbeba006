"""One spawned rank of a pool: init the process group once, then run the examples the parent sends.

Protocol over the rank's pipe (parent -> rank / rank -> parent), all plain dicts:
    {"kind": "run", "example": {...}}  ->  {"kind": "result", **execute.run_example(...)}
    {"kind": "sync"}                   ->  {"kind": "synced"}          (a health barrier after an error)
    {"kind": "stop"}                   ->  the rank destroys its group and exits
On start the rank answers {"kind": "ready"} or {"kind": "init-error", "traceback": ...}.

A rank never outlives the parent: on Linux it asks the kernel for SIGKILL when the parent dies, and it
leads its own process group so the parent can kill anything an example started. Its stdout/stderr go
to a log file (C++ warnings from c10d would otherwise interleave with the report), and SIGUSR1 makes
it dump every thread's Python stack to a second file: that is the traceback a hung rank reports.
"""

from __future__ import annotations

import ctypes
import datetime
import faulthandler
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from .execute import RankContext, run_example

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _redirect_output(log_path: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _init_group(rank: int, world_size: int, backend: str, store_path: str, timeout_s: float) -> Any:
    import torch
    import torch.distributed as dist

    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    # A FileStore in the pool's private folder: no rendezvous port to pick, so none can collide or leak.
    store = dist.FileStore(store_path, world_size)
    kwargs: dict[str, Any] = {"device_id": device} if backend == "nccl" else {}
    dist.init_process_group(
        backend,
        store=store,
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=max(timeout_s, 1.0)),
        **kwargs,
    )
    return device


def worker_main(
    rank: int,
    world_size: int,
    backend: str,
    store_path: str,
    log_path: str,
    timeout_s: float,
    parent_pid: int,
    conn: Connection,
) -> None:
    _die_with_parent(parent_pid)
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    _redirect_output(log_path)
    stack_file = open(log_path + ".stack", "w")  # noqa: SIM115 - must stay open for faulthandler
    faulthandler.enable(file=stack_file, all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    try:
        device = _init_group(rank, world_size, backend, store_path, timeout_s)
    except Exception:  # noqa: BLE001 - reported to the parent, which decides
        conn.send({"kind": "init-error", "rank": rank, "traceback": traceback.format_exc()})
        return
    import torch.distributed as dist

    ctx = RankContext(rank=rank, world_size=world_size, local_rank=rank, backend=backend, device=device)
    conn.send({"kind": "ready", "rank": rank})
    try:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                break  # the parent closed the pipe: nothing more to run
            if message["kind"] == "run":
                conn.send({"kind": "result", **run_example(message["example"], ctx)})
            elif message["kind"] == "sync":
                dist.barrier()
                conn.send({"kind": "synced", "rank": rank})
            else:
                break
    finally:
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass

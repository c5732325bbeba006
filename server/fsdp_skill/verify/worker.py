"""One spawned process of a pool: import torch once, then join, serve and leave process groups on command.

A pool spawns as many processes as the largest world size it will need. For each world size N the
parent tells processes 0..N-1 to join a fresh group of size N; the others sit idle (blocked on their
pipe) until a later, larger group needs them. Importing torch is the expensive part of a rank's start;
joining and leaving a gloo group in an already-warm process costs milliseconds.

Protocol over the process's pipe (parent -> process / process -> parent), all plain dicts:
    {"kind": "join", "world_size": N, "store": PATH} -> {"kind": "joined"} or {"kind": "init-error", ...}
    {"kind": "run", "example": {...}}                -> {"kind": "result", **execute.run_example(...)}
    {"kind": "sync"}                                 -> {"kind": "synced"}  (a health barrier after an error)
    {"kind": "leave"}                                -> {"kind": "left"}    (destroy_process_group)
    {"kind": "stop"}                                 -> it leaves any group it is in and exits
On start the process answers {"kind": "ready"} (torch imported, device chosen) or {"kind": "init-error"}.

A process never outlives the parent: on Linux it asks the kernel for SIGKILL when the parent dies, and
it leads its own process group so the parent can kill anything an example started. Its stdout/stderr go
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


def _choose_device(rank: int, backend: str) -> Any:
    """Import torch (the slow part of a start) and pick this process's device once, for every group."""
    import torch
    import torch.distributed  # noqa: F401 - imported here so that joining a group later is cheap

    if backend != "nccl":
        return torch.device("cpu")
    device = torch.device("cuda", rank)  # one process per GPU on this machine: LOCAL_RANK == rank
    torch.cuda.set_device(device)
    return device


def _join(rank: int, world_size: int, backend: str, device: Any, store_path: str, timeout_s: float) -> None:
    import torch.distributed as dist

    # A FileStore in the pool's private folder, a new file for every group: no rendezvous port to pick,
    # so none can collide or leak, and no key of an earlier group can be read by a later one.
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


def _leave() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()  # also destroys any subgroup an example created


def worker_main(rank: int, backend: str, log_path: str, timeout_s: float, parent_pid: int, conn: Connection) -> None:
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
        device = _choose_device(rank, backend)
    except Exception:  # noqa: BLE001 - reported to the parent, which decides
        conn.send({"kind": "init-error", "rank": rank, "traceback": traceback.format_exc()})
        return
    conn.send({"kind": "ready", "rank": rank})
    ctx: RankContext | None = None  # set while this process is a rank of a group
    try:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                break  # the parent closed the pipe: nothing more to run
            kind = message["kind"]
            if kind == "join":
                try:
                    _leave()  # a parent that skipped "leave" still gets a clean group
                    _join(rank, message["world_size"], backend, device, message["store"], timeout_s)
                except Exception:  # noqa: BLE001 - reported to the parent, which decides
                    ctx = None
                    conn.send({"kind": "init-error", "rank": rank, "traceback": traceback.format_exc()})
                    continue
                ctx = RankContext(
                    rank=rank, world_size=message["world_size"], local_rank=rank, backend=backend, device=device
                )
                conn.send({"kind": "joined", "rank": rank})
            elif kind == "run" and ctx is not None:
                conn.send({"kind": "result", **run_example(message["example"], ctx)})
            elif kind == "sync" and ctx is not None:
                import torch.distributed as dist

                dist.barrier()
                conn.send({"kind": "synced", "rank": rank})
            elif kind == "leave":
                ctx = None
                _leave()
                conn.send({"kind": "left", "rank": rank})
            else:  # "stop", or a command that needs a group this process is not in: a parent bug, stop
                break
    finally:
        try:
            _leave()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass

"""The per-rank side of running page code: namespace, launch environment and rewrites.

`execute.run_example` calls these when the payload carries a `page` description (built by
`page_plan`): the page's `__name__` ("__main__" for a program, so its entry point runs), the launcher
shim its `mp.spawn` / `mp.Process` calls go to, the declared stand-ins it may use (see `standins`), and,
for a torchrun script, the environment torchrun would give it (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), restored afterwards so the pool's next example starts clean.
"""

from __future__ import annotations

import ast
import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import Any

from . import standins
from .launcher import SHIM_NAME, LauncherShim, rewrite_page_tree
from .rewrite import DEVICE_NAME

WORLD_SIZE_NAME = "__verify_world_size__"
_TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def rewrite(tree: ast.Module, backend: str) -> ast.Module:
    return rewrite_page_tree(tree, backend, DEVICE_NAME, WORLD_SIZE_NAME)


def prepare(namespace: dict[str, Any], page: dict[str, Any], ctx: Any) -> None:
    # A page's code defines its own rank, world size and device: only the runner's private names stay.
    for name in ("rank", "world_size", "local_rank", "device", "nn", "F", "ReduceOp", "torch", "dist"):
        namespace.pop(name, None)
    namespace["__name__"] = "__main__" if page.get("main") else "__verify__"
    namespace[SHIM_NAME] = LauncherShim(ctx.rank, ctx.world_size)
    namespace[WORLD_SIZE_NAME] = ctx.world_size
    for name in page.get("standins") or []:
        namespace[name] = standins.make(name)


WORKDIR_PREFIX = "fsdp-pagecode-"


def workdir(parent_pid: int) -> str:
    """The folder page code runs in: one per verify run (named by the parent's pid), shared by its ranks
    and by the blocks of a run in order, as a reader runs a page's scripts in one folder; the parent
    removes it at the end (`page_run.remove_workdir`). Relative paths never land in the checkout."""
    # `<prefix><pid>-run`: core.scratch reads the owner from the name, so a killed run's folder is swept
    # (`page_run.remove_workdir`) and a live run's is never taken for a leftover by another run's pool.
    return os.path.join(tempfile.gettempdir(), f"{WORKDIR_PREFIX}{parent_pid}-run")


@contextlib.contextmanager
def launch_environment(page: dict[str, Any] | None, ctx: Any) -> Iterator[None]:
    if page is None:
        yield
        return
    folder = workdir(os.getppid())
    os.makedirs(folder, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with _torchrun_env(page, ctx):
            yield
    finally:
        os.chdir(cwd)


@contextlib.contextmanager
def _torchrun_env(page: dict[str, Any], ctx: Any) -> Iterator[None]:
    if not page.get("torchrun_env"):
        yield
        return
    saved = {key: os.environ.get(key) for key in _TORCHRUN_ENV}
    os.environ.update(
        {
            "RANK": str(ctx.rank),
            "WORLD_SIZE": str(ctx.world_size),
            "LOCAL_RANK": str(ctx.local_rank),
            "LOCAL_WORLD_SIZE": str(ctx.world_size),
            "MASTER_ADDR": "127.0.0.1",
            # Never bound: the pool's group stands in for the one init_process_group would create.
            "MASTER_PORT": "0",
        }
    )
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def launch_error(namespace: dict[str, Any], page: dict[str, Any], ctx: Any) -> dict[str, Any] | None:
    """A launcher that never ran this rank's process means the page's world size was not the group's."""
    expected = int(page.get("expects_launch") or 0)
    if not expected:
        return None
    shim = namespace.get(SHIM_NAME)
    started = getattr(shim, "started", 0)
    if started == expected:
        return None
    return {
        "unit": None,
        "line": None,
        "type": "LaunchMismatch",
        "message": f"the page's launcher ran {started} process(es) as rank {ctx.rank} of {ctx.world_size}, "
        f"not {expected}: its world size is not the group's",
        "traceback": "",
    }

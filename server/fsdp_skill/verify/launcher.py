"""Run a page's own launcher inside the pool: its process starts are served by the pool's ranks.

A tutorial launches its ranks itself: `mp.spawn(demo_fn, args=(world_size,), nprocs=world_size)` or a
`for rank in range(size): mp.Process(target=init_process, args=(rank, size, run)).start()` loop. The
runner's ranks already exist (spawned once, in one process group), so the page's code runs on every
rank unchanged except that those calls go to `LauncherShim`: on rank r, `spawn(fn, args, nprocs)` calls
`fn(r, *args)`, and `Process(target, args).start()` runs the target only for the process whose first
argument is r — exactly the function the page's own r-th process would have run. `init_process_group`
and `destroy_process_group` are already no-ops (see `rewrite`): the pool's group stands in for the
one the page's processes would form. Launching a different number of processes than the group has
raises, so a wrong world size cannot pass silently.

Also here, the rewrites only page code needs on gloo (each recorded in the report row):
`x.to(rank)` / `x.to(local_rank)` / `x.to(device_id)` (the rank's GPU) -> the rank's device, and
`torch.cuda.device_count()` (one GPU per rank on the page's machine) -> the world size.
"""

from __future__ import annotations

import ast
from typing import Any

from .code_shape import dotted

SHIM_NAME = "__verify_launcher__"
_LAUNCHER_MODULES = frozenset({"mp", "torch.multiprocessing", "multiprocessing"})
_SHIMMED = frozenset({"spawn", "start_processes", "Process", "set_start_method", "get_context"})
RANK_DEVICE_NAMES = frozenset({"rank", "local_rank", "device_id", "gpu", "gpu_id"})


class _Process:
    def __init__(
        self,
        shim: LauncherShim,
        target: Any = None,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        self.shim, self.target, self.args, self.kwargs = shim, target, tuple(args), dict(kwargs or {})
        self.exitcode: int | None = None

    def start(self) -> None:
        if self.args and self.args[0] == self.shim.rank and self.target is not None:
            self.shim.started += 1
            self.target(*self.args, **self.kwargs)
        self.exitcode = 0

    def join(self, timeout: float | None = None) -> None:
        return None

    def is_alive(self) -> bool:
        return False


class LauncherShim:
    """What `mp.spawn` / `mp.Process` become on rank `rank` of a `world_size`-rank pool group."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size
        self.started = 0  # how many of the page's processes this rank ran (1 when the launch fit)

    def spawn(
        self,
        fn: Any,
        args: tuple[Any, ...] = (),
        nprocs: int = 1,
        join: bool = True,
        daemon: bool = False,
        start_method: str = "spawn",
    ) -> None:
        if nprocs != self.world_size:
            raise RuntimeError(f"the page launches {nprocs} processes; the runner's group has {self.world_size} ranks")
        self.started += 1
        fn(self.rank, *args)

    def start_processes(self, fn: Any, args: tuple[Any, ...] = (), nprocs: int = 1, **_: Any) -> None:
        self.spawn(fn, args, nprocs)

    def Process(self, *args: Any, **kwargs: Any) -> _Process:
        return _Process(self, *args, **kwargs)

    def set_start_method(self, *args: Any, **kwargs: Any) -> None:
        return None

    def get_context(self, *args: Any, **kwargs: Any) -> LauncherShim:
        return self



class _PageRewriter(ast.NodeTransformer):
    def __init__(self, backend: str, device_name: str, world_size_name: str) -> None:
        self.cpu = backend != "nccl"
        self.device_name, self.world_size_name = device_name, world_size_name

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _SHIMMED and dotted(func.value) in _LAUNCHER_MODULES:
            node.func = ast.copy_location(ast.Attribute(ast.Name(SHIM_NAME, ast.Load()), func.attr, ast.Load()), func)
            return node
        if not self.cpu:
            return node
        if dotted(func) == "torch.cuda.device_count":
            return ast.copy_location(ast.Name(self.world_size_name, ast.Load()), node)
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "to"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in RANK_DEVICE_NAMES
        ):
            node.args = [ast.copy_location(ast.Name(self.device_name, ast.Load()), node.args[0])]
        return node


def rewrite_page_tree(tree: ast.Module, backend: str, device_name: str, world_size_name: str) -> ast.Module:
    return ast.fix_missing_locations(_PageRewriter(backend, device_name, world_size_name).visit(tree))


def page_rewrites(code: str, backend: str) -> list[str]:
    """The rewrites a page block gets, in words, for its report row."""
    found: list[str] = []
    if backend == "nccl":
        return found
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return found
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    if "nccl" in strings:
        found.append("nccl->gloo")
    if (
        any(s == "cuda" or s.startswith("cuda:") for s in strings)
        or any(isinstance(c.func, ast.Attribute) and c.func.attr == "cuda" for c in calls)
        or any(isinstance(n, ast.JoinedStr) and "cuda:" in ast.unparse(n) for n in ast.walk(tree))
    ):
        found.append("cuda->cpu")
    if any(
        isinstance(c.func, ast.Attribute)
        and c.func.attr == "to"
        and len(c.args) == 1
        and isinstance(c.args[0], ast.Name)
        and c.args[0].id in RANK_DEVICE_NAMES
        for c in calls
    ):
        found.append(".to(rank)->.to(cpu)")
    if any(dotted(c.func) == "torch.cuda.device_count" for c in calls):
        found.append("torch.cuda.device_count()->world size")
    if any(dotted(c.func) == "torch.cuda.set_device" for c in calls):
        found.append("torch.cuda.set_device->no-op")
    return found

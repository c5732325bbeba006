"""The shape of a block of Python, read from its syntax tree: what it defines and reads, whether it
is a program (an entry point, a torchrun script), a rank function, or a launcher template.

Stdlib only: the build classifies page code with it (`build.page_code`) and the runner assembles and
plans with it (`verify.page_plan`), so both read a block the same way.
"""

from __future__ import annotations

import ast
import builtins

RANK_PARAMS = ("rank", "local_rank", "rank_id")
SIZE_PARAMS = ("world_size", "size", "ws", "world", "nprocs")
LAUNCH_CALLS = frozenset({"spawn", "Process", "start_processes"})
BUILTINS = frozenset(dir(builtins))


def dotted_parts(node: ast.AST) -> list[str] | None:
    """`a.b.c` as ['a', 'b', 'c']; None when the chain does not start at a plain name (`f().x`)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return list(reversed(parts))
    return None


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` as one string, or None (see dotted_parts)."""
    parts = dotted_parts(node)
    return ".".join(parts) if parts else None


def _bound(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a block leaves defined for the blocks after it (imports, defs, classes, assignments)."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        elif isinstance(stmt, (ast.If, ast.With, ast.For, ast.Try, ast.While)):
            if not is_main_guard(stmt):
                names.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        else:
            names.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def free_names(tree: ast.Module) -> set[str]:
    """Names the block reads that nothing in it binds (nor the builtins)."""
    bound = _bound(tree)
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - bound - BUILTINS


def is_main_guard(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return False
    parts = [stmt.test.left, *stmt.test.comparators]
    return any(isinstance(p, ast.Name) and p.id == "__name__" for p in parts) and any(
        isinstance(p, ast.Constant) and p.value == "__main__" for p in parts
    )


def has_main_guard(tree: ast.Module) -> bool:
    return any(is_main_guard(stmt) for stmt in tree.body)


def call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def launches_processes(tree: ast.AST) -> bool:
    """Whether the code starts ranks itself (`mp.spawn`, `mp.Process`, `start_processes`)."""
    return any(isinstance(n, ast.Call) and call_name(n) in LAUNCH_CALLS for n in ast.walk(tree))


def defines_launcher(tree: ast.Module) -> bool:
    """A launcher template: a function that starts ranks (`run_demo(fn, world_size)` calling
    `mp.spawn`), or a `__main__` entry point that does (`mp.Process(target=init_process, ...)`)."""
    return any(
        (isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) or is_main_guard(stmt)) and launches_processes(stmt)
        for stmt in tree.body
    )


def rank_functions(tree: ast.Module) -> list[str]:
    """Top-level functions whose first two parameters are a rank and a world size."""
    found: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [a.arg for a in stmt.args.args]
            if len(params) >= 2 and params[0] in RANK_PARAMS and params[1] in SIZE_PARAMS:
                found.append(stmt.name)
    return found


def is_torchrun_script(tree: ast.Module) -> bool:
    top_calls = {
        call_name(n)
        for stmt in tree.body
        for n in ast.walk(stmt)
        if isinstance(n, ast.Call) and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    return bool(top_calls & {"init_process_group", "init_device_mesh"})

"""Run one example on one rank: fresh namespace, rewritten units, captured output, warnings and errors.

Called inside a pool worker (spawned rank) and, under torchrun, in the launched process itself. The
units arrive as JSON (see `examples.Unit`); the result is a JSON-able dict the parent compares.
"""

from __future__ import annotations

import ast
import contextlib
import io
import linecache
import re
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

from . import page_exec
from .module_globals import module_globals
from .rewrite import BACKEND_NAME, DEVICE_NAME, rewrite_tree

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# c10d prefixes C++ errors with a rank and a timestamp: "[rank0]:[F1129 11:44:05.301781610 File.cpp:12] "
_C10D_PREFIX = re.compile(r"\[rank\d+\]:\[[A-Z]\d{4} [\d:.]+ ([^\]]*)\] ")


# pybind11's TypeError ends with the reprs of the arguments (sockets, ports, fds): different every run.
_PYBIND_ARGS = re.compile(r"\n\s*Invoked with:.*", re.DOTALL)


def clean_message(text: str) -> str:
    """An error message without run-specific noise (addresses, timestamps, argument reprs), so reports
    do not churn."""
    text = _PYBIND_ARGS.sub("\nInvoked with: (argument reprs elided)", text)
    return _C10D_PREFIX.sub(r"[\1] ", _ADDRESS.sub("", text)).strip()



@dataclass
class RankContext:
    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: Any  # torch.device; typed loosely so this module imports without torch


def _namespace(ctx: RankContext, symbol: str | None) -> dict[str, Any]:
    """doctest's globs (a copy of the documented object's module globals), with the runner's names on top.

    Ours win: an example's `rank`, `device` or `dist` must be the runner's, whatever the module calls so.
    """
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    namespace = module_globals(symbol) if symbol else {}
    namespace.update({
        "__name__": "__verify__",
        "__builtins__": __builtins__,
        "torch": torch,
        "dist": dist,
        "nn": nn,
        "F": F,
        "ReduceOp": dist.ReduceOp,
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "local_rank": ctx.local_rank,
        "device": ctx.device,
        DEVICE_NAME: ctx.device,
        BACKEND_NAME: ctx.backend,
    })
    return namespace


def _compile_unit(source: str, filename: str, backend: str, page: bool = False) -> tuple[Any, Any]:
    """(code for the statements, code for a trailing expression or None) — doctest's displayhook rule."""
    # linecache lets tracebacks and faulthandler show the example's own lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    tree = ast.parse(source, filename)
    if page:  # page code: its own launcher and rank-device idioms (see page_exec)
        tree = page_exec.rewrite(tree, backend)
    tree = rewrite_tree(tree, backend)
    tail = None
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr):
        tree.body.pop()
        tail = compile(ast.Expression(last.value), filename, "eval")
    return compile(tree, filename, "exec"), tail


def _short_path(filename: str) -> str:
    """'/any/venv/lib/python3.11/site-packages/torch/x.py' -> 'torch/x.py': reports are machine-independent."""
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def _example_traceback(exc: BaseException) -> str:
    """The traceback without the runner's own frames: it starts at the example's line."""
    frames = traceback.StackSummary.from_list(
        [
            traceback.FrameSummary(_short_path(f.filename), f.lineno, f.name, line=f.line)
            for f in traceback.extract_tb(exc.__traceback__)
            if f.filename != __file__
        ]
    )
    lines = ["Traceback (most recent call last):\n", *frames.format()]
    lines += [clean_message(line) + "\n" for line in traceback.format_exception_only(type(exc), exc)]
    return "".join(lines)


def _undefined_in_example(exc: BaseException, example_id: str) -> str | None:
    """The name, when the example's own code read a name nothing defines (it is a fragment, not wrong).

    Only a NameError raised in the example's frames counts: one raised inside torch is torch's bug.
    """
    if type(exc) is not NameError or not isinstance(getattr(exc, "name", None), str):
        return None
    frames = traceback.extract_tb(exc.__traceback__)
    return exc.name if frames and frames[-1].filename.startswith(f"<{example_id} line ") else None


def format_warning(w: warnings.WarningMessage) -> str:
    text = str(w.message).strip().splitlines()[0] if str(w.message).strip() else ""
    return f"{w.category.__name__}: {_ADDRESS.sub('', text)}"


def run_example(payload: dict[str, Any], ctx: RankContext, barrier: bool = True) -> dict[str, Any]:
    """Execute the payload's units in order; stop at the first exception (later state is undefined)."""
    import torch
    import torch.distributed as dist

    torch.manual_seed(0)  # examples using randn print the same numbers run after run
    torch.set_default_dtype(torch.float32)
    namespace = _namespace(ctx, payload.get("symbol"))
    page = payload.get("page")
    if page is not None:
        page_exec.prepare(namespace, page, ctx)
    outputs: dict[str, str] = {}
    error: dict[str, Any] | None = None
    started = time.perf_counter()
    with page_exec.launch_environment(page, ctx), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for index, unit in enumerate(payload["units"]):
            filename = f"<{payload['id']} line {unit.get('line')}>"
            buffer = io.StringIO()
            try:
                body, tail = _compile_unit(unit["source"], filename, ctx.backend, page is not None)
                with contextlib.redirect_stdout(buffer):
                    exec(body, namespace)
                    value = eval(tail, namespace) if tail is not None else None
                    if value is not None:
                        print(repr(value))
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - the example's failure is the result, not the runner's
                # (torch's CheckpointException derives from BaseException: it must not kill the rank)
                error = {
                    "unit": index,
                    "line": unit.get("line"),
                    "type": type(exc).__name__,
                    "message": clean_message(str(exc)),
                    "traceback": _example_traceback(exc),
                }
                if undefined := _undefined_in_example(exc, payload["id"]):
                    error["undefined_name"] = undefined
                break
            outputs[str(index)] = buffer.getvalue()
        if error is None and page is not None:
            error = page_exec.launch_error(namespace, page, ctx)
        if error is None and ctx.device.type == "cuda":
            torch.cuda.synchronize(ctx.device)
    seen: dict[str, None] = {}
    for w in caught:
        seen.setdefault(format_warning(w), None)
    if error is None and barrier:
        # Every rank finished its collectives before the next example starts on the same group.
        try:
            dist.barrier()
        except Exception as exc:  # noqa: BLE001 - a peer that raised or diverged; the parent decides
            error = {
                "unit": len(payload["units"]),
                "line": None,
                "type": type(exc).__name__,
                "message": "the barrier after the example failed: " + clean_message(str(exc)),
                "traceback": _example_traceback(exc),
            }
    return {
        "rank": ctx.rank,
        "outputs": outputs,
        "error": error,
        "warnings": list(seen),
        "seconds": time.perf_counter() - started,
    }

"""Check code that cannot run: parse it, resolve every torch name it uses, bind every call to torch.

For a fragment (a block that uses names it never defines, a docstring example that is part of a
program) running proves nothing, but three things can still be checked against the installed torch:

1. it parses (a block the page labels Python and that is not Python is a doc-bug);
2. every torch name it uses resolves: each `import` / `from ... import` of a torch module, and each
   dotted name rooted in one (`dist.ReduceOp.SUM`, `torch.distributed.fsdp.fully_shard`);
3. every call of a resolved torch callable binds to its `inspect.signature`: the number of positional
   arguments and the keyword names (`dist.send(tensor=t, dst=1)`), `*args` / `**kwargs` accepted.

A name that does not resolve or a call that does not bind is a doc-bug with the evidence (the name and
the attribute torch lacks; the call, the signature and the TypeError). Otherwise the result is
"checked: N names resolved, M calls bound" — never "passed": nothing ran. Names from other packages
(torchvision, transformers) are not checked and are counted apart.

Stdlib + torch, like the rest of the runner; torch modules are imported as the names need them.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any

from .code_shape import dotted_parts

_MISSING = object()
# Names conventionally bound in torch docs; used for a block that uses them while the page imports them
# in another block (or, for a docstring, the defining module's globals do).
# (`optim` and `mp` are not among them: pages use `optim` for an optimizer instance too.)
CONVENTIONAL = {
    "torch": "torch",
    "dist": "torch.distributed",
    "nn": "torch.nn",
    "F": "torch.nn.functional",
    "dcp": "torch.distributed.checkpoint",
}


@dataclass
class StaticResult:
    names: int = 0  # torch names resolved
    calls: int = 0  # calls of torch callables whose arguments bind
    external: set[str] = field(default_factory=set)  # non-torch imports, not checked
    failures: list[str] = field(default_factory=list)  # doc-bug evidence, one line each
    # Names of a communication backend this torch build was compiled without (ProcessGroupNCCL on a CPU
    # wheel): absent here, present in a build with that backend, so they say nothing about the docs.
    unbuilt: list[str] = field(default_factory=list)
    syntax_error: str | None = None

    @property
    def summary(self) -> str:
        text = f"checked: {self.names} names resolved, {self.calls} calls bound"
        if self.external:
            text += f" (not checked, outside torch: {', '.join(sorted(self.external))})"
        return text


# Backend-specific names, and how torch.distributed says whether this build has the backend.
_BACKEND_MARKERS = {
    "NCCL": "is_nccl_available",
    "Nccl": "is_nccl_available",
    "MPI": "is_mpi_available",
    "UCC": "is_ucc_available",
    "XCCL": "is_xccl_available",
}


def unbuilt_backend(label: str) -> str | None:
    """The backend a name belongs to when this torch build lacks it (`dist.ProcessGroupNCCL` on a CPU
    wheel -> 'NCCL'); None for any other name."""
    import torch.distributed as dist

    for marker, probe in _BACKEND_MARKERS.items():
        if any(marker in part for part in label.split(".")[1:]):
            available = getattr(dist, probe, None)
            if available is not None and not available():
                return marker.upper()
    return None


def _import(path: str) -> Any:
    """The object at a dotted torch path (longest importable module, then attributes), or _MISSING."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        except Exception:  # noqa: BLE001 - a module that raises on import does not resolve
            return _MISSING
        for attr in parts[cut:]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obj = getattr(obj, attr, _MISSING)
            if obj is _MISSING:
                return _MISSING
        return obj
    return _MISSING


def resolve_path(path: str) -> Any:
    """The object at a dotted torch path, or None when it does not resolve."""
    obj = _import(path)
    return None if obj is _MISSING else obj



def page_imports(trees: list[ast.Module]) -> dict[str, str]:
    """name -> torch path for every import of a torch module or name in these blocks (a page's context)."""
    found: dict[str, str] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "torch":
                        found[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else "torch"
            elif (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.level == 0
                and node.module.split(".")[0] == "torch"
            ):
                for alias in node.names:
                    if alias.name != "*":
                        found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def _bound_locally(tree: ast.Module) -> set[str]:
    """Names the block itself assigns (a local `model` is not torch's, whatever the page imported)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _check_imports(tree: ast.Module, result: StaticResult) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root != "torch":
                    result.external.add(root)
                elif _import(alias.name) is _MISSING:
                    result.failures.append(
                        f"line {node.lineno}: `import {alias.name}`: no such module in the installed torch"
                    )
                else:
                    result.names += 1
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            root = node.module.split(".")[0]
            if root != "torch":
                result.external.add(root)
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                if _import(f"{node.module}.{alias.name}") is _MISSING:
                    result.failures.append(
                        f"line {node.lineno}: `from {node.module} import {alias.name}`: "
                        f"{node.module} has no {alias.name} in the installed torch"
                    )
                else:
                    result.names += 1


def _bind(func: Any, call: ast.Call) -> str | None:
    """Why the call's arguments do not bind to func's signature, or None (also when unknowable)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None  # *args / **kwargs at the call site: the count is unknown
    if any(
        isinstance(a, ast.Constant) and a.value is Ellipsis for a in [*call.args, *(k.value for k in call.keywords)]
    ):
        return None  # `nn.Embedding(...)`: the page elides the arguments on purpose
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*[None] * len(call.args), **{k.arg: None for k in call.keywords if k.arg})
    except TypeError as exc:
        return f"{exc} (signature: {signature})"
    return None


def check(code: str, context: dict[str, str] | None = None, globals_: dict[str, Any] | None = None) -> StaticResult:
    """Check one block. context: name -> torch path the page binds elsewhere (`page_imports`);
    globals_: objects a docstring example finds in its module's globals."""
    result = StaticResult()
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        result.syntax_error = f"not valid Python: line {exc.lineno}: {exc.msg}"
        return result
    _check_imports(tree, result)
    names = {**(context or {}), **page_imports([tree])}
    local = _bound_locally(tree) - set(page_imports([tree]))
    resolved: dict[int, Any] = {}  # id(node) -> object, for the calls
    seen: set[tuple[str, ...]] = set()
    # Only whole dotted chains count (`dist.ReduceOp.SUM` is one name, not also `dist` and `dist.ReduceOp`).
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Attribute, ast.Name)) or not isinstance(node.ctx, ast.Load) or id(node) in inner:
            continue
        parts = dotted_parts(node)
        if not parts or parts[0] in local:
            continue
        root = parts[0]
        if root in names:
            base: Any = names[root]
            path = ".".join([base, *parts[1:]])
            obj = _import(path)
            label = ".".join(parts)
        elif globals_ is not None and root in globals_ and getattr(globals_[root], "__name__", "").startswith("torch"):
            obj = globals_[root]
            for attr in parts[1:]:
                obj = getattr(obj, attr, _MISSING)
                if obj is _MISSING:
                    break
            label = ".".join(parts)
        else:
            continue
        resolved[id(node)] = obj
        key = tuple(parts)
        if key in seen:
            continue
        seen.add(key)
        if obj is _MISSING and (backend := unbuilt_backend(label)):
            result.unbuilt.append(f"`{label}` (this torch build has no {backend})")
        elif obj is _MISSING:
            result.failures.append(f"line {node.lineno}: `{label}` does not resolve in the installed torch")
        else:
            result.names += 1
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node.func) in resolved:
            func = resolved[id(node.func)]
            if func is _MISSING or not callable(func):
                continue
            why = _bind(func, node)
            if why:
                result.failures.append(f"line {node.lineno}: `{ast.unparse(node)[:120]}` does not bind: {why}")
            else:
                result.calls += 1
    return result

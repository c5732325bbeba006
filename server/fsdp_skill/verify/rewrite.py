"""Make upstream's CUDA-flavoured examples run on the rank's own device, and say when they cannot.

Upstream examples hard-code `torch.device(f"cuda:{rank}")`, `.cuda()`, `device_ids=[rank]` and call
`init_process_group("nccl")` themselves. The runner owns the process group and binds the rank's device,
so the rewrite (an AST transform; comments and line numbers survive because we compile the tree, not
re-rendered text) points every hard-coded CUDA device at the runner's device:

- `torch.device("cuda:0")`, `torch.device("cuda", rank)`, `"cuda:1"`, `f"cuda:{rank}"` -> the rank's device
- `"cuda"` -> the rank's device type (`"cpu"` on gloo), `x.cuda(...)` -> `x.to(device)`
- `init_process_group(...)` / `destroy_process_group(...)` -> no-ops (the pool keeps one group alive)
- `"nccl"` backend strings -> the backend being verified (`"gloo"` stays: it works beside NCCL too)
- on gloo: `torch.cuda.set_device(...)` -> no-op; `device_ids=`, `output_device=`, `device_id=` -> None

`analyze` finds what no rewrite can fix: names the example uses but neither defines nor finds in its
module's globals (upstream shows a fragment), `...` used as a placeholder value, and CUDA-only APIs
(streams, events, memory stats).
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .code_shape import dotted

DEVICE_NAME = "__verify_device__"
BACKEND_NAME = "__verify_backend__"

# What the runner binds in every example's namespace: the names upstream's examples assume exist.
BOUND_NAMES = frozenset(
    {"torch", "dist", "nn", "F", "ReduceOp", "rank", "world_size", "local_rank", "device", DEVICE_NAME, BACKEND_NAME}
)

_CUDA_DEVICE_STRING = re.compile(r"^cuda(:\d+)?$")
_PG_LIFECYCLE = {"init_process_group", "destroy_process_group"}
_CPU_NONE_KEYWORDS = {"device_ids", "output_device", "device_id"}
# torch.cuda attributes that are harmless on a CPU-only build (they answer instead of raising).
_CUDA_SAFE_ON_CPU = {"is_available", "device_count", "set_device"}



def _is_cuda_device_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(_CUDA_DEVICE_STRING.match(node.value)) and node.value != "cuda"
    if isinstance(node, ast.JoinedStr) and node.values:
        head = node.values[0]
        return isinstance(head, ast.Constant) and isinstance(head.value, str) and head.value.startswith("cuda:")
    return False


def _device(node: ast.AST) -> ast.expr:
    return ast.copy_location(ast.Name(DEVICE_NAME, ast.Load()), node)


def _none(node: ast.AST) -> ast.expr:
    return ast.copy_location(ast.Constant(None), node)


class _DeviceRewriter(ast.NodeTransformer):
    def __init__(self, backend: str) -> None:
        self.cpu = backend != "nccl"

    def visit_Call(self, node: ast.Call) -> ast.AST:
        name = dotted(node.func) or ""
        last = name.rsplit(".", 1)[-1]
        if last in _PG_LIFECYCLE and (name == last or name.startswith(("dist.", "torch.distributed."))):
            return _none(node)
        if name == "torch.device" and node.args and (
            _is_cuda_device_literal(node.args[0])
            or (isinstance(node.args[0], ast.Constant) and node.args[0].value == "cuda" and len(node.args) == 2)
        ):
            return _device(node)
        if name == "torch.cuda.set_device":
            if self.cpu:
                return _none(node)
            node.args = [_device(node)]
            return node
        if isinstance(node.func, ast.Attribute) and node.func.attr == "cuda" and dotted(node.func) != "torch.cuda":
            # `tensor.cuda()` / `model.cuda(rank)` -> `.to(device)`; `torch.cuda` itself is a module, not a call.
            target = self.visit(node.func.value)
            func = ast.copy_location(ast.Attribute(target, "to", ast.Load()), node.func)
            return ast.copy_location(ast.Call(func, [_device(node)], []), node)
        self.generic_visit(node)
        if self.cpu:
            for kw in node.keywords:
                if kw.arg in _CPU_NONE_KEYWORDS:
                    kw.value = _none(kw.value)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, str):
            if node.value == "cuda":
                return ast.copy_location(ast.Attribute(_device(node), "type", ast.Load()), node)
            if _is_cuda_device_literal(node):
                return _device(node)
            if node.value == "nccl":
                return ast.copy_location(ast.Name(BACKEND_NAME, ast.Load()), node)
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return _device(node) if _is_cuda_device_literal(node) else node


def rewrite_tree(tree: ast.Module, backend: str) -> ast.Module:
    new = _DeviceRewriter(backend).visit(tree)
    return ast.fix_missing_locations(new)


def rewrite_source(source: str, backend: str) -> str:
    """The rewritten code as text (for display and tests; execution compiles the tree itself)."""
    return ast.unparse(rewrite_tree(ast.parse(source), backend))


@dataclass(frozen=True)
class Analysis:
    undefined: tuple[str, ...]  # names read but never bound by the example or the runner
    placeholders: tuple[int, ...]  # lines where `...` stands in for a value
    cuda_only: tuple[str, ...]  # CUDA-only APIs left after the rewrite (gloo only)
    fixed_ports: tuple[str, ...] = ()  # hard-coded TCP endpoints the example would bind or dial
    raising_lines: tuple[int, ...] = ()  # lines whose comment says the statement raises (on purpose)
    reads_argv: bool = False  # parses the launcher's command line (argparse parse_args(), sys.argv)
    nothing_left: bool = False  # every statement was set-up the runner does itself (init, set_device)


def _bound_names(tree: ast.AST) -> set[str]:
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, ast.MatchAs) and node.name:
            bound.add(node.name)
    return bound


def _placeholder_lines(tree: ast.AST) -> list[int]:
    lines: list[int] = []
    for node in ast.walk(tree):
        values: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            values.append(node.value)
        elif isinstance(node, ast.Call):
            values.extend(node.args)
            values.extend(kw.value for kw in node.keywords)
        lines.extend(v.lineno for v in values if isinstance(v, ast.Constant) and v.value is Ellipsis)
    return lines


def _cuda_only_apis(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        name = dotted(node) if isinstance(node, ast.Attribute) else None
        if name and name.startswith("torch.cuda.") and name.split(".")[2] not in _CUDA_SAFE_ON_CPU:
            found.append(".".join(name.split(".")[:3]))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch.cuda"):
            found.append(node.module or "torch.cuda")
    return found


_TCP_URL = re.compile(r"^tcp://[^:/]+:\d+")
_SAYS_RAISES = re.compile(r"#.*\b(raises?|throws?|will raise|will throw)\b", re.IGNORECASE)


def _fixed_ports(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _TCP_URL.match(node.value):
            found.append(node.value)
        elif isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] == "TCPStore":
            port = (
                node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "port"), None)
            )
            # Port 0 asks the OS for a free port: that one cannot collide, so it is fine.
            if isinstance(port, ast.Constant) and isinstance(port.value, int) and port.value != 0:
                found.append(f"TCPStore port {port.value}")
    return found


def _raising_lines(source: str) -> list[int]:
    """Lines whose comment (trailing, or a comment line of its own) says the code raises or throws."""
    return [n for n, line in enumerate(source.splitlines(), 1) if "#" in line and _SAYS_RAISES.search(line)]


def _target_names(stmt: ast.stmt) -> set[str]:
    targets: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _undefined(tree: ast.Module, provided: set[str]) -> set[str]:
    """Names read before anything binds them, statement by statement (`model = FSDP(model)` reads
    `model` first). Bodies of functions and classes may use anything the example binds anywhere."""
    everywhere = _bound_names(tree)
    bound = set(provided)
    missing: set[str] = set()
    for stmt in tree.body:
        inside = _bound_names(stmt)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            allowed = bound | everywhere
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
            allowed = bound | (inside - _target_names(stmt))  # comprehension and lambda names only
        else:
            allowed = bound | inside  # loops, ifs, withs: their own bindings are made as they run
        loaded = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        missing |= loaded - allowed
        bound |= inside
    return missing


def _reads_argv(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "parse_args"
            and not node.args
        ):
            return True
        if dotted(node) == "sys.argv":
            return True
    return False


def _does_nothing(tree: ast.Module) -> bool:
    """Only imports, docstrings/constants and no-op'd set-up calls remain after the rewrite."""
    return all(
        isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass))
        or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
        for stmt in tree.body
    )


def analyze(sources: list[str], backend: str, provided: Iterable[str] = ()) -> Analysis:
    """What keeps the (rewritten) example from running as written: see `Analysis`.

    `provided`: names the example's namespace already holds besides the runner's own and the builtins
    (the defining module's globals, as doctest provides them).
    """
    original = ast.parse("\n".join(sources))
    tree = rewrite_tree(ast.parse("\n".join(sources)), backend)
    # Undefined names are judged on the code as written: the rewrite may drop a call (set_device(args.x)).
    undefined = sorted(_undefined(original, set(BOUND_NAMES) | set(dir(builtins)) | set(provided)))
    cuda_only = sorted(set(_cuda_only_apis(tree))) if backend != "nccl" else []
    return Analysis(
        tuple(undefined),
        tuple(sorted(set(_placeholder_lines(tree)))),
        tuple(cuda_only),
        tuple(sorted(set(_fixed_ports(tree)))),
        tuple(_raising_lines("\n".join(sources))),
        _reads_argv(tree),
        _does_nothing(tree),
    )

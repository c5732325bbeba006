"""Decide, before spawning anything, which examples can run here and why the others cannot.

Every skip names a concrete reason a reader can act on (install numpy, use a GPU machine, ...).
Upstream's `xdoctest: +SKIP(...)` marks are not a reason by themselves: most say "no rank" or "need
process group init", which is exactly what the runner provides. They are reported when the example
then turns out to be a fragment, so the reader sees both upstream's note and the concrete gap.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass

from .examples import ExampleSpec
from .module_globals import defining_module, global_names
from .rewrite import analyze

# More ranks than this on one machine are not spawned (each is a full Python process with torch loaded).
MAX_LOCAL_RANKS = 8
_KNOWN_REQUIREMENTS = {"cuda", "multi-gpu", "numpy", "rpc", "gloo", "nccl"}
# An operating-system requirement (xdoctest's +REQUIRES(LINUX)), e.g. "platform:linux": sys.platform's prefix.
_PLATFORM = "platform:"


@dataclass(frozen=True)
class Capabilities:
    torch_version: str
    cuda_available: bool
    gpu_count: int
    nccl_available: bool
    gloo_available: bool
    rpc_available: bool
    numpy_available: bool

    @classmethod
    def detect(cls) -> Capabilities:
        import torch
        import torch.distributed as dist

        cuda = torch.cuda.is_available()
        rpc_ok = False
        if dist.is_available():
            try:
                import torch.distributed.rpc as rpc

                rpc_ok = rpc.is_available()
            except ImportError:
                rpc_ok = False
        return cls(
            torch_version=torch.__version__.split("+")[0],
            cuda_available=cuda,
            gpu_count=torch.cuda.device_count() if cuda else 0,
            nccl_available=dist.is_available() and dist.is_nccl_available(),
            gloo_available=dist.is_available() and dist.is_gloo_available(),
            rpc_available=rpc_ok,
            numpy_available=importlib.util.find_spec("numpy") is not None,
        )


def symbol_exists(qualified_name: str) -> bool:
    """Whether `torch.x.y.Name(.attr)` resolves in the installed torch (import the longest module prefix)."""
    parts = qualified_name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        except Exception:  # noqa: BLE001 - a module that fails to import does not exist *usably*
            return False
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _upstream(spec: ExampleSpec) -> str:
    return f" (upstream marks it SKIP: {spec.skip})" if spec.skip else ""


def skip_reason(
    spec: ExampleSpec, backend: str, world_size: int, caps: Capabilities, launched: bool = False
) -> str | None:
    """Why this example cannot run here on this backend at this world size, or None if it can.

    Call `syntax_error` first: code that does not parse is reported as a doc-bug, not analysed here.
    """
    if not spec.units:
        return "no code to run: the catalog entry has no statements"
    return _machine_reason(spec, backend, world_size, caps, launched) or _code_reason(spec, backend)


def _machine_reason(spec: ExampleSpec, backend: str, world_size: int, caps: Capabilities, launched: bool) -> str | None:
    """What this machine lacks for the example: backend, GPUs, RPC, packages, the API itself, ranks."""
    if backend == "nccl":
        if not caps.nccl_available:
            return f"needs NCCL: this torch build ({caps.torch_version}) has no NCCL backend"
        if not caps.cuda_available:
            return "needs CUDA: no GPU is visible (torch.cuda.is_available() is False)"
        if caps.gpu_count < world_size:
            return f"needs {world_size} GPUs (one per rank); {caps.gpu_count} visible"
    elif not caps.gloo_available:
        return "needs gloo: this torch build has no gloo backend"
    if "rpc" in spec.requires:
        if not caps.rpc_available:
            return "needs RPC: torch.distributed.rpc is not available in this build"
        rpc_workers = "needs RPC: it runs as named RPC workers (rpc.init_rpc per worker), not as collective ranks"
        return rpc_workers + _upstream(spec)
    if "numpy" in spec.requires and not caps.numpy_available:
        return "needs numpy: object collectives unpickle through tensor.numpy(); `pip install numpy` to run it"
    platforms = sorted(r.removeprefix(_PLATFORM) for r in spec.requires if r.startswith(_PLATFORM))
    if platforms and not any(sys.platform.startswith(name) for name in platforms):
        wanted = " or ".join(platforms)
        return f"needs {wanted}: the upstream example is marked +REQUIRES for it (this is {sys.platform})"
    missing = sorted(
        r for r in set(spec.requires) - _KNOWN_REQUIREMENTS if not r.startswith(_PLATFORM) and not _importable(r)
    )
    if missing:
        return f"needs {', '.join(missing)}: not installed here (`pip install {' '.join(missing)}` to run it)"
    if not symbol_exists(spec.symbol):
        return f"not in this torch version: {spec.symbol} does not exist in torch {caps.torch_version}"
    if world_size > MAX_LOCAL_RANKS and not launched:
        return (
            f"needs {world_size} ranks: more than the {MAX_LOCAL_RANKS} processes this runner starts on one machine "
            f"(launch it with torchrun across nodes)"
        )
    return None


def _code_reason(spec: ExampleSpec, backend: str) -> str | None:
    """What the example's code itself rules out: launcher-only code, fixed ports, fragments, CUDA-only calls."""
    found = analyze([u.source for u in spec.units], backend, global_names(spec.symbol))
    if found.reads_argv:
        return (
            "reads the command line of a launched script (argparse / sys.argv): it belongs in a torchrun script"
            + _upstream(spec)
        )
    if found.nothing_left:
        return (
            "nothing to check: it only initializes the process group / device, which the runner does itself"
            + _upstream(spec)
        )
    if found.fixed_ports:
        return (
            f"binds a hard-coded endpoint ({', '.join(found.fixed_ports)}): the runner never opens fixed ports, "
            "which collide with other jobs; it already provides the process group" + _upstream(spec)
        )
    if found.raising_lines:
        return (
            f"demonstrates an error: its comment says the statement at line {found.raising_lines[0]} of the example "
            "raises, and doctest has no traceback to compare" + _upstream(spec)
        )
    if found.undefined:
        names = ", ".join(found.undefined)
        module = defining_module(spec.symbol)
        if module is None:
            return f"fragment: uses {names} without defining it (upstream shows part of a program){_upstream(spec)}"
        return (
            f"fragment: uses {names}, defined neither by the example nor in the globals of {module.__name__} "
            f"(which it runs in, as doctest does): upstream shows part of a program{_upstream(spec)}"
        )
    if found.placeholders:
        lines = ", ".join(str(n) for n in found.placeholders)
        return f"fragment: `...` stands in for a value (statement line {lines} of the example){_upstream(spec)}"
    if found.cuda_only:
        return (
            f"needs CUDA: uses {', '.join(found.cuda_only)}, which has no CPU equivalent "
            "(run with --backend nccl on a GPU machine)"
        )
    return None


def syntax_error(spec: ExampleSpec) -> str | None:
    """Why the documented code is not Python, or None. Such an example is a doc-bug, not a skip."""
    try:
        compile("\n".join(u.source for u in spec.units), spec.id, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"the documented code is not valid Python: line {exc.lineno} of the example: {exc.msg}"
    return None

"""The globals an example runs in: those of the module that defines the documented object.

This is how doctest and xdoctest run docstring examples: `DocTestFinder` hands every example a copy of
its module's `__dict__` as globs, so an example may use anything the module imports or defines
(`DefaultSavePlanner`'s example subclasses `DefaultSavePlanner` without importing it; the FSDP class's
example calls `functools.partial`). Upstream writes its examples against that contract, so the runner
honours it too, and only names that are undefined even there make an example a fragment.

The documented object is found by importing its catalog symbol (`torch.distributed.checkpoint.
DefaultSavePlanner`): the longest importable module prefix, then the first attribute after it — the
class for a method (`FullyShardedDataParallel.optim_state_dict`) — and that object's `__module__`.
A symbol that is itself a module (`torch.distributed.launch`) uses its own globals.

Called in the parent while planning (which names exist) and in each rank while executing (the copy):
both import torch lazily through `importlib`, so importing this module costs nothing.
"""

from __future__ import annotations

import functools
import importlib
import sys
from types import ModuleType
from typing import Any


@functools.lru_cache(maxsize=None)
def defining_module(symbol: str) -> ModuleType | None:
    """The module whose globals the symbol's docstring examples run in, or None if it does not import."""
    parts = symbol.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        except Exception:  # noqa: BLE001 - a module that fails to import provides nothing
            return None
        if cut == len(parts):
            return module
        documented = getattr(module, parts[cut], None)
        if isinstance(documented, ModuleType):
            return documented
        # Re-exported names (`torch.distributed.checkpoint.DefaultSavePlanner`) live in another module.
        owner = getattr(documented, "__module__", None)
        if isinstance(owner, str) and isinstance(sys.modules.get(owner), ModuleType):
            return sys.modules[owner]
        return module
    return None


def module_globals(symbol: str) -> dict[str, Any]:
    """A fresh copy of the defining module's globals (empty when the symbol does not resolve).

    A copy, as doctest makes one: an example that assigns a name must not change torch's module.
    """
    module = defining_module(symbol)
    return dict(vars(module)) if module is not None else {}


def global_names(symbol: str) -> frozenset[str]:
    """The names an example of this symbol finds already defined, before the runner adds its own."""
    module = defining_module(symbol)
    return frozenset(vars(module)) if module is not None else frozenset()

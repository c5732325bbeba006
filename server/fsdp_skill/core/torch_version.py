"""Which torch this interpreter would import, without importing it (stdlib only).

`fetch` needs it to pick the upstream tag, `regenerate` to stamp the references; neither should pay
the seconds `import torch` takes just to learn a version string, and the server must never import it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

__all__ = ["installed_torch_version", "release_version"]


def installed_torch_version() -> str | None:
    """The version of the torch `import torch` would load ('2.13.0+cpu'), or None when there is none. The release
    part is exact; a build label may be missing (the registry's CUDA wheels record '2.15.0' in their metadata,
    '2.15.0+cu132' in torch.__version__).

    Read from the package metadata of the distribution that owns the module `import torch` finds. When
    that module is not the distribution's (a source checkout on the path shadowing a wheel) or has no
    metadata, torch is imported after all: the version must be that of the code whose docstrings the
    build reads.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    try:
        dist = importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None and Path(str(dist.locate_file("torch/__init__.py"))).resolve() == Path(spec.origin).resolve():
        return dist.version
    import torch

    return str(torch.__version__)


def release_version(version: str) -> str:
    """The version without its local build label ('2.13.0+cpu' -> '2.13.0'): the same release whatever the wheel."""
    return version.split("+", 1)[0]

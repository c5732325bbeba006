"""Where the repository's data lives.

The package is installed editable from a clone (the skill *is* the clone), so data files are found
relative to the source tree. FSDP_SKILL_ROOT overrides that, e.g. to serve another checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["catalog_path", "index_path", "patterns_dir", "references_dir", "repo_root", "upstream_dir"]


def repo_root() -> Path:
    env = os.environ.get("FSDP_SKILL_ROOT")
    if env:
        return Path(env).resolve()
    # server/fsdp_skill/core/paths.py -> the repository root is three folders above the package.
    return Path(__file__).resolve().parents[3]


def references_dir(root: Path | None = None) -> Path:
    return (root or repo_root()) / "references"


def catalog_path(root: Path | None = None) -> Path:
    return references_dir(root) / "catalog.json"


def index_path(root: Path | None = None) -> Path:
    return references_dir(root) / "index.sqlite"


def upstream_dir(root: Path | None = None) -> Path:
    return (root or repo_root()) / "upstream"


def patterns_dir(root: Path | None = None) -> Path:
    return (root or repo_root()) / "assets" / "patterns"

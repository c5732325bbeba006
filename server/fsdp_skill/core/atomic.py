"""Atomic writes: readers never see half a file or folder, and a failed write leaves the old one in place.

Stdlib only, because the example runner (`fsdp_skill.verify`, stdlib + torch) writes its report with it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write text to path through a temp file in the same folder, then os.replace it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_dir(staged: Path, target: Path) -> None:
    """Put the finished folder `staged` at `target`, replacing what is there, by renames only.

    `staged` must be on the same filesystem as `target` (make it a sibling). The old `target` is moved
    aside first and deleted only once `staged` is in place; if that last rename fails, it is put back.
    """
    old: Path | None = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.replace(target, old / target.name)
    try:
        os.replace(staged, target)
    except OSError:
        if old is not None:
            os.replace(old / target.name, target)
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)

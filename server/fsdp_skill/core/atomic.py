"""Atomic writes: readers never see half a file or folder, and a failed write leaves the old one in place.

Stdlib only, because the example runner (`fsdp_skill.verify`, stdlib + torch) writes its report with it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from fsdp_skill.core.scratch import make_scratch_dir, make_scratch_file

__all__ = ["write_atomic"]


def write_atomic(path: Path, text: str) -> None:
    """Write text to path through a temp file in the same folder, then os.replace it into place.

    The temp file is `.<name>.<pid>-<random>`: one a killed writer left is removed by the next write.
    The file gets the mode a plain `open()` would give it (the existing file's, else 0666 minus the
    umask), not the 0600 of a temp file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = make_scratch_file(path.parent, f".{path.name}.")
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def unwritable_reason(path: Path) -> str | None:
    """Why `path` cannot be written (its folder missing, not a folder, read-only, ...), or None.

    Checked by actually creating (and removing) a temp file next to it, so a long run that would
    fail at its very end to save its report fails at the start instead."""
    parent = path.parent
    if path.is_dir():
        return f"{path} is a folder: pass a file path"
    if not parent.exists():
        return f"the folder {parent} does not exist: create it first or pass another path"
    if not parent.is_dir():
        return f"{parent} is not a folder: pass a path inside a folder"
    try:
        fd, probe = make_scratch_file(parent, f".{path.name}.")
    except OSError as exc:
        return f"cannot write in {parent} ({exc.strerror or type(exc).__name__})"
    os.close(fd)
    probe.unlink(missing_ok=True)
    return None


def replace_dir(staged: Path, target: Path) -> None:
    """Put the finished folder `staged` at `target`, replacing what is there, by renames only.

    `staged` must be on the same filesystem as `target` (make it a sibling). The old `target` is moved
    aside first and deleted only once `staged` is in place; if that last rename fails, it is put back.
    """
    old: Path | None = None
    if target.exists():
        # `.<name>.old-<pid>-*`: one a killed run left is removed by the next replace_dir here.
        old = make_scratch_dir(target.parent, f".{target.name}.old-")
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

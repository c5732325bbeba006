"""Atomic file writes: readers never see half a file, and a failed write leaves the old one in place.

Stdlib only, because the example runner (`fsdp_skill.verify`, stdlib + torch) writes its report with it.
"""

from __future__ import annotations

import os
from pathlib import Path

from fsdp_skill.core.scratch import make_scratch_file


def write_atomic(path: Path, text: str) -> None:
    """Write text to path through a temp file in the same folder, then os.replace it into place.

    The temp file is `.<name>.<pid>-<random>`: one a killed writer left is removed by the next write."""
    fd, tmp = make_scratch_file(path.parent, f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

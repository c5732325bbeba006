"""Temporary folders and files that an interrupted run leaves behind are found and removed by the next.

Every staging folder or temp file is named `<prefix><pid>-<random>`, next to what it will replace.
A `kill -9` skips every `finally`, so instead of trusting cleanup the next run of the same kind
removes the leftovers whose process is gone (`make_scratch_dir`, `make_scratch_file`), and
`fsdp-skill validate` lists any that remain (`leftovers`). Stdlib only: the example runner uses it.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

# `<pid>-<mkdtemp's random part>` at the end of the name.
_OWNER = re.compile(r"(\d+)-[a-z0-9_]+$")


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (one of another user's counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# A `<prefix>…` entry that names no owner (another tool's, or an older version's) is only taken for a
# leftover once nothing has touched it for this long: it may belong to a run that is still going.
UNOWNED_GRACE_S = 24 * 3600


def leftovers(parent: Path, prefix: str) -> list[Path]:
    """Entries of parent named `<prefix>…` whose creating process is gone (or that name none and have not
    been touched for a day)."""
    if not parent.is_dir():
        return []
    found = []
    for entry in sorted(parent.iterdir()):
        if not entry.name.startswith(prefix):
            continue
        owner = _OWNER.search(entry.name[len(prefix) :])
        if owner is None:
            if _untouched_for(entry) > UNOWNED_GRACE_S:
                found.append(entry)
        elif int(owner.group(1)) != os.getpid() and not pid_alive(int(owner.group(1))):
            found.append(entry)
    return found


def _untouched_for(entry: Path) -> float:
    try:
        return time.time() - entry.lstat().st_mtime
    except OSError:  # removed meanwhile
        return 0.0


# Where interrupted runs stage their work inside a data folder: fetch next to upstream/, regenerate and
# every atomic write inside references/ (all dot-named; .gitignore keeps them out of commits).
# `fsdp-skill validate` and `regenerate --check` both list what they find there.
DATA_SCRATCH_SPOTS = ((".", ".upstream-new-"), (".", ".upstream-old-"), ("references", "."))
LEFTOVER_ADVICE = "delete it (the next `fsdp-skill regenerate` or `fetch` removes it too)"


def data_leftovers(root: Path) -> list[Path]:
    """What interrupted regenerate / fetch runs left in the data folder `root` (DATA_SCRATCH_SPOTS)."""
    return [entry for folder, prefix in DATA_SCRATCH_SPOTS for entry in leftovers(root / folder, prefix)]


def remove_leftovers(parent: Path, prefix: str) -> list[Path]:
    """Delete what interrupted runs of this kind left in parent; returns what was removed."""
    removed = leftovers(parent, prefix)
    for entry in removed:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    return removed


def make_scratch_dir(parent: Path, prefix: str) -> Path:
    """A new empty folder `<prefix><pid>-<random>` in parent, after removing dead runs' leftovers."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(parent, prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))


def make_scratch_file(parent: Path, prefix: str) -> tuple[int, Path]:
    """(open descriptor, path) of a new file `<prefix><pid>-<random>` in parent, after removing leftovers."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(parent, prefix)
    fd, name = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}-", dir=parent)
    return fd, Path(name)


def temporary_dir(prefix: str) -> Path:
    """A scratch folder in the system temp folder, removed when the process exits, on SIGTERM too.

    atexit alone left `fsdp-skill-index-*` behind whenever a client stopped a command with SIGTERM (the
    default action skips atexit); so a process still on the default SIGTERM action exits through
    SystemExit instead. A `kill -9` leftover is removed by the next call (make_scratch_dir).
    """
    folder = make_scratch_dir(Path(tempfile.gettempdir()), prefix)
    atexit.register(shutil.rmtree, folder, True)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    return folder


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)

"""Reading a file that must be a regular file: a FIFO, socket, device or folder in its place is a one-line
UserError, never a hang.

`Path.read_bytes()` on a FIFO blocks until a writer opens it: a FIFO in place of a cached page made
`fetch --from-dir` and `regenerate --check` hang forever. Here the file is opened non-blocking (which
does not block on a FIFO and changes nothing for a regular file) and checked with fstat before any
read. Stdlib only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fsdp_skill.core.errors import UserError

__all__ = ["NotRegularFileError", "read_regular_bytes", "read_regular_text"]

_KINDS = ((stat.S_ISDIR, "folder"), (stat.S_ISFIFO, "FIFO (named pipe)"), (stat.S_ISSOCK, "socket"),
          (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"))


class NotRegularFileError(UserError):
    """Something other than a regular file where a file was expected."""


def read_regular_bytes(path: Path) -> bytes:
    """The bytes of `path`; FileNotFoundError when it is missing, NotRegularFileError when it is not a regular
    file (a FIFO, a folder, ...)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "special file")
            raise NotRegularFileError(f"{path} is a {kind}, not a regular file: put the file itself there")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def read_regular_text(path: Path) -> str:
    """`read_regular_bytes` decoded as UTF-8 (UnicodeDecodeError as from `Path.read_text`)."""
    return read_regular_bytes(path).decode("utf-8")

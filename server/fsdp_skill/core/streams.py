"""What a command does when the reader of its output goes away.

`fsdp-skill api --all | head` closes the pipe after ten lines; the next write raises BrokenPipeError
(Python ignores SIGPIPE), and without this the user gets a traceback, then a second one when the
interpreter flushes stdout on its way out. A command that meets it stops quietly, as a C tool killed
by SIGPIPE would. Stdlib only: the example runner uses it too.
"""

from __future__ import annotations

import os
import sys

# What Python's documentation recommends for this case, and what rich's Console does when it meets it
# (Console.on_broken_pipe), so `show` (rich) and `show --json` (print) end alike.
CLOSED_STDOUT_EXIT = 1


def stdout_closed() -> int:
    """Call on a BrokenPipeError: points stdout at /dev/null, so the interpreter's final flush has nowhere to
    fail, and returns the exit status to end with."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout replaced by something with no descriptor (a test)
        pass
    return CLOSED_STDOUT_EXIT

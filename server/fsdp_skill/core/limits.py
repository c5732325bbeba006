"""The server's limits, in one home: how long a name argument may be, how many verify_example runs and
ranks may go at once, how long an idle HTTP session is kept. Stdlib only and cheap to import: the CLI's
flags show these defaults.

Names are checked before any work. Why a cap at all: an unknown name is answered with the closest known
names (difflib), whose cost grows with the name's length: a 1 MB symbol took 441 s of CPU in get_api,
and cancelling the request did not stop it. The longest name the catalog holds is ~130 characters (a
page-code id such as 'activation-checkpointing.md#distributed-…:1'); MAX_NAME_CHARS leaves ~4x room.
Search queries have their own, larger cap (`search.query.MAX_QUERY_CHARS`): prose is longer than a name.
"""

from __future__ import annotations

from fsdp_skill.core.errors import UserError

__all__ = ["DEFAULT_MAX_RANKS", "DEFAULT_MAX_RUNS", "DEFAULT_SESSION_IDLE_S", "HEADER_TIMEOUT_S",
           "MAX_HTTP_CONNECTIONS", "MAX_NAME_CHARS", "RESERVED_FILES", "NameTooLongError", "capped_name"]

MAX_NAME_CHARS = 500

# verify_example (`serve --allow-run`): runs at once, and rank processes of all runs together
# (`--max-runs`, `--max-ranks`). Each rank is a process with torch imported (~250 MB); 8 is the
# largest world size one run may ask for, so one run of any size always fits.
DEFAULT_MAX_RUNS, DEFAULT_MAX_RANKS = 2, 8

# An HTTP session with no request in flight for this long is closed and its memory released (~35 KB
# each); a client that comes back gets 404 and, as the MCP spec requires, opens a new session. The
# SDK's default, 30 minutes, let 2,000 abandoned sessions pile up (and at its cap of 10,000 open
# sessions every new client gets 503). Ten minutes outlasts a person's pause between an agent's
# tool calls. `serve --session-idle-timeout SECONDS` or $FSDP_SKILL_SESSION_IDLE_TIMEOUT set it.
DEFAULT_SESSION_IDLE_S = 600.0

# `serve --http` connections: each holds a file descriptor, so at most the open-files limit less
# RESERVED_FILES (the index, the log, verify_example's pipes, the listening socket) are open at once,
# and never more than MAX_HTTP_CONNECTIONS; uvicorn answers 503 beyond the cap. A connection whose
# request headers are not complete HEADER_TIMEOUT_S after it opened (or after its last response) is
# closed: 1,100 slowloris sockets were held for good before. A client on loopback sends its headers
# in well under a millisecond; ten seconds leaves room for a slow remote link.
MAX_HTTP_CONNECTIONS, RESERVED_FILES, HEADER_TIMEOUT_S = 1024, 64, 10.0


class NameTooLongError(UserError):
    """A name argument over MAX_NAME_CHARS; refused before any lookup."""


def capped_name(argument: str, value: str, example: str) -> str:
    """`value` itself when it is at most MAX_NAME_CHARS long; otherwise NameTooLongError naming the
    argument, its length, the limit and an `example` of what to pass (never echoing the value)."""
    if len(value) > MAX_NAME_CHARS:
        raise NameTooLongError(
            f"{argument} is {len(value):,} characters long; the limit is {MAX_NAME_CHARS}: "
            f"pass a name such as {example!r}, or find one by description (search_docs, or `fsdp-skill search`)"
        )
    return value

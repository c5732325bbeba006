"""`fsdp-skill serve --log-queries FILE`: one JSON line per tool call, to learn what agents really ask.

Off by default. Each line: {"tool", "arguments", "latency_ms", "is_error", "result_ids"}, the ids being
those the result names (search results, API entries, patterns …) in order, at most MAX_IDS. The file
is opened for appending once, at start (a path that cannot be written is refused then, not at the
first call), and each line is written and flushed whole under a lock, so concurrent HTTP sessions never
interleave. Long string arguments are cut to MAX_ARGUMENT_CHARS: a log is for reading queries, not for
keeping whatever a client sent.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import IO, Any

from fsdp_skill.core.errors import UserError

__all__ = ["QueryLog", "QueryLogError", "result_ids"]

MAX_IDS = 10
MAX_ARGUMENT_CHARS = 2000
# Where a tool result names what it returned: its own id, or the ids of the items of a list it holds.
_ID_KEYS = ("id", "qualified_name", "name")
_LIST_KEYS = ("results", "entries", "items", "examples", "patterns", "references", "matches")


class QueryLogError(UserError):
    """The query log file cannot be opened for appending."""


class QueryLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the server's life
        except OSError as exc:
            raise QueryLogError(
                f"cannot append to the query log {str(path)!r} ({exc.strerror or exc}): "
                "pass --log-queries a writable file path"
            ) from None
        self._lock = threading.Lock()

    def write(self, tool: str, arguments: dict[str, Any], latency_ms: float, is_error: bool, ids: list[str]) -> None:
        line = json.dumps(
            {
                "tool": _capped(tool),  # an unknown tool's name is whatever the client sent, however long
                "arguments": {_capped(key): _capped(value) for key, value in (arguments or {}).items()},
                "latency_ms": round(latency_ms, 1),
                "is_error": is_error,
                "result_ids": ids[:MAX_IDS],
            },
            ensure_ascii=False,
        )
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _capped(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_ARGUMENT_CHARS:
        return value[:MAX_ARGUMENT_CHARS] + f"… ({len(value)} characters)"
    return value


def result_ids(structured: Any) -> list[str]:
    """The ids a tool's structured result names: its own, then those of the items it lists."""
    out: list[str] = []
    if not isinstance(structured, dict):
        return out
    own = next((structured[key] for key in _ID_KEYS if isinstance(structured.get(key), str)), None)
    if own:
        out.append(own)
    for key in _LIST_KEYS:
        items = structured.get(key)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict):
                    found = next((item[k] for k in _ID_KEYS if isinstance(item.get(k), str)), None)
                    if found:
                        out.append(found)
    return out

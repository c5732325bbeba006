"""One file's parsed contents, re-read only when its mtime changes (the runner and `regenerate` rewrite
the files the server reads while it runs, and a long-lived server should see the new ones)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

__all__ = ["FileCache"]

T = TypeVar("T")


class FileCache(Generic[T]):
    """`get()` returns `parse(text)` of path, cached by mtime; `empty` while the file does not exist."""

    def __init__(self, path: Path, parse: Callable[[str], T], empty: T) -> None:
        self.path = path
        self._parse = parse
        self._empty = empty
        self._lock = threading.Lock()
        self._stamp: int | None = None
        self._value: T = empty

    def get(self) -> T:
        try:
            stamp = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return self._empty
        with self._lock:
            if stamp != self._stamp:
                self._value = self._parse(self.path.read_text(encoding="utf-8"))
                self._stamp = stamp
            return self._value

"""Whether an index file can be trusted: the digests of what it was built from, recorded in its meta table at
build time (search/index.py) and compared on every open, and the schema number of the code that reads it.

A stale index is never served silently: `open_index` builds a temporary one instead, `regenerate` rewrites the
committed one, and `fsdp-skill doctor` says which input changed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

INDEX_SCHEMA = 11  # bump whenever build_index writes different content for the same catalog
# The files of references/ the release documents and history lines are made from (search/releases.py).
TIMELINE_FILES = ("api-history.json", "versions.md")  # core.api_history's HISTORY_FILE and VERSIONS_FILE


def timeline_sha256(folder: Path) -> str:
    """sha256 over the API timeline files the release documents are made from (empty files when absent)."""
    digest = hashlib.sha256()
    for name in TIMELINE_FILES:
        path = folder / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"") + b"\0")
    return digest.hexdigest()


def catalog_sha256(catalog_text: bytes) -> str:
    return hashlib.sha256(catalog_text).hexdigest()


def patterns_sha256(files: Sequence[str], root: Path) -> str:
    """One digest over the pattern files' bytes (their source text is indexed too)."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0")
        path = root / rel
        digest.update(path.read_bytes() if path.is_file() else b"<missing>")
        digest.update(b"\0")
    return digest.hexdigest()


def stale_reason(index_file: Path, catalog_file: Path, root: Path) -> str | None:
    """Why the index file cannot be trusted for this catalog, or None when it is current."""
    if not index_file.is_file():
        return f"{index_file} is missing"
    try:
        conn = sqlite3.connect(f"file:{quote(str(index_file))}?mode=ro", uri=True)
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return f"{index_file} is unreadable ({exc})"
    if meta.get("index_schema") != str(INDEX_SCHEMA):
        return f"{index_file} has index schema {meta.get('index_schema')!r}, this code reads {INDEX_SCHEMA}"
    if catalog_file.is_file() and meta.get("catalog_sha256") != catalog_sha256(catalog_file.read_bytes()):
        return f"{index_file} was built from another {catalog_file.name}"
    if meta.get("timeline_sha256") != timeline_sha256(catalog_file.parent):
        return f"{index_file} was built from another API timeline ({', '.join(TIMELINE_FILES)})"
    files = json.loads(meta.get("pattern_files", "[]"))
    if meta.get("patterns_sha256") != patterns_sha256(files, root):
        return f"{index_file} was built from other pattern files"
    return None

"""Page code for the server: the catalog's code blocks (read lazily from catalog.json) and how they fared.

`get_example` serves a page's code block by its id (`getting-started.md#point-to-point-communication:1`)
with its verification status; `search_docs` notes, for a section result, how the section's code blocks
fared (`code: 2 passed, 1 checked`). The catalog is read with `json` once, and again only when the file
changes; the server still never imports torch.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from fsdp_skill.serve.file_cache import FileCache
from fsdp_skill.serve.results import VerificationStatus


def is_page_code_id(name: str) -> bool:
    """'file.md#anchor:N' (an example id is 'qualified.name#N')."""
    head, _, tail = name.rpartition(":")
    return ".md#" in head and tail.isdigit()


def _blocks_by_id(text: str) -> dict[str, dict[str, Any]]:
    try:
        blocks = json.loads(text).get("page_code") or []
    except (ValueError, AttributeError):
        blocks = []
    return {b["id"]: b for b in blocks if isinstance(b, dict) and isinstance(b.get("id"), str)}


class PageCodeCatalog:
    """The `page_code` list of references/catalog.json, by id."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: FileCache[dict[str, dict[str, Any]]] = FileCache(path, _blocks_by_id, {})

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            return self._cache.get()
        except OSError:
            return {}

    def get(self, block_id: str) -> dict[str, Any] | None:
        return self._load().get(block_id)

    def ids(self) -> list[str]:
        return list(self._load())


def section_code_summary(rows: dict[str, list[VerificationStatus]], reference: str, anchor: str) -> str | None:
    """'3 code blocks: 2 passed, 1 checked' for a section, from the report rows named 'reference#anchor:N'."""
    prefix = f"{reference}#{anchor}:"
    statuses = [
        s.status
        for name, found in rows.items()
        if name.startswith(prefix) and name[len(prefix) :].isdigit()
        for s in found[:1]
    ]
    if not statuses:
        return None
    tally = Counter(statuses)
    blocks = len(statuses)
    return f"{blocks} code block{'s' if blocks != 1 else ''}: " + ", ".join(
        f"{n} {status}" for status, n in tally.most_common()
    )

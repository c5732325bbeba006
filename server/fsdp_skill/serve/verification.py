"""Verification results for the server: read references/verification.json (and the NCCL report).

Running one example (verify_example) is `runs.run_verification`.
"""

from __future__ import annotations

import json
from pathlib import Path

from fsdp_skill.core.quoting import clip
from fsdp_skill.core.vocabulary import NOT_VERIFIED
from fsdp_skill.serve.file_cache import FileCache
from fsdp_skill.serve.results import VerificationStatus


class VerificationReport:
    """references/verification.json (gloo, rewritten by the runner) and, when there, verification-nccl.json
    (a run on a GPU machine, scripts/nccl_pass.sh): each re-read when its mtime changes; rows of one name
    from both files are listed together."""

    def __init__(self, path: Path, *more: Path) -> None:
        self.path = path
        self._caches: list[FileCache[dict[str, list[VerificationStatus]]]] = [
            FileCache(p, parse_report, {}) for p in (path, *more)
        ]
        self._parts: list[dict[str, list[VerificationStatus]]] = []
        self._merged: dict[str, list[VerificationStatus]] = {}

    def _load(self) -> dict[str, list[VerificationStatus]]:
        """The files' rows merged by name; merged again only when a file was re-read (every search asks)."""
        parts = [cache.get() for cache in self._caches]
        if len(parts) != len(self._parts) or any(new is not old for new, old in zip(parts, self._parts)):
            merged: dict[str, list[VerificationStatus]] = {}
            for part in parts:
                for name, statuses in part.items():
                    merged.setdefault(name, []).extend(statuses)
            self._parts, self._merged = parts, merged
        return self._merged

    def statuses(self, name: str) -> list[VerificationStatus]:
        return list(self._load().get(name, []))

    def rows(self) -> dict[str, list[VerificationStatus]]:
        """Every row by name (page-code summaries group them by section)."""
        return self._load()


def parse_report(text: str) -> dict[str, list[VerificationStatus]]:
    """name → results; a malformed file reads as empty (statuses then say 'not verified')."""
    try:
        data = json.loads(text)
        rows = data["results"]
    except (ValueError, KeyError, TypeError):
        return {}
    torch_version = data.get("torch_version") if isinstance(data.get("torch_version"), str) else None
    by_name: dict[str, list[VerificationStatus]] = {}
    for row in rows if isinstance(rows, list) else []:
        try:
            by_name.setdefault(row["name"], []).append(
                VerificationStatus(
                    backend=row["backend"], world_size=row["world_size"], status=row["status"],
                    reason=row.get("reason"), seconds=row.get("seconds"), warnings=row.get("warnings") or [],
                    torch_version=torch_version,
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return by_name


def summarize(statuses: list[VerificationStatus]) -> str:
    """One line: 'passed (gloo, 2 ranks); skipped (nccl, 2 ranks: needs CUDA)' or 'not verified'."""
    if not statuses:
        return NOT_VERIFIED
    parts = []
    # Rows from runs on different torch versions (the NCCL report's GPU machine) name their torch.
    several_versions = len({s.torch_version for s in statuses}) > 1
    for s in statuses:
        detail = f"{s.backend}, {s.world_size} rank{'s' if s.world_size != 1 else ''}"
        if several_versions and s.torch_version:
            detail += f", torch {s.torch_version}"
        if s.status != "passed" and s.reason:
            detail += f": {clip(s.reason, 80)}"
        parts.append(f"{s.status} ({detail})")
    return "; ".join(parts)

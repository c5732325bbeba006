"""Replace the upstream/ cache all at once, or not at all.

Both ways of filling the cache (downloading, and copying from a snapshot folder) write every file
and manifest into a staging folder next to upstream/ first; only when all of them are there does
`CacheStage.commit` swap it into place. A failure anywhere before that deletes the staging folder
and leaves the existing cache exactly as it was.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import upstream_dir
from fsdp_skill.core.scratch import leftovers, make_scratch_dir, remove_leftovers
from fsdp_skill.upstream.sources import (
    MANIFEST_NAME,
    Declaration,
    ManifestEntry,
    dump_manifest,
    manifest_path,
    read_manifest,
)

# Folders of upstream/ that another source owns (`upstream.releases`: the torch API of each release): a
# docs fetch or seed carries them over unchanged instead of dropping them with the old cache.
KEPT_DIRS = ("torch-api",)

NEW_PREFIX, OLD_PREFIX = ".upstream-new-", ".upstream-old-"


def _finish_interrupted_swap(upstream: Path) -> None:
    """A fetch killed between moving upstream/ aside and moving the new cache in left no upstream/:
    put the previous cache back from `.upstream-old-*` before anything removes it."""
    if not upstream.exists():
        for old in reversed(leftovers(upstream.parent, OLD_PREFIX)):
            if (old / "upstream").is_dir():
                os.replace(old / "upstream", upstream)
                break
    if upstream.exists():  # the swap finished (or was undone): what is left aside is garbage now
        remove_leftovers(upstream.parent, OLD_PREFIX)


@dataclass
class CacheUpdate:
    """What a fetch or a seed put into the cache."""

    upstream: Path
    files: int
    unchanged: int = 0
    refs: dict[str, str] = field(default_factory=dict)
    commits: dict[str, str | None] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)  # '<dir>/<path>' whose bytes are new or differ
    removed: list[str] = field(default_factory=list)  # '<dir>/<path>' the cache had and no longer has
    unchecked: dict[str, str] = field(default_factory=dict)  # repo -> why its tree could not be checked
    source: str | None = None  # the mirror the files came from, when not GitHub


def previous_entries(root: Path | None, declaration: Declaration) -> dict[str, dict[str, ManifestEntry]]:
    """The current cache's manifests by repo (empty where there is no usable cache)."""
    previous: dict[str, dict[str, ManifestEntry]] = {}
    for name, repo in declaration.repos.items():
        try:
            previous[name] = read_manifest(manifest_path(root, repo.dir))
        except UserError:
            previous[name] = {}
    return previous


def removed_files(declaration: Declaration, previous: dict[str, dict[str, ManifestEntry]]) -> list[str]:
    """Cached files the declaration no longer names (the new cache leaves them out)."""
    declared = {(s.repo, s.path) for s in declaration.sources}
    return sorted(f"{declaration.repos[name].dir}/{path}" for name, entries in previous.items() for path in entries
                  if (name, path) not in declared)


class CacheStage:
    """A staging copy of upstream/. Use as a context manager; call `commit()` to swap it in."""

    def __init__(self, root: Path | None) -> None:
        self.upstream = upstream_dir(root)
        self._entries: dict[str, list[ManifestEntry]] = defaultdict(list)
        self.upstream.parent.mkdir(parents=True, exist_ok=True)
        _finish_interrupted_swap(self.upstream)
        # Same parent folder as upstream/, so the final os.replace is a rename on one filesystem;
        # `.upstream-new-<pid>-*` left by a killed fetch is removed here.
        self.path = make_scratch_dir(self.upstream.parent, NEW_PREFIX)
        self._committed = False

    def __enter__(self) -> CacheStage:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._committed:
            shutil.rmtree(self.path, ignore_errors=True)

    def write(self, relative: str, data: bytes) -> None:
        """Write a file at upstream/<relative> (in the stage)."""
        target = self.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def add(self, repo_dir: str, entry: ManifestEntry, data: bytes) -> None:
        """Write one upstream file and remember its manifest entry."""
        self.write(f"{repo_dir}/{entry.path}", data)
        self._entries[repo_dir].append(entry)

    def commit(self) -> None:
        """Write the manifests, then replace upstream/ with the stage."""
        for repo_dir, entries in sorted(self._entries.items()):
            self.write(f"{repo_dir}/{MANIFEST_NAME}", dump_manifest(entries).encode("utf-8"))
        for kept in KEPT_DIRS:
            if (self.upstream / kept).is_dir() and not (self.path / kept).exists():
                shutil.copytree(self.upstream / kept, self.path / kept)
        old: Path | None = None
        if self.upstream.exists():
            old = make_scratch_dir(self.upstream.parent, OLD_PREFIX)
            os.replace(self.upstream, old / "upstream")
        try:
            os.replace(self.path, self.upstream)
        except OSError:
            if old is not None:  # put the previous cache back before reporting the failure
                os.replace(old / "upstream", self.upstream)
                shutil.rmtree(old, ignore_errors=True)
            raise
        self._committed = True
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

"""Seed the upstream/ cache from a local snapshot folder: `fsdp-skill fetch --from-dir DIR`.

The folder has the cache's layout (<dir>/<path> for each declared file, <dir>/MANIFEST.json in the
snapshot format: path, repo, commit, chars, sha256, note). Every declared file must be there; a file
the snapshot's manifest lists must match its sha256, or nothing is written.

What the cache manifest records for a seeded file:
  - ref: "snapshot" (the files were not fetched from one git ref: the shared snapshot mixes commits),
    or the ref given with --ref for that repository, when the user asserts the folder is that ref;
  - commit and note: the snapshot manifest's, unchanged;
  - url: the raw URL at that commit, which reproduces the exact bytes; with no recorded commit, at
    the --ref given, else at the repository's default ref (the note says how the copy differs);
  - a declared file the snapshot manifest does not list (the snapshot's pytorch/LICENSE) is copied
    with its sha256 computed and a note saying so.
The snapshot's README.md is copied too. The output depends only on the folder and sources.toml, so
seeding twice gives byte-identical files.
"""

from __future__ import annotations

from pathlib import Path

from fsdp_skill.core.errors import UserError
from fsdp_skill.core.files import read_regular_bytes
from fsdp_skill.upstream.cache_update import CacheStage, CacheUpdate, previous_entries, removed_files
from fsdp_skill.upstream.sources import (
    MANIFEST_NAME,
    DeclaredSource,
    ManifestEntry,
    RepoConfig,
    load_declaration,
    raw_url,
    read_manifest,
    sha256_hex,
)

SNAPSHOT_REF = "snapshot"
UNLISTED_NOTE = "Not listed in the snapshot's MANIFEST.json; its sha256 was computed when the cache was seeded."


def _snapshot_manifest(folder: Path, repo_dir: str) -> dict[str, ManifestEntry]:
    path = folder / repo_dir / MANIFEST_NAME
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        return read_manifest(path)
    except UserError:
        raise UserError(
            f"{path} is not a valid snapshot manifest (expected a JSON list of path/repo/commit/chars/sha256)"
        ) from None


def _seed_entry(
    source: DeclaredSource, repo: RepoConfig, data: bytes, listed: ManifestEntry | None, ref: str | None
) -> ManifestEntry:
    commit = listed.commit if listed else None
    url_ref = commit or ref or repo.default_ref or "main"
    return ManifestEntry(
        path=source.path,
        repo=source.repo,
        ref=ref or SNAPSHOT_REF,
        commit=commit,
        url=raw_url(source.repo, url_ref, source.path),
        chars=len(data.decode("utf-8")),
        sha256=sha256_hex(data),
        etag=None,
        licence=source.licence,
        note=listed.note if listed else UNLISTED_NOTE,
    )


def seed_from_dir(root: Path | None, folder: Path, refs: dict[str, str] | None = None) -> CacheUpdate:
    """Copy every declared file from `folder` into the cache, verifying the snapshot's sha256s."""
    declaration = load_declaration(root)
    refs = refs or {}
    if not folder.is_dir():
        raise UserError(f"--from-dir {folder}: no such folder (expected a snapshot laid out like upstream/)")
    manifests = {name: _snapshot_manifest(folder, repo.dir) for name, repo in declaration.repos.items()}
    previous = previous_entries(root, declaration)
    changed: list[str] = []
    with CacheStage(root) as stage:
        for source in declaration.sources:
            file = folder / source.dir / source.path
            try:
                data = read_regular_bytes(file)  # a FIFO there hung the command; a folder was a traceback
            except FileNotFoundError:
                raise UserError(
                    f"{file} is missing: the snapshot must hold every file declared in assets/sources.toml"
                ) from None
            except OSError as exc:
                raise UserError(f"{file} cannot be read ({exc.strerror}): the snapshot must hold every file "
                                "declared in assets/sources.toml as a readable file") from None
            listed = manifests[source.repo].get(source.path)
            if listed is not None and listed.sha256 != sha256_hex(data):
                raise UserError(
                    f"{file}: sha256 {sha256_hex(data)[:12]}… does not match {folder / source.dir / MANIFEST_NAME} "
                    f"({listed.sha256[:12]}…); restore a verbatim copy of the file or fetch from the network"
                )
            try:
                entry = _seed_entry(source, declaration.repo(source.repo), data, listed, refs.get(source.repo))
            except UnicodeDecodeError:
                raise UserError(f"{file} is not UTF-8 text; the snapshot must hold verbatim upstream files") from None
            stage.add(source.dir, entry, data)
            old = previous[source.repo].get(source.path)
            if old is None or old.sha256 != entry.sha256:
                changed.append(f"{source.dir}/{source.path}")
        readme = folder / "README.md"
        if readme.is_file():
            stage.write("README.md", read_regular_bytes(readme))
        stage.commit()
    # What changed, as `fetch` says it: "every file is identical" was printed whatever the snapshot held.
    return CacheUpdate(
        upstream=stage.upstream,
        files=len(declaration.sources),
        refs={name: refs.get(name, SNAPSHOT_REF) for name in declaration.repos},
        commits={},
        changed=changed,
        removed=removed_files(declaration, previous),
    )

"""The declared upstream files (assets/sources.toml) and the cache that holds them (upstream/).

The cache keeps one folder per upstream repository, laid out like that repository, plus a manifest:

    upstream/README.md
    upstream/pytorch/MANIFEST.json
    upstream/pytorch/docs/source/fsdp.md
    upstream/pytorch-tutorials/MANIFEST.json
    upstream/pytorch-tutorials/intermediate_source/FSDP_tutorial.rst

MANIFEST.json is a JSON list with one object per file (path, repo, ref, commit, url, chars, sha256,
etag, licence, note): the snapshot format of ../shared/upstream plus the download's provenance.
`fsdp_skill.upstream.fetch` writes the cache; the build reads it through this module only:

    for source in load_pages(root):
        text = read_cached(root, source)          # verified against the manifest's sha256
        record = source_record(root, source)      # fsdp_skill.core.catalog.Source for catalog.json
        url = docs_url(source, torch_version)     # rendered docs page, for Section/ApiEntry urls

Imports only the stdlib and pydantic: the build and the fetcher both use it, the server never does.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fsdp_skill.core.catalog import Source
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.files import read_regular_bytes, read_regular_text
from fsdp_skill.core.paths import repo_root, upstream_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML through the tomli backport.
    import tomli as tomllib

SOURCES_FILE = "assets/sources.toml"
MANIFEST_NAME = "MANIFEST.json"
RAW_URL = "https://raw.githubusercontent.com/{repo}/{ref}/{path}"
RESTORE_HINT = "run `fsdp-skill fetch` (or `fsdp-skill fetch --from-dir DIR` offline) to restore the cache"

SourceKind = Literal["page", "tutorial", "licence"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RepoConfig(_Frozen):
    """One upstream repository: where its files go in the cache and which ref to fetch by default."""

    repo: str = Field(description="GitHub 'owner/name'.")
    dir: str = Field(description="Folder under upstream/ that holds this repository's files.")
    pinned_to_torch: bool = Field(default=False, description="Fetch at the installed torch's release tag.")
    default_ref: str | None = Field(default=None, description="Branch or tag to fetch when not pinned to torch.")
    licence: str
    docs_root: str = Field(default="", description="Folder the rendered docs pages are relative to.")
    docs_url: str = Field(description="Rendered page URL template with {page} and optionally {version}.")

    @model_validator(mode="after")
    def _one_ref_rule(self) -> RepoConfig:
        if self.pinned_to_torch == (self.default_ref is not None):
            raise ValueError("set exactly one of pinned_to_torch = true or default_ref")
        return self


class DeclaredSource(_Frozen):
    """One upstream file as declared in assets/sources.toml, with its repository's settings."""

    repo: str
    path: str
    kind: SourceKind
    dir: str
    licence: str
    docs_root: str
    docs_url_template: str

    @property
    def id(self) -> str:
        """Stable id used across the catalog: '<repo>:<path>'."""
        return f"{self.repo}:{self.path}"

    @property
    def format(self) -> Literal["myst", "rst", "text"]:
        """How the build should parse it, from the file suffix."""
        suffix = PurePosixPath(self.path).suffix
        return "myst" if suffix == ".md" else "rst" if suffix == ".rst" else "text"

    @property
    def page(self) -> str:
        """The rendered-docs page name: 'notes/fsdp', 'intermediate/FSDP_tutorial'."""
        relative = PurePosixPath(self.path)
        if self.docs_root:
            relative = relative.relative_to(self.docs_root)
        parts = list(relative.with_suffix("").parts)
        # Tutorials build intermediate_source/X.rst into intermediate/X.html (and so on).
        if len(parts) > 1 and parts[0].endswith("_source"):
            parts[0] = parts[0].removesuffix("_source")
        return "/".join(parts)


class Declaration(_Frozen):
    """The whole of assets/sources.toml."""

    repos: dict[str, RepoConfig]
    sources: list[DeclaredSource]

    def repo(self, name: str) -> RepoConfig:
        return self.repos[name]

    def sources_of(self, repo: str) -> list[DeclaredSource]:
        return [s for s in self.sources if s.repo == repo]


class ManifestEntry(BaseModel):
    """One line of upstream/<dir>/MANIFEST.json. The snapshot's manifests omit the provenance fields."""

    model_config = ConfigDict(extra="forbid")

    path: str
    repo: str
    commit: str | None = None
    chars: int
    sha256: str
    note: str | None = None
    ref: str | None = Field(default=None, description="Ref requested; 'snapshot' when seeded from a folder.")
    url: str | None = None
    etag: str | None = Field(default=None, description="HTTP ETag of the download, for If-None-Match.")
    licence: str | None = None


# --- the declaration --------------------------------------------------------------------------


def _check_relative(path: str, where: str) -> None:
    # Paths become file names under upstream/: refuse anything that could escape it.
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or "\\" in path:
        raise UserError(f"{where}: path {path!r} must be a relative POSIX path inside the repository")


def load_declaration(root: Path | None = None) -> Declaration:
    """Read and validate assets/sources.toml under `root` (default: the repository root)."""
    file = (root or repo_root()) / SOURCES_FILE
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{file} not found: the upstream sources are declared there") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{file}: invalid TOML: {exc}") from None
    try:
        repos = {name: RepoConfig(repo=name, **table) for name, table in raw.get("repos", {}).items()}
    except (ValidationError, TypeError) as exc:
        raise UserError(f"{file}: bad [repos] table: {_first_error(exc)}") from None
    sources: list[DeclaredSource] = []
    seen: set[tuple[str, str]] = set()
    for number, table in enumerate(raw.get("sources", []), start=1):
        where = f"{file} [[sources]] #{number}"
        repo = repos.get(table.get("repo", ""))
        if repo is None:
            raise UserError(f"{where}: repo {table.get('repo')!r} has no [repos.\"owner/name\"] table")
        _check_relative(table.get("path", ""), where)
        if (repo.repo, table["path"]) in seen:
            raise UserError(f"{where}: {repo.repo}:{table['path']} is declared twice")
        seen.add((repo.repo, table["path"]))
        try:
            sources.append(
                DeclaredSource(
                    **table,
                    dir=repo.dir,
                    licence=repo.licence,
                    docs_root=repo.docs_root,
                    docs_url_template=repo.docs_url,
                )
            )
        except (ValidationError, TypeError) as exc:
            raise UserError(f"{where}: {_first_error(exc)}") from None
    if not sources:
        raise UserError(f"{file} declares no [[sources]]")
    return Declaration(repos=repos, sources=sources)


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(str(p) for p in err['loc']) or 'table'}: {err['msg']}"
    return str(exc)


def load_sources(root: Path | None = None) -> list[DeclaredSource]:
    """Every declared file, in declaration order (pages, tutorials and licence files)."""
    return list(load_declaration(root).sources)


def load_pages(root: Path | None = None) -> list[DeclaredSource]:
    """The files the build turns into references: docs pages and tutorials (no licence files)."""
    return [s for s in load_sources(root) if s.kind != "licence"]


# --- URLs ---------------------------------------------------------------------------------------


def raw_url(repo: str, ref: str, path: str) -> str:
    """GitHub's raw file URL: https://raw.githubusercontent.com/<repo>/<ref>/<path>."""
    return RAW_URL.format(repo=repo, ref=ref, path=path)


def docs_version(torch_version: str | None) -> str:
    """'2.13.0+cpu' -> '2.13' (the versioned docs folder); None -> 'stable'."""
    if not torch_version:
        return "stable"
    parts = torch_version.split("+")[0].split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 and all(p.isdigit() for p in parts[:2]) else "stable"


def docs_url(source: DeclaredSource, torch_version: str | None = None) -> str | None:
    """The rendered page on docs.pytorch.org, or None for a licence file."""
    if source.kind == "licence":
        return None
    return source.docs_url_template.format(page=source.page, version=docs_version(torch_version))


# --- the manifest ---------------------------------------------------------------------------------


def manifest_path(root: Path | None, repo_dir: str) -> Path:
    return upstream_dir(root) / repo_dir / MANIFEST_NAME


def read_manifest(path: Path) -> dict[str, ManifestEntry]:
    """A manifest (the cache's or a snapshot's) keyed by file path. Missing file -> UserError."""
    try:
        data = json.loads(read_regular_text(path))
        entries = [ManifestEntry.model_validate(item) for item in data]
    except FileNotFoundError:
        raise UserError(f"{path} not found; {RESTORE_HINT}") from None
    except RecursionError:  # a crafted file nested thousands of levels deep
        raise UserError(f"{path} is not a valid manifest (nested too deeply); {RESTORE_HINT}") from None
    except (ValueError, TypeError) as exc:  # JSON (and UTF-8) or pydantic errors, and a non-list top level
        detail = _first_error(exc) if isinstance(exc, ValidationError) else str(exc).splitlines()[0]
        raise UserError(f"{path} is not a valid manifest ({detail}); {RESTORE_HINT}") from None
    return {entry.path: entry for entry in entries}


def dump_manifest(entries: list[ManifestEntry]) -> str:
    """Deterministic JSON: entries sorted by path, keys sorted, every field present, newline at end."""
    rows = [entry.model_dump() for entry in sorted(entries, key=lambda e: e.path)]
    return json.dumps(rows, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --- the cache ------------------------------------------------------------------------------------


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cached_path(root: Path | None, source: DeclaredSource) -> Path:
    """Where the cache keeps `source`: upstream/<dir>/<path>."""
    return upstream_dir(root) / source.dir / source.path


def manifest_entry(root: Path | None, source: DeclaredSource) -> ManifestEntry:
    """The cache manifest's entry for `source`; UserError if the cache lacks it."""
    path = manifest_path(root, source.dir)
    entry = read_manifest(path).get(source.path)
    if entry is None or entry.repo != source.repo:
        raise UserError(f"{path} has no entry for {source.id}; {RESTORE_HINT}")
    return entry


def read_cached_bytes(root: Path | None, source: DeclaredSource) -> tuple[bytes, ManifestEntry]:
    """The cached file's bytes, checked against the manifest's sha256, and its manifest entry."""
    entry = manifest_entry(root, source)
    file = cached_path(root, source)
    try:
        data = read_regular_bytes(file)
    except FileNotFoundError:
        raise UserError(f"{file} is missing from the cache; {RESTORE_HINT}") from None
    actual = sha256_hex(data)
    if actual != entry.sha256:
        raise UserError(
            f"{file} does not match {manifest_path(root, source.dir)} "
            f"(sha256 {actual[:12]}… != {entry.sha256[:12]}…): it was edited; {RESTORE_HINT}"
        )
    return data, entry


def read_cached(root: Path | None, source: DeclaredSource) -> str:
    """The cached file as text, verified against the manifest (UserError naming the file if not)."""
    data, _ = read_cached_bytes(root, source)
    return data.decode("utf-8")


def source_record(root: Path | None, source: DeclaredSource) -> Source:
    """The catalog's provenance record for a cached file (verified against the manifest)."""
    _, entry = read_cached_bytes(root, source)
    ref = entry.ref or "snapshot"
    return Source(
        id=source.id,
        repo=source.repo,
        path=source.path,
        ref=ref,
        commit=entry.commit,
        url=entry.url or raw_url(source.repo, entry.commit or ref, source.path),
        sha256=entry.sha256,
        licence=entry.licence or source.licence,
    )


def verify_cache(root: Path | None = None) -> list[ManifestEntry]:
    """Check every declared file against the manifest; returns the entries in declaration order."""
    return [read_cached_bytes(root, source)[1] for source in load_sources(root)]

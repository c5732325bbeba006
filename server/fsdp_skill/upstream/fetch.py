"""`fsdp-skill fetch`: download the declared upstream files into the cache upstream/.

Each file comes from https://raw.githubusercontent.com/<repo>/<ref>/<path>. Which ref:
  - pytorch/pytorch (`pinned_to_torch` in assets/sources.toml): the release tag of the installed
    torch, v<major>.<minor>.<patch> (2.13.0+cpu -> v2.13.0; 2.13.0rc1 -> v2.13.0-rc1). torch is
    not imported: its version comes from the package metadata. No torch, or a development build
    with no tag, is an error that asks for --ref;
  - pytorch/tutorials: it has no torch tags, so its `default_ref` (main);
  - `--ref REF` overrides the torch-pinned repository, `--ref owner/name=REF` any repository.
The commit each ref points at is looked up once per repository through the GitHub API and recorded
in the manifest; that lookup is best effort (rate limits, no network) and records null on failure.

Mirrors: `--base-url URL` (or FSDP_SKILL_UPSTREAM_URL) serves the raw files as URL/<repo>/<ref>/<path>
instead of raw.githubusercontent.com, and `--api-url URL` (or FSDP_SKILL_GITHUB_API) replaces
api.github.com; the manifest still records the canonical GitHub URLs, so provenance does not depend
on where the bytes came from. When a repository's commit is known, its tree (GitHub's trees API)
gives every file's git blob hash: a download that does not hash to it (a body cut short, however
the server set Content-Length) is refused before anything is written. That check is skipped, and
the summary says so, when the tree cannot be had (rate limit, a mirror without the API).

Requests time out after --timeout seconds and are retried --retries times with exponential backoff
on connection errors, timeouts, HTTP 429 and 5xx (never on other 4xx, which will not change). A file
whose manifest entry has an ETag for the same URL is requested with If-None-Match; a 304 keeps the
cached copy. Everything is staged and swapped in only when every file arrived (`cache_update`), so a
failure leaves upstream/ untouched and surfaces as one NetworkError line naming the URL.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from fsdp_skill.core.errors import NetworkError, UserError
from fsdp_skill.core.files import read_regular_bytes, read_regular_text
from fsdp_skill.core.paths import writable_root
from fsdp_skill.core.torch_version import installed_torch_version
from fsdp_skill.upstream.cache_update import CacheStage, CacheUpdate, previous_entries, removed_files
from fsdp_skill.upstream.sources import (
    Declaration,
    DeclaredSource,
    ManifestEntry,
    cached_path,
    load_declaration,
    raw_url,
    sha256_hex,
)

if TYPE_CHECKING:
    from rich.progress import Progress

USER_AGENT = "pytorch-fsdp-skill (fsdp-skill fetch)"
RAW_BASE, API_BASE = "https://raw.githubusercontent.com", "https://api.github.com"
RAW_BASE_ENV, API_BASE_ENV = "FSDP_SKILL_UPSTREAM_URL", "FSDP_SKILL_GITHUB_API"
COMMIT_API = "{api}/repos/{repo}/commits/{ref}"
TREE_API = "{api}/repos/{repo}/git/trees/{commit}?recursive=1"
README_START, README_END = "<!-- fsdp-skill fetch: start -->", "<!-- fsdp-skill fetch: end -->"
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 10.0
_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:rc(\d+))?(?:\+[0-9A-Za-z.]+)?")
_SHA = re.compile(r"[0-9a-f]{40}")
_OFFLINE_HINT = "or seed the cache offline with --from-dir DIR"

Sleep = Callable[[float], None]


# --- which ref ------------------------------------------------------------------------------------


def torch_tag(version: str) -> str:
    """The pytorch/pytorch release tag for a torch version: '2.13.0+cpu' -> 'v2.13.0'."""
    match = _RELEASE.fullmatch(version.strip())
    if match is None:
        raise UserError(
            f"torch {version} is not a release build, so no pytorch/pytorch tag matches it; "
            "pass --ref REF (e.g. --ref v2.13.0 or --ref main)"
        )
    major, minor, patch, rc = match.groups()
    return f"v{major}.{minor}.{patch}" + (f"-rc{rc}" if rc else "")


def parse_ref_args(values: Sequence[str] | None, declaration: Declaration) -> dict[str, str]:
    """--ref values -> {repo: ref}. 'REF' means the torch-pinned repository, 'owner/name=REF' any."""
    if isinstance(values, str):
        values = [values]
    refs: dict[str, str] = {}
    pinned = [name for name, repo in declaration.repos.items() if repo.pinned_to_torch]
    for value in values or []:
        repo, sep, ref = value.rpartition("=")
        if not sep:
            if len(pinned) != 1:
                raise UserError(f"--ref {value}: say which repository it is for, as --ref owner/name={value}")
            repo = pinned[0]
        if repo not in declaration.repos:
            known = ", ".join(sorted(declaration.repos))
            raise UserError(f"--ref {value}: {repo!r} is not a declared repository (declared: {known})")
        if not ref or ref.startswith("-") or ".." in ref or any(c.isspace() for c in ref):
            raise UserError(f"--ref {value}: {ref!r} is not a valid git ref")
        if repo in refs:
            raise UserError(f"--ref given twice for {repo}")
        refs[repo] = ref
    return refs


def resolve_refs(declaration: Declaration, overrides: dict[str, str], torch_version: str | None) -> dict[str, str]:
    """The ref to fetch for every declared repository."""
    refs: dict[str, str] = {}
    for name, repo in sorted(declaration.repos.items()):
        if name in overrides:
            refs[name] = overrides[name]
        elif repo.default_ref is not None:
            refs[name] = repo.default_ref
        elif torch_version is None:
            raise UserError(
                f"torch is not installed, so the {name} docs tag cannot be derived from it; "
                f"pass --ref REF (e.g. --ref v2.13.0), {_OFFLINE_HINT}"
            )
        else:
            refs[name] = torch_tag(torch_version)
    return refs


# --- HTTP -----------------------------------------------------------------------------------------


def open_client(timeout: float, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """The HTTP client every request goes through; tests pass an httpx.MockTransport."""
    return httpx.Client(
        transport=transport,
        timeout=httpx.Timeout(timeout),
        follow_redirects=True,
        headers={"User-Agent": USER_AGENT},
    )


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "no detail"


def _backoff(attempt: int, response: httpx.Response | None) -> float:
    retry_after = response.headers.get("retry-after", "") if response is not None else ""
    if retry_after.isdigit():  # the server said how long; still bounded so a fetch never hangs
        return min(float(retry_after), BACKOFF_MAX_S)
    return min(BACKOFF_BASE_S * 2**attempt, BACKOFF_MAX_S)


def get_with_retries(
    client: httpx.Client,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    retries: int,
    sleep: Sleep = time.sleep,
    ref_hint: str = "",
) -> httpx.Response:
    """GET `url`; retry transient failures; return a 200 or 304 response, else raise NetworkError."""
    problem = ""
    for attempt in range(retries + 1):
        response: httpx.Response | None = None
        try:
            response = client.get(url, headers=headers)
        except httpx.TimeoutException:
            problem = f"timed out after {client.timeout.read or 0:g} s"
        except httpx.TransportError as exc:
            problem = f"connection failed ({type(exc).__name__}: {_one_line(str(exc))})"
        else:
            if response.status_code in (200, 304):
                return response
            problem = f"HTTP {response.status_code} {response.reason_phrase}".strip()
            if response.status_code != 429 and response.status_code < 500:
                missing = response.status_code == 404
                hint = f"check that the ref exists ({ref_hint}) and pass --ref REF, " if missing else ""
                raise NetworkError(f"{url}: {problem}; {hint}{_OFFLINE_HINT}; upstream/ is unchanged")
        if attempt < retries:
            sleep(_backoff(attempt, response))
    tries = f"{retries + 1} attempt{'s' if retries else ''}"
    raise NetworkError(
        f"{url}: {problem} ({tries}); check the network (or raise --timeout/--retries), "
        f"{_OFFLINE_HINT}; upstream/ is unchanged"
    )


def base_urls(base_url: str | None, api_url: str | None) -> tuple[str, str]:
    """(raw-file base, API base): the flags, else the environment variables, else GitHub's."""
    chosen = []
    for value, env, default, flag in ((base_url, RAW_BASE_ENV, RAW_BASE, "--base-url"),
                                      (api_url, API_BASE_ENV, API_BASE, "--api-url")):
        url = (value or os.environ.get(env) or default).rstrip("/")
        if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
            raise UserError(f"{flag} (or {env}) must be an http:// or https:// URL, got {url[:200]!r}")
        chosen.append(url)
    return chosen[0], chosen[1]


def git_blob_sha(data: bytes) -> str:
    """The id git gives these bytes as a file (what GitHub's tree API lists for each path)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def upstream_tree(client: httpx.Client, api: str, repo: str, commit: str) -> tuple[dict[str, tuple[str, int]], str]:
    """({path: (blob sha, size)} of the tree at commit, '') or ({}, why it could not be had)."""
    try:
        response = client.get(TREE_API.format(api=api, repo=repo, commit=commit))
    except httpx.HTTPError as exc:
        return {}, f"{type(exc).__name__}"
    if response.status_code != 200:
        return {}, f"HTTP {response.status_code}"
    try:
        entries = response.json()["tree"]
        return {e["path"]: (e["sha"], int(e.get("size") or 0)) for e in entries if e.get("type") == "blob"}, ""
    except (ValueError, KeyError, TypeError):
        return {}, "an unreadable answer"


def resolve_commit(client: httpx.Client, repo: str, ref: str, api: str = API_BASE) -> str | None:
    """The commit `ref` points at, via one GitHub API call; None when it cannot be had cheaply."""
    if _SHA.fullmatch(ref):
        return ref
    try:
        response = client.get(
            COMMIT_API.format(api=api, repo=repo, ref=ref), headers={"Accept": "application/vnd.github.sha"}
        )
    except httpx.HTTPError:
        return None
    body = response.text.strip()
    return body if response.status_code == 200 and _SHA.fullmatch(body) else None


# --- the fetch ------------------------------------------------------------------------------------


def _cached_copy(root: Path | None, source: DeclaredSource, entry: ManifestEntry | None, url: str) -> bytes | None:
    """The cached bytes if they are intact and came from `url` with an ETag (so a 304 may keep them)."""
    if entry is None or entry.etag is None or entry.url != url:
        return None
    try:
        data = read_regular_bytes(cached_path(root, source))
    except (OSError, UserError):  # missing, unreadable, or not a regular file: download it again
        return None
    return data if sha256_hex(data) == entry.sha256 else None


def _readme(current: str | None, refs: dict[str, str], commits: dict[str, str | None]) -> bytes:
    """upstream/README.md with its fetch block (between the markers) rewritten and every other line kept."""
    block = [
        README_START,
        "Last written by `fsdp-skill fetch` from the files declared in `assets/sources.toml`.",
        "Each `<dir>/MANIFEST.json` lists every file's url, ref, commit, sha256, ETag and licence.",
        "",
        *(f"- {name} at `{refs[name]}` (commit {commits.get(name) or 'not resolved'})" for name in sorted(refs)),
        README_END,
    ]
    if current is None:
        return ("\n".join(["# Upstream documentation sources (cache)", "", *block]) + "\n").encode("utf-8")
    before, start, rest = current.partition(README_START)
    after = rest.partition(README_END)[2] if start else ""
    kept = before.rstrip("\n") + "\n\n" + "\n".join(block) + "\n" + after.lstrip("\n")
    return kept.encode("utf-8")


def _check_against_tree(url: str, data: bytes, tree: dict[str, tuple[str, int]], path: str, commit: str) -> None:
    """Refuse a download that is not the file the upstream tree lists (cut short, altered)."""
    if path not in tree:
        return
    blob, size = tree[path]
    if git_blob_sha(data) != blob:
        raise NetworkError(
            f"{url}: arrived as {len(data)} bytes that do not hash to the upstream file at {commit[:12]} "
            f"({size} bytes, git blob {blob[:12]}): the download was cut short or altered (or the branch "
            "moved on); fetch again; upstream/ is unchanged"
        )


def _upstream_trees(
    client: httpx.Client, api: str, commits: dict[str, str | None], unchecked: dict[str, str]
) -> dict[str, dict[str, tuple[str, int]]]:
    """Each repository's file listing at its commit (path -> git blob, size), to check downloads against;
    a repository whose listing cannot be had is recorded in `unchecked` with the reason."""
    trees: dict[str, dict[str, tuple[str, int]]] = {}
    for name, commit in sorted(commits.items()):
        trees[name], why = upstream_tree(client, api, name, commit) if commit else ({}, "no commit")
        if why:
            unchecked[name] = why
    return trees


def _download(
    client: httpx.Client,
    url: str,
    fetched_from: str,
    old: ManifestEntry | None,
    cached: bytes | None,
    retries: int,
    sleep: Sleep,
    ref_hint: str,
) -> tuple[bytes, str | None]:
    """(the file's bytes, its ETag): asked for with the cached copy's ETag, so an unchanged file answers 304
    and the cached bytes (the very object passed in) come back."""
    headers = {"If-None-Match": old.etag} if cached is not None and old and old.etag else None
    response = get_with_retries(client, fetched_from, headers=headers, retries=retries, sleep=sleep, ref_hint=ref_hint)
    if response.status_code == 304 and cached is not None:
        return cached, old.etag if old else None
    if response.status_code == 304:
        raise NetworkError(f"{url}: HTTP 304 to an unconditional request; retry, {_OFFLINE_HINT}")
    return response.content, response.headers.get("etag")


def fetch_sources(
    root: Path | None = None,
    refs: dict[str, str] | None = None,
    *,
    timeout: float = 30.0,
    retries: int = 3,
    transport: httpx.BaseTransport | None = None,
    sleep: Sleep = time.sleep,
    resolve_commits: bool = True,
    show_progress: bool = True,
    base_url: str | None = None,
    api_url: str | None = None,
) -> CacheUpdate:
    """Download every declared file into the cache under `root`, or change nothing and raise.

    `refs` overrides the ref per repository (see `resolve_refs`); `transport` replaces the network
    (httpx.MockTransport in tests); `sleep` is how retries wait; `base_url`/`api_url` name a mirror.
    """
    if timeout <= 0 or retries < 0:
        raise UserError("--timeout must be positive and --retries zero or more")
    declaration = load_declaration(root)
    overrides = refs or {}
    needs_torch = any(r.pinned_to_torch and n not in overrides for n, r in declaration.repos.items())
    refs = resolve_refs(declaration, overrides, installed_torch_version() if needs_torch else None)
    raw_base, api = base_urls(base_url, api_url)
    previous = previous_entries(root, declaration)
    unchanged = 0
    changed: list[str] = []
    unchecked: dict[str, str] = {}
    with open_client(timeout, transport) as client, CacheStage(root) as stage, _progress(show_progress) as bar:
        commits = {
            name: resolve_commit(client, name, ref, api) if resolve_commits else None for name, ref in refs.items()
        }
        trees = _upstream_trees(client, api, commits, unchecked)
        task = bar.add_task("fetching", total=len(declaration.sources))
        for source in declaration.sources:
            ref = refs[source.repo]
            url = raw_url(source.repo, ref, source.path)  # the canonical URL the manifest records
            fetched_from = raw_base + url.removeprefix(RAW_BASE)
            bar.update(task, description=source.path)
            old = previous[source.repo].get(source.path)
            cached = _cached_copy(root, source, old, url)
            data, etag = _download(client, url, fetched_from, old, cached, retries, sleep, f"{source.repo}@{ref}")
            unchanged += cached is not None and data is cached
            commit = commits[source.repo]
            if commit:
                _check_against_tree(fetched_from, data, trees[source.repo], source.path, commit)
            if old is None or old.sha256 != sha256_hex(data):
                changed.append(f"{source.dir}/{source.path}")
            stage.add(source.dir, _manifest_entry(source, ref, commit, url, fetched_from, data, etag), data)
            bar.advance(task)
        readme = stage.upstream / "README.md"
        previous_readme = read_regular_text(readme) if readme.is_file() else None
        stage.write("README.md", _readme(previous_readme, refs, commits))
        stage.commit()
    return CacheUpdate(
        upstream=stage.upstream, files=len(declaration.sources), unchanged=unchanged, refs=refs, commits=commits,
        changed=changed, removed=removed_files(declaration, previous), unchecked=unchecked,
        source=raw_base if raw_base != RAW_BASE else None,
    )


def _manifest_entry(
    source: DeclaredSource, ref: str, commit: str | None, url: str, fetched_from: str, data: bytes, etag: str | None
) -> ManifestEntry:
    """The manifest's record of one downloaded file (which must be UTF-8 text)."""
    try:
        chars = len(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise NetworkError(f"{fetched_from}: the download is not UTF-8 text; check the URL or pass --ref REF") from None
    return ManifestEntry(
        path=source.path, repo=source.repo, ref=ref, commit=commit, url=url,
        chars=chars, sha256=sha256_hex(data), etag=etag, licence=source.licence, note=None,
    )  # fmt: skip


def _progress(enabled: bool) -> Progress:
    # rich is imported here, not at module level: `fsdp-skill --help` and the tests never pay for it.
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=True)
    return Progress(
        TextColumn("[bold]fetch[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}", markup=False),  # a file path, never markup
        console=console,
        transient=True,
        # A progress bar is only drawn on a terminal; logs and pipes get the summary line alone.
        disable=not (enabled and console.is_terminal),
    )


# --- the command ----------------------------------------------------------------------------------


def _summary(update: CacheUpdate, root: Path) -> str:
    where = update.upstream.relative_to(root) if update.upstream.is_relative_to(root) else update.upstream
    repos = ", ".join(
        f"{name}@{ref}" + (f" ({commit[:12]})" if (commit := update.commits.get(name)) else "")
        for name, ref in sorted(update.refs.items())
    )
    kept = f"; {update.unchanged} answered 304 (ETag)" if update.unchanged else ""
    via = f" via {update.source}" if update.source else ""
    lines = [f"{where}/: {update.files} files from {repos}{via}{kept}"]
    if update.changed or update.removed:
        lines += [f"  changed: {where}/{path}" for path in update.changed]
        lines += [f"  removed: {where}/{path}" for path in update.removed]
        lines.append(f"{len(update.changed)} changed, {len(update.removed)} removed, "
                     f"{update.files - len(update.changed)} identical: run `fsdp-skill regenerate`")
    else:
        lines.append("every file is identical to the cached copy")
    for name, why in sorted(update.unchecked.items()):
        lines.append(f"note: {name} files were not checked against the upstream tree ({why})")
    return "\n".join(lines)


def cli_fetch(args: argparse.Namespace) -> int:
    """Handler of `fsdp-skill fetch [--ref REF]... [--from-dir DIR] [--timeout S] [--retries N]`."""
    from fsdp_skill.upstream.seed import seed_from_dir

    root = writable_root("fetch rewrites the upstream/ cache next to the skill's data")
    refs = parse_ref_args(args.ref, load_declaration(root))
    if args.from_dir:
        update = seed_from_dir(root, Path(args.from_dir), refs)
    else:
        update = fetch_sources(root, refs, timeout=args.timeout, retries=args.retries,
                               base_url=args.base_url, api_url=args.api_url)
    print(_summary(update, root))
    return 0

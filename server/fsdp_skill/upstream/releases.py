"""The "torch-api" upstream source: every declared torch release's distributed API, read from its wheel.

`fsdp-skill fetch` downloads each release's wheel (assets/torch-releases.toml lists them: the last patch
of each minor), reads its `torch/distributed/**.py` and `torch/utils/checkpoint.py` out of the zip with
`zipfile` (the wheel's torch is never imported or installed), hands those sources to a reader (the
`apidoc.release_api.read_release` the CLI passes in: this stage may not import apidoc) and deletes the
wheel. The cache keeps what the reader made of each release, not the sources:

    upstream/torch-api/MANIFEST.json   one entry per release: wheel file name, sha256, size, files read,
                                       names found, and the sha256 of the facts file
    upstream/torch-api/facts.json      {name: [[release indices], fact], ...}: each distinct fact of a
                                       name once, with the releases that have it (most names never
                                       change, so eleven releases cost little more than one)

Any platform's wheel holds the same .py files: the macOS arm64 ones are the smallest (74-127 MB against
~900 MB for Linux CUDA), and the `macosx_14_0_arm64` platform tag accepts the older `macosx_11_0` wheels
too. The download is `pip download` (the registry and its configuration the user already has); tests
pass a `Downloader` that writes a synthetic wheel, so they never touch the network.

`load_release_facts(root)` is what the build reads: offline, checked against the manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from fsdp_skill.core.atomic import write_atomic
from fsdp_skill.core.errors import NetworkError, UserError
from fsdp_skill.core.paths import upstream_dir
from fsdp_skill.core.scratch import leftovers, make_scratch_dir, remove_leftovers

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML through the tomli backport.
    import tomli as tomllib

RELEASES_FILE = "assets/torch-releases.toml"
CACHE_DIR = "torch-api"
MANIFEST_NAME, FACTS_NAME = "MANIFEST.json", "facts.json"
PLATFORM, PYTHON_VERSION = "macosx_14_0_arm64", "3.12"
DOWNLOAD_TIMEOUT_S = 900.0
LIST_TIMEOUT_S = 120.0
MAX_MEMBER_BYTES = 8 * 1024 * 1024  # no torch source file is near this; a bigger member is not a source
_RELEASE = re.compile(r"\d+\.\d+\.\d+")
RESTORE_HINT = "run `fsdp-skill fetch --only-releases` to rebuild upstream/torch-api/"

Fact = dict[str, Any]
# (release, folder to put the wheel in) -> the wheel's path. The default runs `pip download`.
Downloader = Callable[[str, Path], Path]
# {wheel path: source text} -> {qualified name: fact}. The CLI passes apidoc.release_api.read_release.
Reader = Callable[[dict[str, str]], dict[str, Fact]]


class ReleaseEntry(BaseModel):
    """One line of upstream/torch-api/MANIFEST.json."""

    model_config = ConfigDict(extra="forbid")

    release: str
    wheel: str
    sha256: str
    size: int
    files: int
    names: int
    facts_sha256: str  # of this release's facts as dumped alone (see `_release_digest`)


def release_key(release: str) -> tuple[int, ...]:
    """'2.10.0' sorts after '2.9.1'."""
    return tuple(int(part) for part in release.split("."))


def check_release(text: str) -> str:
    """A release as X.Y.Z, or UserError."""
    text = text.strip()
    if not _RELEASE.fullmatch(text):
        raise UserError(f"{text[:40]!r} is not a torch release; write it as MAJOR.MINOR.PATCH, e.g. 2.8.0")
    return text


def declared_releases(root: Path) -> list[str]:
    """The releases assets/torch-releases.toml lists, oldest first."""
    file = root / RELEASES_FILE
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
        releases = [check_release(str(r)) for r in raw["releases"]]
    except FileNotFoundError:
        raise UserError(f"{file} not found: the torch releases to read are declared there") from None
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise UserError(f"{file}: needs `releases = [\"2.4.1\", ...]` ({type(exc).__name__}: {exc})") from None
    if not releases:
        raise UserError(f"{file} declares no releases")
    return sorted(set(releases), key=release_key)


# --- the wheel -----------------------------------------------------------------------------------------


def _run_pip(arguments: list[str], what: str, timeout: float) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run `python -m pip ARGUMENTS` for the wheel platform read; (the result, the line that says why it
    failed). The user's pip configuration is kept, minus a constraint file: a cap on torch there
    (`torch<=2.14.1`) is about what gets installed, and this only lists or downloads a wheel to read its
    sources (nothing is installed), so it must not hide a newer release."""
    command = [sys.executable, "-m", "pip", *arguments, "--only-binary=:all:", "--platform", PLATFORM,
               "--python-version", PYTHON_VERSION, "--disable-pip-version-check"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, "PIP_CONSTRAINT": os.devnull})
    except subprocess.TimeoutExpired:
        raise NetworkError(f"{what} took over {timeout:g} s; check the network or the package index; "
                           "upstream/torch-api/ is unchanged") from None
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    why = next((line for line in lines if line.startswith("ERROR")), lines[-1] if lines else "no output")
    return done, why[:300]


def pip_download(release: str, folder: Path) -> Path:
    """Download the macOS arm64 wheel of torch `release` into `folder` with pip; its path."""
    what = f"pip download torch=={release}"
    done, why = _run_pip(["download", "--no-deps", "--quiet", f"torch=={release}", "-d", str(folder)], what,
                         DOWNLOAD_TIMEOUT_S)
    wheels = sorted(folder.glob("torch-*.whl"))
    if done.returncode != 0 or not wheels:
        raise NetworkError(f"{what} failed: {why}; check that the package index serves torch {release} for "
                           f"{PLATFORM} (or leave it out with --release); upstream/torch-api/ is unchanged")
    return wheels[0]


def pip_index_versions() -> list[str]:
    """Every torch release the package index serves for the wheel platform read (`pip index versions`)."""
    done, why = _run_pip(["index", "versions", "torch"], "pip index versions torch", LIST_TIMEOUT_S)
    found = re.search(r"^Available versions:(.*)$", done.stdout, re.MULTILINE)
    if done.returncode != 0 or found is None:
        raise NetworkError(f"pip index versions torch failed: {why}; check the package index, or name releases "
                           "with --release; upstream/torch-api/ is unchanged")
    return [v.strip() for v in found.group(1).split(",") if v.strip()]


def newer_releases(served: Sequence[str], newest: str) -> list[str]:
    """The releases to add after `newest`: the last patch of each minor newer than it, from what the index
    serves (local builds such as 2.13.0+cpu and pre-releases such as 2.16.0rc1 are not releases)."""
    last: dict[tuple[int, ...], str] = {}
    for version in served:
        if not _RELEASE.fullmatch(version) or release_key(version) <= release_key(newest):
            continue
        minor = release_key(version)[:2]
        if minor not in last or release_key(version) > release_key(last[minor]):
            last[minor] = version
    return sorted(last.values(), key=release_key)


def discover_releases(root: Path, declared: Sequence[str],
                      lister: Callable[[], list[str]] | None = None) -> tuple[list[str], list[str]]:
    """(releases to read, the ones discovered now): the declared and cached releases, plus those the index
    serves that are newer than the newest of them (a new torch needs no edit to assets/torch-releases.toml)."""
    try:
        cached = list(read_manifest(root))
    except UserError:
        cached = []
    known = sorted({*declared, *cached}, key=release_key)
    found = newer_releases((lister or pip_index_versions)(), known[-1]) if known else []
    return sorted({*known, *found}, key=release_key), found


def file_digest(path: Path) -> tuple[str, int]:
    """(sha256 hex, size in bytes) of a file, read in blocks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def wheel_sources(wheel: Path, wanted: Callable[[str], bool]) -> dict[str, str]:
    """{member path: text} of the wheel's members that `wanted` accepts (UTF-8 .py files)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            out: dict[str, str] = {}
            for info in archive.infolist():
                name = info.filename
                if info.is_dir() or not wanted(name) or ".." in name.split("/") or name.startswith("/"):
                    continue
                if info.file_size > MAX_MEMBER_BYTES:
                    raise UserError(f"{wheel.name}: {name} is {info.file_size:,} bytes, not a source file")
                out[name] = archive.read(info).decode("utf-8", errors="replace")
            return out
    except (zipfile.BadZipFile, OSError) as exc:
        raise NetworkError(f"{wheel.name} is not a readable wheel ({exc}); fetch again") from None


def sources_wanted(path: str) -> bool:
    """torch/distributed/**.py, torch/utils/checkpoint.py and the C++ distributed modules' stubs
    (torch/_C/_distributed*.pyi: the members of ProcessGroup, Work, Store): apidoc.release_api.wanted_path."""
    return (path.endswith(".py") and (path.startswith("torch/distributed/") or path == "torch/utils/checkpoint.py")) \
        or (path.startswith("torch/_C/_distributed") and path.endswith(".pyi") and path.count("/") == 2)


# --- the cache -----------------------------------------------------------------------------------------


def cache_dir(root: Path | None) -> Path:
    return upstream_dir(root) / CACHE_DIR


def _dump_one(fact: Fact) -> str:
    return json.dumps(fact, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _release_digest(facts: dict[str, Fact]) -> str:
    text = "\n".join(f"{json.dumps(name)}:{_dump_one(fact)}" for name, fact in sorted(facts.items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pool(per_release: dict[str, dict[str, Fact]]) -> str:
    """facts.json: each name's distinct facts once, with the indices (into `releases`) of the releases having it."""
    releases = sorted(per_release, key=release_key)
    names: dict[str, list[tuple[str, list[int]]]] = {}
    for index, release in enumerate(releases):
        for name, fact in per_release[release].items():
            variants = names.setdefault(name, [])
            text = _dump_one(fact)
            for seen, where in variants:
                if seen == text:
                    where.append(index)
                    break
            else:
                variants.append((text, [index]))
    lines = [
        json.dumps(name, ensure_ascii=False) + ": ["
        + ", ".join(f"[{json.dumps(where, separators=(',', ':'))}, {text}]" for text, where in variants) + "]"
        for name, variants in sorted(names.items())
    ]
    head = json.dumps({"releases": releases, "schema": 1})
    return "{\"meta\": " + head + ",\n\"names\": {\n" + ",\n".join(lines) + "\n}}\n"


def unpool(text: str) -> dict[str, dict[str, Fact]]:
    """{release: {name: fact}} from facts.json."""
    data = json.loads(text)
    releases = list(data["meta"]["releases"])
    out: dict[str, dict[str, Fact]] = {release: {} for release in releases}
    for name, variants in data["names"].items():
        for where, fact in variants:
            for index in where:
                out[releases[index]][name] = fact
    return out


def read_manifest(root: Path | None) -> dict[str, ReleaseEntry]:
    path = cache_dir(root) / MANIFEST_NAME
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
        entries = [ReleaseEntry.model_validate(row) for row in rows]
    except FileNotFoundError:
        raise UserError(f"{path} not found; {RESTORE_HINT}") from None
    except (ValueError, TypeError, ValidationError) as exc:
        raise UserError(f"{path} is not a valid manifest ({str(exc).splitlines()[0]}); {RESTORE_HINT}") from None
    return {entry.release: entry for entry in entries}


def load_release_facts(root: Path | None) -> dict[str, dict[str, Fact]]:
    """{release: {name: fact}}, oldest release first, read from the committed cache and checked against
    its manifest (a hand-edited or partial cache is a UserError that says how to restore it)."""
    manifest = read_manifest(root)
    path = cache_dir(root) / FACTS_NAME
    try:
        per_release = unpool(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path} not found; {RESTORE_HINT}") from None
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise UserError(f"{path} is not a valid facts file ({type(exc).__name__}); {RESTORE_HINT}") from None
    if set(per_release) != set(manifest):
        raise UserError(f"{path} holds releases {sorted(per_release)} but the manifest lists {sorted(manifest)}; "
                        f"{RESTORE_HINT}")
    for release, facts in per_release.items():
        if _release_digest(facts) != manifest[release].facts_sha256:
            raise UserError(f"{path}: the facts of torch {release} do not match the manifest's sha256 "
                            f"(the file was edited); {RESTORE_HINT}")
    return {release: per_release[release] for release in sorted(per_release, key=release_key)}


def _finish_interrupted_swap(target: Path) -> None:
    """A fetch killed between moving upstream/torch-api/ aside and moving the new one in left none:
    put the previous one back before anything removes it."""
    if not target.exists():
        for old in reversed(leftovers(target.parent, ".torch-api-old-")):
            os.replace(old, target)
            break
    remove_leftovers(target.parent, ".torch-api-old-")


def _write_cache(root: Path | None, per_release: dict[str, dict[str, Fact]], entries: list[ReleaseEntry]) -> None:
    """Write MANIFEST.json and facts.json into a staging folder, then swap it for upstream/torch-api/."""
    target = cache_dir(root)
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = make_scratch_dir(target.parent, ".torch-api-new-")
    try:
        stage.chmod(0o755)  # mkdtemp's 0700 would follow the folder into the checkout
        rows = [e.model_dump() for e in sorted(entries, key=lambda e: release_key(e.release))]
        write_atomic(stage / MANIFEST_NAME, json.dumps(rows, indent=2, sort_keys=True) + "\n")
        write_atomic(stage / FACTS_NAME, pool(per_release))
        old = None
        if target.exists():
            old = target.with_name(stage.name.replace("-new-", "-old-"))
            os.replace(target, old)
        os.replace(stage, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)


# --- the fetch -----------------------------------------------------------------------------------------


@dataclass
class ReleasesUpdate:
    """What a fetch of the releases did."""

    read: list[str] = field(default_factory=list)  # releases downloaded and read now
    kept: list[str] = field(default_factory=list)  # releases already in the cache, left as they were
    seconds: float = 0.0
    facts_bytes: int = 0
    entries: dict[str, ReleaseEntry] = field(default_factory=dict)


def _drop_never_exported(per_release: dict[str, dict[str, Fact]]) -> dict[str, dict[str, Fact]]:
    """The facts without the names the reader marks `hidden` (bound but not exported) in every release: a
    module's own helpers, which no release offers. A name that left `__all__` keeps its hidden releases
    (it still imports there). Halves facts.json; a name first exported by a release added later gets its
    earlier, hidden releases back with `--refresh-releases`."""
    exported = {name for facts in per_release.values() for name, fact in facts.items() if not fact.get("hidden")}
    return {release: {name: fact for name, fact in facts.items() if name in exported}
            for release, facts in per_release.items()}


def fetch_releases(
    root: Path,
    releases: Sequence[str],
    reader: Reader,
    *,
    downloader: Downloader | None = None,
    refresh: bool = False,
    work_dir: Path | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> ReleasesUpdate:
    """Download and read each release not yet in the cache (every one with `refresh`), one wheel at a time
    (a wheel is deleted as soon as it is read, so the disk holds one), then rewrite the cache at once.
    Releases in the cache that `releases` does not name are dropped. Any failure leaves the cache as it was."""
    start = time.monotonic()
    _finish_interrupted_swap(cache_dir(root))
    wanted = sorted({check_release(r) for r in releases}, key=release_key)
    if not wanted:
        raise UserError("no torch releases to read; list them in assets/torch-releases.toml or pass --release")
    try:
        previous = load_release_facts(root)
        previous_entries = read_manifest(root)
    except UserError:
        previous, previous_entries = {}, {}
    update = ReleasesUpdate()
    per_release: dict[str, dict[str, Fact]] = {}
    entries: list[ReleaseEntry] = []
    with tempfile.TemporaryDirectory(prefix="fsdp-skill-wheels-", dir=work_dir) as scratch:
        for release in wanted:
            if release in previous and not refresh:
                per_release[release] = previous[release]
                entries.append(previous_entries[release])
                update.kept.append(release)
                continue
            folder = Path(scratch) / release
            folder.mkdir()
            log(f"torch {release}: downloading")
            wheel = (downloader or pip_download)(release, folder)
            sha, size = file_digest(wheel)
            sources = wheel_sources(wheel, sources_wanted)
            shutil.rmtree(folder, ignore_errors=True)  # keep one wheel on disk at a time
            if not sources:
                raise UserError(f"{wheel.name} holds no torch/distributed sources; is it a torch wheel?")
            facts = reader(sources)
            log(f"torch {release}: {len(sources)} files, {len(facts)} names ({wheel.name}, {size:,} bytes)")
            per_release[release] = facts
            entries.append(ReleaseEntry(release=release, wheel=wheel.name, sha256=sha, size=size,
                                        files=len(sources), names=len(facts), facts_sha256=_release_digest(facts)))
            update.read.append(release)
    per_release = _drop_never_exported(per_release)
    entries = [e.model_copy(update={"names": len(per_release[e.release]),
                                    "facts_sha256": _release_digest(per_release[e.release])}) for e in entries]
    _write_cache(root, per_release, entries)
    update.seconds = time.monotonic() - start
    update.facts_bytes = (cache_dir(root) / FACTS_NAME).stat().st_size
    update.entries = {e.release: e for e in entries}
    return update


def summary(update: ReleasesUpdate) -> str:
    releases = sorted(update.entries, key=release_key)
    span = f"{releases[0]} … {releases[-1]}" if releases else "none"
    lines = [f"upstream/torch-api/: {len(releases)} torch releases ({span}); read now: "
             f"{', '.join(update.read) or 'none'}; kept from the cache: {', '.join(update.kept) or 'none'}; "
             f"facts.json {update.facts_bytes:,} bytes; {update.seconds:.0f} s"]
    if update.read:
        lines.append("run `fsdp-skill regenerate` to rebuild references/api-history.json and versions.md")
    return "\n".join(lines)

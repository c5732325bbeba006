"""The API timeline (references/api-history.json): its models, loading, and the questions asked of it.

`fsdp-skill regenerate` writes the file from the committed per-release facts (build.api_history); the
server, the CLI and the build's versions.md read it through this module:

    history = load_history(references_dir(root) / HISTORY_FILE)
    history.names["torch.distributed.fsdp.fully_shard"].moved_from   # ['torch.distributed._composable.fsdp…']
    changes = what_changed(history, "2.12.1", "2.13.0")                # added / deprecated / removed / moved …
    since_line(history.names[name], history)                          # "since 2.6 (2.4–2.5: …)"

Releases are read, not run: each entry says in which releases a name exists, from which it is deprecated
(and for what), where it lived before a move, and how its parameters changed. Only what the sources spell
is known (see apidoc.release_api); the pinned torch is the one whose behaviour the checks verify.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from fsdp_skill.core.errors import UserError

__all__ = [
    "AREAS",
    "CHANGE_KINDS",
    "HISTORY_FILE",
    "VERSIONS_FILE",
    "ApiHistory",
    "Change",
    "Changes",
    "DeprecationSpan",
    "OTHER_AREA",
    "NameHistory",
    "SignatureChange",
    "area_of",
    "dump_history",
    "load_history",
    "normalize_release",
    "release_heading",
    "release_key",
    "short_name_matches",
    "since_line",
    "what_changed",
]

HISTORY_FILE = "api-history.json"
VERSIONS_FILE = "versions.md"  # the timeline as markdown, a section per release (build.api_history writes it)
# The kinds of change what_changed reports, in the order they are shown.
CHANGE_KINDS = ("added", "deprecated", "undeprecated", "removed", "moved", "signature_changed")
SCHEMA = 1
# The scope's areas, most important first: what_changed and versions.md list changes in this order.
AREAS: list[tuple[str, tuple[str, ...]]] = [
    ("fsdp", ("torch.distributed.fsdp", "torch.distributed._composable.fsdp")),
    ("checkpoint", ("torch.distributed.checkpoint", "torch.utils.checkpoint",
                    "torch.distributed._composable.checkpoint_activation")),
    ("tensor", ("torch.distributed.tensor", "torch.distributed._tensor")),
    ("device_mesh", ("torch.distributed.device_mesh",)),
    ("pipelining", ("torch.distributed.pipelining",)),
    ("collectives", ("torch.distributed.distributed_c10d", "torch.distributed._functional_collectives",
                     "torch.distributed.nn", "torch.distributed._symmetric_memory")),
]
OTHER_AREA = "other"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SignatureChange(_Model):
    """How a callable's parameters differ from the previous release that has it."""

    version: str = Field(description="The release with the new signature.")
    added: list[str] = Field(default_factory=list, description="Parameters new in this release.")
    removed: list[str] = Field(default_factory=list, description="Parameters gone in this release.")
    defaults_changed: list[str] = Field(default_factory=list, description="Parameters whose default changed.")
    kinds_changed: list[str] = Field(default_factory=list,
                                     description="Parameters that became keyword-only / positional-only or back.")


class DeprecationSpan(_Model):
    """Releases in a row that warn with one message: what that release says, and whether it can be followed."""

    since: str = Field(description="First release of the span.")
    until: str | None = Field(default=None, description="First release after the span that has the name but "
                                                        "does not warn (or warns otherwise); null when none.")
    message: str = Field(description="The warning as these releases word it.")
    replacement: str | None = Field(default=None, description="What this message says to use.")
    note: str | None = Field(default=None, description="Set when the replacement does not exist in `since`.")


class NameHistory(_Model):
    """The timeline of one qualified name across the releases read."""

    name: str = Field(description="Qualified name, e.g. torch.distributed.fsdp.fully_shard.")
    kind: str = Field(description="function, class, method, property, classmethod, staticmethod, module, data "
                                  "or external (defined in C++: its signature is not read).")
    versions: list[str] = Field(description="Every release read, oldest first, in which the name exists.")
    deprecated_since: str | None = Field(default=None, description="First release where it is deprecated.")
    deprecated_until: str | None = Field(default=None, description="First release, after the last one that "
                                         "warns, that has the name and no longer warns; null while the newest "
                                         "release with the name warns.")
    deprecation: str | None = Field(default=None, description="The deprecation message (newest release).")
    replacement: str | None = Field(default=None, description="What the deprecation message says to use.")
    deprecations: list[DeprecationSpan] = Field(default_factory=list,
                                                description="Each span of releases with one warning, oldest first.")
    removed_in: str | None = Field(default=None, description="First release (after the last one that has it) "
                                                             "without it; null while the newest still has it.")
    moved_from: list[str] = Field(default_factory=list,
                                  description="Names under which the same object existed in earlier releases.")
    moved_to: list[str] = Field(default_factory=list, description="Names the object is found under later.")
    signature_changes: list[SignatureChange] = Field(default_factory=list)
    origin: str = Field(default="", description="'module:name' where the object is defined (newest release).")
    conditional: bool = Field(default=False, description="Bound only in some builds (ProcessGroupMPI: torch "
                                                         "built with MPI), in the newest release that has it.")
    aliases: list[str] = Field(default_factory=list, description="Other names of the same object (same origin) "
                                                                 "in the newest release that has this one.")

    def exists_in(self, release: str) -> bool:
        return release in self.versions


class ApiHistory(_Model):
    schema_version: int = SCHEMA
    releases: list[str] = Field(description="The releases read, oldest first.")
    pinned: str = Field(description="The torch release the skill's checks run on.")
    names: dict[str, NameHistory]


class Change(_Model):
    name: str
    area: str
    version: str = Field(description="The release in the range where it happened.")
    detail: str = ""
    aliases: list[str] = Field(default_factory=list, description="Other names of the same object, same change.")


class Changes(_Model):
    from_version: str
    to_version: str
    added: list[Change] = Field(default_factory=list)
    deprecated: list[Change] = Field(default_factory=list)
    undeprecated: list[Change] = Field(default_factory=list, description="Warned in the older release, no longer "
                                                                         "in the newer one (a plain alias again).")
    removed: list[Change] = Field(default_factory=list)
    moved: list[Change] = Field(default_factory=list)
    signature_changed: list[Change] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


# --- releases -------------------------------------------------------------------------------------------


def release_heading(release: str, previous: str | None) -> str:
    """versions.md's heading of a release: what the search's release documents take their anchor from."""
    return f"torch {release} (against {previous})" if previous else f"torch {release}"


def release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split(".") if part.isdigit())


def normalize_release(text: str, releases: list[str]) -> tuple[str, str | None]:
    """(a release of the timeline, a note when it stands in for the one asked for). '2.13.0+cpu' and '2.13'
    mean 2.13.0; '2.5.0' is read as 2.5.1 (the patch the timeline has for 2.5), said in the note."""
    asked = text.strip().removeprefix("v").split("+")[0]
    if asked in releases:
        return asked, None
    parts = asked.split(".")
    if len(parts) in (2, 3) and all(p.isdigit() for p in parts):
        same_minor = [r for r in releases if r.split(".")[:2] == parts[:2]]
        if same_minor:
            note = None if len(parts) == 2 else f"torch {asked} is read as {same_minor[-1]}, the patch release of " \
                f"{'.'.join(parts[:2])} the timeline holds"
            return same_minor[-1], note
    shown = text.strip()[:40]
    raise UserError(f"torch {shown!r} is not in the API timeline, which holds {releases[0]} … {releases[-1]} "
                    f"({', '.join(releases)}): pass one of those, or major.minor such as '2.8'")


def area_of(name: str) -> str:
    for area, prefixes in AREAS:
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return area
    if name.count(".") == 2 and name.startswith("torch.distributed."):
        return "collectives"  # torch.distributed.all_reduce and friends
    return OTHER_AREA


def _area_rank(name: str) -> int:
    area = area_of(name)
    return next((i for i, (a, _) in enumerate(AREAS) if a == area), len(AREAS))


# --- the file -------------------------------------------------------------------------------------------


def dump_history(history: ApiHistory) -> str:
    """Deterministic JSON, one name per line (defaults left out), for a reviewable diff per regenerate."""
    head = {"schema_version": history.schema_version, "releases": history.releases, "pinned": history.pinned}
    lines = [json.dumps(name) + ": " + json.dumps(entry.model_dump(exclude_defaults=True, exclude={"name"}),
                                                   sort_keys=True, ensure_ascii=False, separators=(",", ":"))
             for name, entry in sorted(history.names.items())]
    return json.dumps(head, sort_keys=True)[:-1] + ",\n\"names\": {\n" + ",\n".join(lines) + "\n}}\n"


_CACHE: dict[Path, tuple[float, ApiHistory]] = {}


def load_history(path: Path) -> ApiHistory:
    """The timeline file (re-read only when it changed on disk); UserError naming the fix when absent."""
    try:
        stamp = path.stat().st_mtime
    except FileNotFoundError:
        raise UserError(f"{path} not found: the API timeline is built by `fsdp-skill regenerate` "
                        "from upstream/torch-api/ (`fsdp-skill fetch --only-releases` fills that)") from None
    cached = _CACHE.get(path)
    if cached and cached[0] == stamp:
        return cached[1]
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        names = {name: NameHistory(name=name, **entry) for name, entry in raw.pop("names").items()}
        history = ApiHistory(names=names, **raw)
    except (ValueError, TypeError, KeyError) as exc:
        raise UserError(f"{path} is not a valid API timeline ({type(exc).__name__}); run `fsdp-skill regenerate`") \
            from None
    _CACHE[path] = (stamp, history)
    return history


# --- questions ------------------------------------------------------------------------------------------


def short_name_matches(history: ApiHistory, short: str) -> list[str]:
    """Qualified names ending in `.short` (or `.Class.short` spellings such as FSDPModule.unshard), the
    shortest and least private first."""
    suffix = "." + short.strip(".")
    found = [name for name in history.names if name.endswith(suffix)]
    return sorted(found, key=lambda n: ("._" in n, n.count("."), n))


def _span(versions: list[str], releases: list[str]) -> str:
    """'2.4–2.5, 2.8' for the releases `versions` holds, as runs of consecutive releases (major.minor)."""
    runs: list[list[str]] = []
    for release in releases:
        if release not in versions:
            continue
        if runs and releases.index(release) == releases.index(runs[-1][-1]) + 1:
            runs[-1].append(release)
        else:
            runs.append([release])
    return ", ".join(_minor(r[0]) if len(r) == 1 else f"{_minor(r[0])}–{_minor(r[-1])}" for r in runs)


def _minor(release: str) -> str:
    return ".".join(release.split(".")[:2])


def since_line(entry: NameHistory, history: ApiHistory) -> str:
    """One line for get_api/show: 'since 2.6 (2.4–2.5: torch.distributed._composable.fsdp.fully_shard);
    `shard_placement_fn` since 2.7; deprecated since 2.13 (use …)'."""
    releases = history.releases
    if entry.versions == releases:
        parts = [f"in every release read ({_span(releases, releases)})"]
    elif entry.versions and entry.versions == releases[releases.index(entry.versions[0]):]:
        parts = [f"since {_minor(entry.versions[0])}"]
    else:
        parts = [f"in {_span(entry.versions, releases)}"]
    earlier = [m for m in entry.moved_from if m in history.names]
    if earlier:
        before = history.names[earlier[0]].versions
        start = entry.versions[0] if entry.versions else ""
        spans = _span([v for v in before if release_key(v) < release_key(start)], history.releases)
        parts[0] += f" ({spans}: {earlier[0]})" if spans else f" (before: {earlier[0]})"
    added = [(p, change.version) for change in entry.signature_changes for p in change.added]
    parts += [f"`{p}` since {_minor(v)}" for p, v in added[-3:]]
    if entry.deprecated_since:
        use = f" (use {entry.replacement})" if entry.replacement else ""
        if entry.deprecated_until:
            last = releases[releases.index(entry.deprecated_until) - 1] if entry.deprecated_until in releases else ""
            span = _minor(entry.deprecated_since) if last == entry.deprecated_since else \
                f"{_minor(entry.deprecated_since)}–{_minor(last)}"
            parts.append(f"deprecated in {span}{use}, no longer warns from {_minor(entry.deprecated_until)}")
        else:
            parts.append(f"deprecated since {_minor(entry.deprecated_since)}{use}")
        notes = [span.note for span in entry.deprecations if span.note]
        if notes:
            parts.append(notes[-1])
    if entry.removed_in:
        parts.append(f"removed in {_minor(entry.removed_in)}")
    if entry.moved_to:
        parts.append(f"moved to {entry.moved_to[0]}")
    return "; ".join(parts)


def _between(version: str | None, low: str, high: str) -> bool:
    return version is not None and release_key(low) < release_key(version) <= release_key(high)


def _first_in(entry: NameHistory, low: str, high: str) -> str:
    return next((v for v in entry.versions if _between(v, low, high)), high)


def _describe(change: SignatureChange) -> str:
    words = []
    for label, params in (("added", change.added), ("removed", change.removed),
                          ("default changed", change.defaults_changed), ("kind changed", change.kinds_changed)):
        if params:
            words.append(f"{label}: {', '.join(params)}")
    return "; ".join(words)


def what_changed(history: ApiHistory, from_version: str, to_version: str) -> Changes:
    """What differs in the scope between two releases of the timeline (from < to), most important area
    first; names of one object (dist.x and distributed_c10d.x) are one change with aliases."""
    notes = []
    low, low_note = normalize_release(from_version, history.releases)
    high, high_note = normalize_release(to_version, history.releases)
    notes += [n for n in (low_note, high_note) if n]
    if release_key(low) >= release_key(high):
        raise UserError(f"from_version {low} must be older than to_version {high}: pass the older release first "
                        f"(e.g. from_version={history.releases[0]!r}, to_version={history.pinned!r})")
    buckets: dict[str, list[tuple[str, Change]]] = {k: [] for k in CHANGE_KINDS}
    # A new spelling of an object the older release already had under another name is an alias, not an addition.
    known = {entry.origin for entry in history.names.values() if entry.origin and entry.exists_in(low)}
    for name, entry in history.names.items():
        at_low, at_high = entry.exists_in(low), entry.exists_in(high)
        key = entry.origin or name
        if at_high and not at_low:
            moved = [m for m in entry.moved_from if history.names.get(m) and history.names[m].exists_in(low)]
            version = _first_in(entry, low, high)
            if moved:
                buckets["moved"].append((f"{key}>{name}", Change(name=name, area=area_of(name), version=version,
                                                                 detail=f"from {', '.join(moved)}")))
            elif entry.origin not in known:
                buckets["added"].append((key, Change(name=name, area=area_of(name), version=version)))
        if at_low and not at_high:
            gone = entry.removed_in if entry.removed_in and _between(entry.removed_in, low, high) \
                else _first_missing(entry, history, low, high)
            detail = f"now {', '.join(entry.moved_to)}" if entry.moved_to else ""
            buckets["removed"].append((key, Change(name=name, area=area_of(name), version=gone, detail=detail)))
        warned, warns = _warning(entry, low), _warning(entry, high)
        if at_high and warns is not None and _between(warns.since, low, high) and entry.exists_in(warns.since):
            detail = f"use {warns.replacement}" if warns.replacement else warns.message[:200]
            buckets["deprecated"].append((key, Change(name=name, area=area_of(name), version=warns.since,
                                                      detail=detail)))
        if at_low and at_high and warned is not None and warns is None:  # all_gather_into_tensor in 2.15
            buckets["undeprecated"].append((key, Change(name=name, area=area_of(name), version=warned.until or high,
                                                        detail=f"warned from {warned.since}")))
        if at_low and at_high:
            for change in entry.signature_changes:
                if _between(change.version, low, high):
                    buckets["signature_changed"].append((f"{key}@{change.version}", Change(
                        name=name, area=area_of(name), version=change.version, detail=_describe(change))))
    result = Changes(from_version=low, to_version=high, notes=notes)
    for bucket, items in buckets.items():
        setattr(result, bucket, _collapse(items))
    return result


def _warning(entry: NameHistory, release: str) -> DeprecationSpan | None:
    """The deprecation span `release` falls in, if the name warns there."""
    for span in entry.deprecations:
        if release_key(span.since) <= release_key(release) and (
                span.until is None or release_key(release) < release_key(span.until)):
            return span
    return None


def _first_missing(entry: NameHistory, history: ApiHistory, low: str, high: str) -> str:
    return next((r for r in history.releases if _between(r, low, high) and r not in entry.versions), high)


def _collapse(items: list[tuple[str, Change]]) -> list[Change]:
    """One change per object (grouped by key), under its shortest public name, ordered by area then name."""
    groups: dict[str, list[Change]] = {}
    for key, change in items:
        groups.setdefault(key, []).append(change)
    out = []
    for changes in groups.values():
        changes.sort(key=lambda c: ("._" in c.name, c.name.count("."), c.name))
        head = changes[0].model_copy(update={"aliases": [c.name for c in changes[1:]]})
        out.append(head)
    return sorted(out, key=lambda c: (_area_rank(c.name), c.name))

"""The API timeline, built at `regenerate` time from the committed per-release facts (upstream/torch-api/):
references/api-history.json (per qualified name: versions, deprecation, removal, moves, signature changes)
and references/versions.md (per release: what was added, deprecated, removed, moved, re-signed).

Offline and deterministic: the same cache gives the same bytes. The rules:
- versions: the releases whose facts have the name (exported, or `hidden`: still resolving after it left
  `__all__`; a name no release exports is dropped); removed_in: the release after the last of them, when
  the newest release lacks it;
- deprecations: each run of releases warning with one message, as that release words it, with `until` (the
  first later release with the name and without that warning) and a note when the replacement it names
  does not exist in its first release; deprecated_since / deprecated_until are the first start and the
  last end, deprecation and replacement the newest message's;
- signature_changes: between each release that has the name and the previous one that has it, the
  parameters added, removed, whose default text changed, or whose kind changed (keyword-only …);
- moved_from: names under which the object was defined elsewhere before the name appeared, with the same
  last component (the last two for a member) and kind, that now re-export it (`_composable.fsdp.fully_shard`
  re-exports `fsdp.fully_shard` from 2.6) or disappeared exactly then with the same parameters (a moved
  file), or a module whose path differs only in a private `_` part (`_tensor` -> `tensor`). A new
  spelling of a definition that did not move is an alias, not a move. moved_to is the inverse;
- aliases: the other names with the same origin in the newest release that has the name.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from fsdp_skill.core.api_history import (
    HISTORY_FILE,
    VERSIONS_FILE,
    ApiHistory,
    Changes,
    DeprecationSpan,
    NameHistory,
    SignatureChange,
    dump_history,
    release_heading,
    release_key,
    what_changed,
)
from fsdp_skill.upstream.releases import load_release_facts

__all__ = ["VERSIONS_FILE", "build_history", "history_files", "render_versions", "timeline"]

MEMBER_KINDS = ("method", "property", "classmethod", "staticmethod")
MAX_ALIASES = 12
SCOPE = ("torch.distributed", "torch.utils.checkpoint")
Fact = dict[str, Any]


def _signature_change(version: str, old: list[list[Any]], new: list[list[Any]]) -> SignatureChange | None:
    before = {p[0]: p for p in old}
    after = {p[0]: p for p in new}
    change = SignatureChange(
        version=version,
        added=[p for p in after if p not in before],
        removed=[p for p in before if p not in after],
        defaults_changed=[p for p in after if p in before and after[p][2] != before[p][2]],
        kinds_changed=[p for p in after if p in before and after[p][1] != before[p][1]],
    )
    return change if change.added or change.removed or change.defaults_changed or change.kinds_changed else None


def _normalized_module(name: str) -> str:
    """torch.distributed._tensor -> torch.distributed.tensor; _composable.fsdp -> fsdp (the moves of 2.5/2.6)."""
    parts = [p for p in name.split(".") if p != "_composable"]
    return ".".join(p.lstrip("_") for p in parts)


def _tail(name: str, kind: str) -> str:
    return ".".join(name.split(".")[-2:]) if kind in MEMBER_KINDS else name.rsplit(".", 1)[-1]


def _moves(per_release: dict[str, dict[str, Fact]], releases: list[str],
           versions: dict[str, list[str]]) -> dict[str, list[str]]:
    """{name: the names it moved from} (see the module docstring)."""
    by_tail: dict[str, list[str]] = defaultdict(list)
    modules: dict[str, list[str]] = defaultdict(list)
    for name, present in versions.items():
        kind = per_release[present[-1]][name]["kind"]
        by_tail[_tail(name, kind)].append(name)
        if kind == "module":
            modules[_normalized_module(name)].append(name)
    moved: dict[str, list[str]] = {}
    for name, present in versions.items():
        first = present[0]
        if first == releases[0]:
            continue
        previous = releases[releases.index(first) - 1]
        fact = per_release[first][name]
        kind = fact["kind"]
        pool = modules[_normalized_module(name)] if kind == "module" else by_tail[_tail(name, kind)]
        found = []
        for other in sorted(pool):
            if other == name or previous not in versions[other] or release_key(versions[other][0]) >= \
                    release_key(first):
                continue
            earlier = per_release[previous][other]
            if earlier["kind"] != kind:
                continue
            now = per_release[first].get(other)
            # A move is the definition moving: the old name's object was defined elsewhere than the new
            # name's, and the old name now re-exports the new one or is gone with the same parameters (the
            # file moved). A new spelling of an unchanged definition is an alias, not a move
            # (`_tensor.init_device_mesh` re-exports `device_mesh.init_device_mesh`).
            relocated = earlier.get("origin") != fact.get("origin")
            same_object = now is not None and now.get("origin") == fact.get("origin")
            vanished = now is None and [p[0] for p in earlier.get("params", [])] == [
                p[0] for p in fact.get("params", [])]
            if kind == "module" or (relocated and (same_object or vanished)):  # modules: differ in `_` parts
                found.append(other)
        if found:
            moved[name] = sorted(found, key=lambda n: (n.count("."), n))
    return moved


def _exists(name: str, owner: str, facts: dict[str, Fact]) -> bool:
    """Does a replacement a message names exist in a release: as spelled, beside the deprecated name, or
    (a bare name) as the last part of some name of that release."""
    if name in facts or f"{owner}.{name}" in facts or f"torch.{name}" in facts:
        return True
    return "." not in name and any(n.endswith("." + name) for n in facts)


def _spans(name: str, present: list[str], per_release: dict[str, dict[str, Fact]],
           releases: list[str]) -> list[DeprecationSpan]:
    """The runs of releases that warn with one message, each with its end and a note when the replacement
    it names does not exist in its first release (the 2.13 message's all_gather_single is not in 2.12)."""
    spans: list[DeprecationSpan] = []
    owner = name.rpartition(".")[0]
    for release in present:
        stated = per_release[release][name].get("deprecated")
        current = spans[-1] if spans and spans[-1].until is None else None
        if current is not None and (not stated or stated[0] != current.message):
            current.until = release
            current = None
        if stated and current is None:
            message, replacement = stated[0], stated[1]
            note = None
            # Checked where the timeline could hold it: a bare name or one in the scope (not `torch.compile`).
            checkable = replacement and ("." not in replacement or replacement.startswith(SCOPE))
            if checkable and not _exists(replacement, owner, per_release[release]):
                later = [r for r in releases if release_key(r) > release_key(release)
                         and _exists(replacement, owner, per_release[r])]
                note = f"replacement {replacement} not available in {release}" + (
                    f" (first in {later[0]})" if later else ": it exists in no release read")
            spans.append(DeprecationSpan(since=release, message=message, replacement=replacement, note=note))
    return spans


def _aliases(name: str, release: str, origins: dict[str, dict[str, list[str]]],
             per_release: dict[str, dict[str, Fact]]) -> list[str]:
    """Other names of the object `name` is in `release` (same origin), least private and shortest first."""
    origin = per_release[release][name].get("origin")
    same = [n for n in origins[release].get(origin or "", []) if n != name] if origin else []
    return sorted(same, key=lambda n: ("._" in n, n.count("."), n))[:MAX_ALIASES]


def _visible(per_release: dict[str, dict[str, Fact]]) -> dict[str, dict[str, Fact]]:
    """The facts without the `hidden` mark, limited to names some release exports: a name that only ever
    resolves unexported (a module's helper) is not in the scope; one that left `__all__` still exists."""
    exported = {name for facts in per_release.values() for name, fact in facts.items() if not fact.get("hidden")}
    return {release: {name: {k: v for k, v in fact.items() if k != "hidden"} for name, fact in facts.items()
                      if name in exported} for release, facts in per_release.items()}


def build_history(per_release: dict[str, dict[str, Fact]], pinned: str) -> ApiHistory:
    """The timeline of every name the releases' facts hold."""
    per_release = _visible(per_release)
    releases = sorted(per_release, key=release_key)
    versions: dict[str, list[str]] = defaultdict(list)
    origins: dict[str, dict[str, list[str]]] = {release: defaultdict(list) for release in releases}
    for release in releases:
        for name, fact in per_release[release].items():
            versions[name].append(release)
            if fact.get("origin"):
                origins[release][fact["origin"]].append(name)
    moved_from = _moves(per_release, releases, versions)
    moved_to: dict[str, list[str]] = defaultdict(list)
    for name, sources in moved_from.items():
        for source in sources:
            moved_to[source].append(name)
    names: dict[str, NameHistory] = {}
    for name, present in sorted(versions.items()):
        facts = [per_release[r][name] for r in present]
        latest = facts[-1]
        spans = _spans(name, present, per_release, releases)
        changes = []
        pairs = list(zip(present, facts, strict=True))
        for (_, old), (release, new) in zip(pairs, pairs[1:], strict=False):
            if "params" in old and "params" in new:
                change = _signature_change(release, old["params"], new["params"])
                if change is not None:
                    changes.append(change)
        last = releases.index(present[-1])
        names[name] = NameHistory(
            name=name,
            kind=latest["kind"],
            versions=present,
            deprecated_since=spans[0].since if spans else None,
            deprecated_until=spans[-1].until if spans else None,
            deprecation=spans[-1].message if spans else None,
            replacement=spans[-1].replacement if spans else None,
            deprecations=spans,
            removed_in=releases[last + 1] if last + 1 < len(releases) else None,
            moved_from=moved_from.get(name, []),
            moved_to=sorted(moved_to.get(name, [])),
            signature_changes=changes,
            origin=latest.get("origin", ""),
            aliases=_aliases(name, present[-1], origins, per_release),
            conditional=bool(latest.get("conditional")),
        )
    return ApiHistory(releases=releases, pinned=pinned if pinned in releases else releases[-1], names=names)


# --- versions.md --------------------------------------------------------------------------------------------

_HEADINGS = [("added", "Added"), ("deprecated", "Deprecated"), ("undeprecated", "No longer deprecated"),
             ("removed", "Removed"), ("moved", "Moved"),
             ("signature_changed", "Signature changed")]


def _item(change: Any) -> str:
    also = f" (also {', '.join(f'`{a}`' for a in change.aliases[:3])}" + \
        (f" and {len(change.aliases) - 3} more)" if len(change.aliases) > 3 else ")") if change.aliases else ""
    detail = f": {change.detail}" if change.detail else ""
    return f"`{change.name}`{also}{detail}"


def _section(changes: Changes) -> list[str]:
    lines: list[str] = []
    for key, heading in _HEADINGS:
        items = getattr(changes, key)
        if items:
            lines += ["", f"### {changes.to_version}: {heading.lower()} ({len(items)})", ""]
            lines += [f"- {change.area}: {_item(change)}" for change in items]
    return lines or ["", "No change in the scope."]


def render_versions(history: ApiHistory) -> str:
    """references/versions.md: one section per release, newest first, each against the release before."""
    releases = history.releases
    lines = [
        "# torch releases: what changed in the distributed API",
        "",
        f"Generated by `fsdp-skill regenerate` from upstream/torch-api/ (the `.py` sources of each release's "
        f"wheel, read with `ast`, never imported). Releases read: {', '.join(releases)}; the skill's checks run "
        f"on torch {history.pinned}. Scope: torch.distributed (public modules, plus `_composable`, `_tensor`, "
        "`_functional_collectives`, `_symmetric_memory`) and torch.utils.checkpoint. Names of one object "
        "(`torch.distributed.x` and `torch.distributed.distributed_c10d.x`) are listed once, with the others "
        "after \"also\". Per name: `fsdp-skill history NAME`, or the `api_history` tool; between any two "
        "releases: `fsdp-skill what-changed FROM TO`, or `what_changed`.",
    ]
    for older, newer in reversed(list(zip(releases, releases[1:], strict=False))):
        changes = what_changed(history, older, newer)
        lines += ["", f"## {release_heading(newer, older)}"]
        lines += _section(changes)
    lines += ["", f"## {release_heading(releases[0], None)}", "",
              "The oldest release read: every name in it is where the timeline starts."]
    return "\n".join(lines) + "\n"


def timeline(root: Path, pinned: str) -> ApiHistory:
    """The timeline of the committed cache's releases (upstream/torch-api/) only."""
    return build_history(load_release_facts(root), pinned)


def history_files(history: ApiHistory) -> dict[str, str]:
    """{references/ file name: text} of the timeline."""
    return {HISTORY_FILE: dump_history(history), VERSIONS_FILE: render_versions(history)}


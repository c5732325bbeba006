"""The API timeline, built at `regenerate` time from the committed per-release facts (upstream/torch-api/):
references/api-history.json (per qualified name: versions, deprecation, removal, moves, signature changes)
and references/versions.md (per release: what was added, deprecated, removed, moved, re-signed).

Offline and deterministic: the same cache gives the same bytes. The rules:
- versions: the releases whose facts have the name; removed_in: the release after the last of them, when
  the newest release lacks it;
- deprecated_since: the first release whose facts carry a deprecation (message and replacement from the
  newest one);
- signature_changes: between each release that has the name and the previous one that has it, the
  parameters added, removed, whose default text changed, or whose kind changed (keyword-only …);
- moved_from: names under which the same object was found before the name appeared, with the same last
  component (the last two for a member) and kind: one that still exists in the release where the name
  appears with the same origin (`_composable.fsdp.fully_shard` re-exports `fsdp.fully_shard` from 2.6),
  one that disappears exactly then (a moved file), or a module whose path differs only in a private
  `_` part (`_tensor` -> `tensor`). moved_to is the inverse.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from fsdp_skill.core.api_history import (
    HISTORY_FILE,
    ApiHistory,
    Changes,
    NameHistory,
    SignatureChange,
    dump_history,
    release_key,
    what_changed,
)
from fsdp_skill.upstream.releases import load_release_facts

__all__ = ["VERSIONS_FILE", "build_history", "history_files", "render_versions", "timeline"]

VERSIONS_FILE = "versions.md"
MEMBER_KINDS = ("method", "property", "classmethod", "staticmethod")
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
            same_object = now is not None and now.get("origin") == fact.get("origin") and kind != "external"
            # Gone exactly when this name appeared, with the same parameters: the file moved.
            vanished = now is None and [p[0] for p in earlier.get("params", [])] == [
                p[0] for p in fact.get("params", [])]
            if same_object or vanished or kind == "module":  # modules: the pool differs only in `_` parts
                found.append(other)
        if found:
            moved[name] = sorted(found, key=lambda n: (n.count("."), n))
    return moved


def build_history(per_release: dict[str, dict[str, Fact]], pinned: str) -> ApiHistory:
    """The timeline of every name the releases' facts hold."""
    releases = sorted(per_release, key=release_key)
    versions: dict[str, list[str]] = defaultdict(list)
    for release in releases:
        for name in per_release[release]:
            versions[name].append(release)
    moved_from = _moves(per_release, releases, versions)
    moved_to: dict[str, list[str]] = defaultdict(list)
    for name, sources in moved_from.items():
        for source in sources:
            moved_to[source].append(name)
    names: dict[str, NameHistory] = {}
    for name, present in sorted(versions.items()):
        facts = [per_release[r][name] for r in present]
        latest = facts[-1]
        deprecated = [(r, f["deprecated"]) for r, f in zip(present, facts, strict=True) if f.get("deprecated")]
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
            deprecated_since=deprecated[0][0] if deprecated else None,
            deprecation=deprecated[-1][1][0] if deprecated else None,
            replacement=deprecated[-1][1][1] if deprecated else None,
            removed_in=releases[last + 1] if last + 1 < len(releases) else None,
            moved_from=moved_from.get(name, []),
            moved_to=sorted(moved_to.get(name, [])),
            signature_changes=changes,
            origin=latest.get("origin", ""),
        )
    return ApiHistory(releases=releases, pinned=pinned if pinned in releases else releases[-1], names=names)


# --- versions.md --------------------------------------------------------------------------------------------

_HEADINGS = [("added", "Added"), ("deprecated", "Deprecated"), ("removed", "Removed"), ("moved", "Moved"),
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
        lines += ["", f"## torch {newer} (against {older})"]
        lines += _section(changes)
    lines += ["", f"## torch {releases[0]}", "", "The oldest release read: every name in it is where the timeline "
              "starts."]
    return "\n".join(lines) + "\n"


def timeline(root: Path, pinned: str) -> ApiHistory:
    """The timeline of the committed cache's releases (upstream/torch-api/) only."""
    return build_history(load_release_facts(root), pinned)


def history_files(history: ApiHistory) -> dict[str, str]:
    """{references/ file name: text} of the timeline."""
    return {HISTORY_FILE: dump_history(history), VERSIONS_FILE: render_versions(history)}


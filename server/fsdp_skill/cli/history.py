"""`fsdp-skill history NAME` and `fsdp-skill what-changed FROM [TO]`: the API timeline for people (text) or
scripts (--json), the same answers the api_history and what_changed tools give."""

from __future__ import annotations

import argparse

from fsdp_skill.core.paths import references_dir, repo_root
from fsdp_skill.serve.history import ApiHistoryResult, HistoryBook, WhatChangedResult


def _book() -> HistoryBook:
    """The timeline alone: a qualified name and what-changed need no search index (a missing or corrupt one is
    not built for them)."""
    return HistoryBook(references_dir(repo_root()))


def _resolve(symbol: str) -> tuple[str, list[str]]:
    """get_api's reading of a short name (`DDP`): opens the search index, only when a name needs it."""
    from fsdp_skill.search.index import open_index
    from fsdp_skill.serve.tools import Toolbox

    return Toolbox(open_index()).resolve_symbol(symbol)


def render_history(entry: ApiHistoryResult) -> str:
    lines = [f"{entry.name} ({entry.kind})", f"  {entry.since}",
             f"  releases: {', '.join(entry.versions)} (read: {entry.releases_read[0]} … {entry.releases_read[-1]})"]
    for span in entry.deprecations:
        until = f", until {span.until}" if span.until else ""
        lines.append(f"  deprecated since {span.since}{until}: {span.message}")
        if span.replacement:
            lines.append(f"  replacement: {span.replacement}" + (f" ({span.note})" if span.note else ""))
    if entry.removed_in:
        lines.append(f"  removed in {entry.removed_in}")
    if entry.moved_from:
        lines.append(f"  moved from: {', '.join(entry.moved_from)}")
    if entry.moved_to:
        lines.append(f"  moved to: {', '.join(entry.moved_to)}")
    for change in entry.signature_changes:
        parts = [f"{label} {', '.join(params)}" for label, params in (
            ("added", change.added), ("removed", change.removed), ("default changed:", change.defaults_changed),
            ("kind changed:", change.kinds_changed)) if params]
        lines.append(f"  {change.version}: {'; '.join(parts)}")
    if entry.aliases:  # the same object under other names (re-exports), not other APIs
        lines.append(f"  aliases: {', '.join(entry.aliases)}")
    return "\n".join(lines)


def render_changes(changes: WhatChangedResult) -> str:
    where = f" ({changes.area})" if changes.area else ""
    lines = [f"torch {changes.from_version} -> {changes.to_version}{where}"]
    for key, title in (("added", "added"), ("deprecated", "deprecated"), ("undeprecated", "no longer deprecated"),
                       ("removed", "removed"), ("moved", "moved"),
                       ("signature_changed", "signature changed")):
        items = getattr(changes, key)
        if not items:
            continue
        lines.append(f"{title} ({len(items)}):")
        for item in items:
            also = f" (also {', '.join(item.aliases)})" if item.aliases else ""
            detail = f": {item.detail}" if item.detail else ""
            lines.append(f"  [{item.area}] {item.name}{also} in {item.version}{detail}")
    lines += [f"note: {note}" for note in changes.notes]
    if len(lines) == 1:
        lines.append("no change in the scope")
    return "\n".join(lines)


def cli_history(args: argparse.Namespace) -> int:
    entry = _book().api_history(args.name, _resolve)
    print(entry.model_dump_json(indent=2) if args.json else render_history(entry))
    return 0


def cli_what_changed(args: argparse.Namespace) -> int:
    changes = _book().what_changed(args.from_version, args.to_version, args.area)
    print(changes.model_dump_json(indent=2) if args.json else render_changes(changes))
    return 0

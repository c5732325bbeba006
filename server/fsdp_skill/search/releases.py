"""Releases as search documents, and each API entry's history line, from the API timeline.

The timeline (references/api-history.json, written by `regenerate`) says in which torch releases each name of
the scope exists, when it was deprecated, removed, moved or re-signed. Before issue 31 none of it was
searchable: "what did torch 2.14 add to torch.distributed" found Pitfall 14 (the number matched). Now:

- one document per release read (kind `release`, id `versions.md#torch-2141-against-2130`, the anchor of its
  section in references/versions.md, so `read_reference('versions.md', section=...)` opens it): what that
  release added, deprecated, un-deprecated, removed, moved and re-signed against the one before, the same
  lists as versions.md and the `what_changed` tool;
- a "History:" line on every API entry the timeline knows (`since_line`: since which release, deprecated
  since when and for what, removed in, moved from), so "is X deprecated", "since which torch can I import X"
  and "what replaced X" meet the entry that names X.

A release document holds hundreds of API names, so for a question that is not about releases it is noise
(a question about `fully_shard` would find the release that added a method of it): it ranks at
RELEASE_PRIOR unless the query asks about releases (release_words.asks_release): names a release ("2.14",
"torch 2.5.1") or asks since / until / deprecated / removed / replaced / which version.
"""

from __future__ import annotations

import re
from pathlib import Path

from fsdp_skill.core.api_history import (
    CHANGE_KINDS,
    VERSIONS_FILE,
    ApiHistory,
    Change,
    load_history,
    release_heading,
    release_key,
    since_line,
    what_changed,
)
from fsdp_skill.core.errors import UserError
from fsdp_skill.search.documents import Document
from fsdp_skill.search.release_words import HISTORY_LEAD, RELEASE_KIND, RELEASE_PRIOR, release_term
from fsdp_skill.search.snippets import Block

# Names listed per kind of change in a release document; the rest are counted ("and 61 more"): the body
# stays a few thousand characters, and what_changed / versions.md have the full lists.
MAX_NAMES = 30
_CHANGE_WORDS = {
    "added": "Added",
    "deprecated": "Deprecated",
    "undeprecated": "No longer deprecated",
    "removed": "Removed",
    "moved": "Moved",
    "signature_changed": "Signature changed",
}


def heading_anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def load_timeline(path: Path) -> ApiHistory | None:
    """The timeline at `path`, or None when there is none (a catalog built without the release sources)."""
    if not path.is_file():
        return None
    try:
        return load_history(path)
    except UserError:
        return None


def history_lines(history: ApiHistory | None) -> dict[str, str]:
    """qualified name → its "History: …" line, for every name of the timeline with a history to tell: a name in
    every release read, never re-signed or deprecated, has none (the same line on hundreds of entries would
    only lengthen them)."""
    if history is None:
        return {}
    lines = {}
    for name, entry in history.names.items():
        line = since_line(entry, history)
        if entry.versions != history.releases or ";" in line:
            lines[name] = f"{HISTORY_LEAD}{line}."
    return lines


def release_documents(history: ApiHistory | None) -> list[Document]:
    """One document per release of the timeline, newest first (versions.md's order)."""
    if history is None:
        return []
    releases = sorted(history.releases, key=release_key)
    docs = [_release_document(history, newer, older) for older, newer in zip(releases, releases[1:])]
    docs.reverse()
    docs.append(_oldest_document(releases[0]))
    return docs


def _names(changes: list[Change], kind: str) -> str:
    shown = []
    for change in changes[:MAX_NAMES]:
        detail = f" ({change.detail})" if change.detail and kind != "added" else ""
        shown.append(f"`{change.name}`{detail}")
    more = f", and {len(changes) - MAX_NAMES} more" if len(changes) > MAX_NAMES else ""
    return ", ".join(shown) + more


def _release_document(history: ApiHistory, release: str, previous: str) -> Document:
    changes = what_changed(history, previous, release)
    heading = release_heading(release, previous)
    anchor = heading_anchor(heading)
    minor = ".".join(release.split(".")[:2])
    counts = [(kind, getattr(changes, kind)) for kind in CHANGE_KINDS]
    summary = ", ".join(f"{len(items)} {_CHANGE_WORDS[kind].lower()}" for kind, items in counts if items) or \
        "no change in the scope"
    blocks: list[Block] = [(
        "text",
        f"What torch {release} (PyTorch {minor}) changed in torch.distributed and torch.utils.checkpoint against "
        f"{previous}: {summary}. The full list: what_changed(from_version='{previous}', to_version='{release}'), "
        f"or read_reference('{VERSIONS_FILE}', section='{anchor}'); one name's history: api_history(name).",
    )]
    blocks += [("text", f"{_CHANGE_WORDS[kind]} in {release} ({len(items)}): {_names(items, kind)}.")
               for kind, items in counts if items]
    words = " ".join(["what changed new", *(_CHANGE_WORDS[kind].lower() for kind, items in counts if items)])
    return _document(release, previous, f"what changed in torch.distributed (against {previous})", blocks, words,
                     {kind: len(items) for kind, items in counts})


def _document(release: str, previous: str | None, title: str, blocks: list[Block], words: str,
              counts: dict[str, int]) -> Document:
    """A release document: its anchor in versions.md, and the release's spellings as keys (release_term)."""
    anchor = heading_anchor(release_heading(release, previous))
    minor = ".".join(release.split(".")[:2])
    return Document(
        kind=RELEASE_KIND,
        id=f"{VERSIONS_FILE}#{anchor}",
        title=f"torch {release}: {title}",
        symbol=None,
        reference=VERSIONS_FILE,
        anchor=anchor,
        url=None,
        blocks=blocks,
        keys=f"torch {minor} {release} pytorch release version {words} {release_term(release)}",
        body="\n\n".join(text for _, text in blocks),
        payload={"release": release, "against": previous, "counts": counts},
        prior=RELEASE_PRIOR,
    )


def _oldest_document(release: str) -> Document:
    minor = ".".join(release.split(".")[:2])
    text = (f"torch {release} (PyTorch {minor}) is the oldest release the API timeline reads: a name that exists "
            f"in it is listed \"since {minor}\" or \"in every release read\", whatever release added it before. "
            "api_history(name) gives one name's releases.")
    return _document(release, None, "the oldest release read", [("text", text)], "oldest", {})


def versions_anchors(text: str) -> list[tuple[str, str, str, int, int, str]]:
    """(reference, anchor, title, level, line, markdown) of each heading of versions.md below its title, for
    the index's anchors table: read_reference('versions.md', section=...) opens a release document's section."""
    lines = text.splitlines()
    heads = [(i, len(m.group(1)), m.group(2).strip()) for i, line in enumerate(lines)
             if (m := re.match(r"^(#{2,3}) (.+)$", line))]
    rows = []
    for n, (i, level, title) in enumerate(heads):
        end = next((j for j, lv, _ in heads[n + 1:] if lv <= level), len(lines))
        rows.append((VERSIONS_FILE, heading_anchor(title), title, level, i + 1, "\n".join(lines[i:end]).rstrip()))
    return rows

"""The API timeline's tools: `api_history(symbol)` and `what_changed(from_version, to_version)`, plus the
"since" line of get_api. Pure functions over references/api-history.json (core.api_history); the
Toolbox resolves names (as get_api does) and the server wires the tools. No torch: the releases were read
at regenerate time."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field

from fsdp_skill.core.api_history import (
    AREAS,
    CHANGE_KINDS,
    HISTORY_FILE,
    OTHER_AREA,
    ApiHistory,
    Changes,
    NameHistory,
    load_history,
    normalize_release,
    short_name_matches,
    since_line,
    what_changed,
)
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.limits import capped_name
from fsdp_skill.core.quoting import quote
from fsdp_skill.search.identifiers import resolve_prefix

__all__ = ["AREA_NAMES", "MAX_CHANGES", "ApiHistoryResult", "HistoryArea", "HistoryBook", "WhatChangedResult"]

AREA_NAMES = [area for area, _ in AREAS] + [OTHER_AREA]
HistoryArea = Literal["fsdp", "checkpoint", "tensor", "device_mesh", "pipelining", "collectives", "other"]
MAX_CANDIDATES = 8
MAX_CHANGES = 50  # per kind of change; the notes say how many more and how to narrow


class ApiHistoryResult(NameHistory):
    since: str = Field(description="The timeline in one line, as get_api shows it.")
    releases_read: list[str] = Field(description="Every release the timeline holds, oldest first.")
    pinned: str = Field(description="The torch release whose behaviour the skill's checks verify.")


class WhatChangedResult(Changes):
    releases_read: list[str]
    area: str | None = None


def _did_you_mean(history: ApiHistory, asked: str) -> str:
    """'; did you mean: a, b, c?' from the names ending like the one asked (its last two parts, then its
    last) and the closest spellings; '' when nothing is near."""
    wanted = resolve_prefix(asked)
    parts = wanted.split(".")
    found: list[str] = []
    for suffix in dict.fromkeys([".".join(parts[-2:]), parts[-1]]):
        found += short_name_matches(history, suffix)
    found += difflib.get_close_matches(wanted, list(history.names), n=4, cutoff=0.8)
    # what the pinned torch has and public names first (the removed private spellings last), then the closest
    ranked = sorted(dict.fromkeys(found), key=lambda n: (
        not history.names[n].exists_in(history.pinned), "._" in n,
        -difflib.SequenceMatcher(None, wanted, n).ratio(), n))
    shown = ranked[:MAX_CANDIDATES]
    return f"; did you mean: {', '.join(shown)}?" if shown else ""


class HistoryError(UserError):
    """A name or release the timeline cannot answer for; the message says what to pass."""


# A resolver as get_api resolves names: (qualified name, other candidates), or UserError.
Resolver = Callable[[str], tuple[str, list[str]]]


class HistoryBook:
    def __init__(self, references_dir: Path) -> None:
        self.path = references_dir / HISTORY_FILE

    def history(self) -> ApiHistory:
        return load_history(self.path)

    def lookup(self, symbol: str, resolve: Resolver | None = None) -> NameHistory:
        """The timeline entry of exactly the name asked: a qualified name, a `dist.`-style spelling, what
        get_api resolves a short name to, or a short name (`FSDPModule.unshard`) whose matches are all one
        object. Anything else is a HistoryError with candidates, never another object's history
        (`torch.distributed.Work.wait` once answered for `_symmetric_memory.Work.wait`)."""
        cleaned = capped_name("symbol", symbol, "fully_shard").strip().removesuffix("()").strip("`").strip()
        history = self.history()
        if not cleaned:
            raise HistoryError("symbol is empty: pass an API name such as 'fully_shard' or 'dist.all_gather_single'")
        for spelling in (cleaned, resolve_prefix(cleaned), f"torch.{cleaned}"):
            if spelling in history.names:
                return history.names[spelling]
        qualified_asked = resolve_prefix(cleaned).startswith("torch.")
        if resolve is not None and not qualified_asked:
            try:
                qualified, _ = resolve(cleaned)
            except UserError:
                qualified = ""
            if qualified in history.names:
                return history.names[qualified]
            if qualified:  # `DDP` is DistributedDataParallel for get_api: not `_composable.replicate.DDP`
                raise HistoryError(f"{quote(symbol)} is {qualified} (as get_api reads it), which the timeline does "
                                   f"not hold: its scope is torch.distributed and torch.utils.checkpoint"
                                   f"{_did_you_mean(history, cleaned)}")
        if not qualified_asked:
            matches = short_name_matches(history, cleaned)
            if len({history.names[m].origin or m for m in matches}) == 1:
                return history.names[matches[0]]
            if matches:
                raise HistoryError(f"{quote(symbol)} names {len(matches)} different APIs in the timeline: pass the "
                                   f"qualified name of one{_did_you_mean(history, cleaned)}")
        raise HistoryError(
            f"{quote(symbol)} is in none of the torch releases read ({history.releases[0]} … "
            f"{history.releases[-1]}), whose scope is torch.distributed and torch.utils.checkpoint: check the "
            f"spelling, or search for it by description (search_docs, or `fsdp-skill search`)"
            f"{_did_you_mean(history, cleaned)}"
        )

    def api_history(self, symbol: str, resolve: Resolver | None = None) -> ApiHistoryResult:
        entry = self.lookup(symbol, resolve)
        history = self.history()
        return ApiHistoryResult(**entry.model_dump(), since=since_line(entry, history),
                                releases_read=history.releases, pinned=history.pinned)

    def since(self, qualified_name: str) -> str | None:
        """get_api's one line, or None when the name is outside the timeline (or there is none)."""
        try:
            history = self.history()
        except UserError:
            return None
        entry = history.names.get(qualified_name)
        return since_line(entry, history) if entry else None

    def what_changed(self, from_version: str, to_version: str | None = None,
                     area: str | None = None) -> WhatChangedResult:
        for argument, value in (("from_version", from_version), ("to_version", to_version or "")):
            capped_name(argument, value, "2.8")
        history = self.history()
        if area is not None and area not in AREA_NAMES:
            raise HistoryError(f"unknown area {quote(area)}: pass one of {', '.join(AREA_NAMES)}, or omit it")
        target = to_version or history.pinned
        if not from_version.strip():
            raise HistoryError(f"from_version is empty: pass the user's torch, e.g. '2.8' (the timeline holds "
                               f"{', '.join(history.releases)})")
        normalize_release(from_version, history.releases)  # the bad-input message names the releases
        changes = what_changed(history, from_version, target)
        result = WhatChangedResult(**changes.model_dump(), releases_read=history.releases, area=area)
        for kind in CHANGE_KINDS:
            items = [c for c in getattr(result, kind) if area is None or c.area == area]
            if len(items) > MAX_CHANGES:
                more = len(items) - MAX_CHANGES
                hint = "pass area='fsdp' (or another area) to see one area whole" if area is None else \
                    "narrow the range (from_version/to_version closer together)"
                result.notes.append(f"{kind}: {more} more not shown (most important areas first); {hint}")
                items = items[:MAX_CHANGES]
            setattr(result, kind, items)
        return result

"""What each MCP tool does, as plain methods over the index (the server only wires them up).

Bad input raises `ToolInputError` (a UserError) whose message names the problem and the way out:
the server turns it into an MCP ToolError for the model, the CLI prints it as one line.
"""

from __future__ import annotations

import difflib
import unicodedata
from pathlib import Path

from fsdp_skill.core.errors import UserError
from fsdp_skill.core.limits import capped_name
from fsdp_skill.core.paths import rebuild_hint, references_dir, repo_root
from fsdp_skill.core.quoting import QUOTE_LIMIT, clip, quote
from fsdp_skill.core.vocabulary import DOCUMENT_KINDS, NOT_VERIFIED, SKILL_PAGES, STATUS_FILTERS
from fsdp_skill.search import semantic
from fsdp_skill.search.index import DocsIndex
from fsdp_skill.search.query import QueryError, resolve_prefix
from fsdp_skill.search.ranking import search
from fsdp_skill.search.snippets import open_fence_at
from fsdp_skill.serve.api_list import ApiListError, api_lines, filter_module, render_page
from fsdp_skill.serve.history import ApiHistoryResult, HistoryBook, WhatChangedResult
from fsdp_skill.serve.page_code import PageCodeCatalog, is_page_code_id, section_code_summary
from fsdp_skill.serve.results import (
    ApiEntryResult,
    ApiListPage,
    DoctestStepResult,
    ExampleBrief,
    ExampleDetail,
    ExampleInfo,
    ExampleList,
    PatternDetail,
    PatternInfo,
    PatternList,
    ReferenceInfo,
    ReferenceList,
    ReferencePage,
    SearchResponse,
    SearchResult,
    VerificationStatus,
    VerifyResult,
)
from fsdp_skill.serve.runs import RunHandle, RunSlots, run_verification
from fsdp_skill.serve.verification import VerificationReport, summarize

__all__ = ["ToolInputError", "Toolbox"]

MAX_LIMIT = 50
MIN_PAGE, MAX_PAGE = 200, 50_000
MAX_WORLD_SIZE = 8
# list_examples pages: the full listing runs to thousands of tokens, more than a model needs at once.
EXAMPLE_PAGE, MAX_EXAMPLE_PAGE = 25, 200
MAX_VERIFY_TIMEOUT = 600.0


class ToolInputError(UserError):
    """Input a tool cannot serve; the message tells the caller what to pass instead."""




def _closest(word: str, candidates: list[str], n: int = 8) -> list[str]:
    if len(word) > QUOTE_LIMIT:  # no name is that long; and difflib's cost grows with the word's length
        return []
    lowered = {c.lower(): c for c in candidates}
    return [lowered[m] for m in difflib.get_close_matches(word.lower(), list(lowered), n=n, cutoff=0.5)]


# A suggestion must be this similar in name (difflib ratio) to be offered: 0.75 keeps typos and
# near-spellings (`all_reduce_tensor` -> `all_reduce`) and drops look-alikes that share only
# fragments (`transformer_auto_wrap_policy` -> `DefaultLoadPlanner.transform_tensor`).
CLOSE_NAME_CUTOFF = 0.75


def _similarity(a: str, b: str) -> float:
    """difflib's ratio of a and b when it can reach CLOSE_NAME_CUTOFF, else 0.0. The two cheap upper bounds
    (linear in the lengths) rule most names out first: `ratio()` itself grows with the product of the
    lengths, and an unknown 60-character dotted name cost ~0.2 s against every qualified name."""
    matcher = difflib.SequenceMatcher(None, a, b)
    if matcher.real_quick_ratio() < CLOSE_NAME_CUTOFF or matcher.quick_ratio() < CLOSE_NAME_CUTOFF:
        return 0.0
    return matcher.ratio()


def closest_api_names(query: str, qualified_names: list[str], n: int = 6) -> list[str]:
    """API names close in *name* to the query: its last dotted part against each name's last part, and
    a dotted query against the whole qualified name (or its tail of the same length); best first."""
    query = query.lower()
    last = query.rsplit(".", 1)[-1]
    depth = query.count(".") + 1
    scored: list[tuple[float, str]] = []
    for name in qualified_names:
        lowered = name.lower()
        score = _similarity(last, lowered.rsplit(".", 1)[-1])
        if depth > 1:
            tail = ".".join(lowered.split(".")[-depth:])
            score = max(score, _similarity(query, tail), _similarity(query, lowered))
        if score >= CLOSE_NAME_CUTOFF:
            scored.append((score, name))
    scored.sort(key=lambda item: (-item[0], item[1].count("."), item[1]))
    return [name for _, name in scored[:n]]


def lexical_note(query: str) -> str | None:
    """For a lexical-mode search: the words of the query in a script other than Latin were not matched (the
    index holds English text and API names), and how to enable the semantic side that would match them."""
    foreign = [word for word in query.split()
               if any(c.isalpha() and not unicodedata.name(c, "LATIN").startswith("LATIN") for c in word)]
    if not foreign:
        return None
    shown = " ".join(foreign)
    enable = ("unset FSDP_SKILL_SEMANTIC (the semantic side is switched off)" if semantic.disabled_by_environment()
              else semantic.ENABLE_HINT)
    return (f"lexical mode: {clip(shown, 60)!r} matched nothing (the lexical index holds English words and API "
            f"names); {enable}")


class Toolbox:
    def __init__(self, index: DocsIndex, root: Path | None = None, runs: RunSlots | None = None) -> None:
        self.index = index
        self.runs = runs or RunSlots()
        self.root = (root or repo_root()).resolve()
        self.references_dir = references_dir(self.root)
        self.report = VerificationReport(
            self.references_dir / "verification.json", self.references_dir / "verification-nccl.json"
        )
        self.page_code = PageCodeCatalog(self.references_dir / "catalog.json")
        self.history = HistoryBook(self.references_dir)

    # ------------------------------------------------------------------ search

    def search_docs(self, query: str, limit: int = 5, kind: str | None = None) -> SearchResponse:
        if not 1 <= limit <= MAX_LIMIT:
            raise ToolInputError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}: pass e.g. limit=5")
        if kind is not None and kind not in DOCUMENT_KINDS:
            raise ToolInputError(
                f"unknown kind {quote(kind)}: pass one of {', '.join(DOCUMENT_KINDS)}, or omit it to search all"
            )
        try:
            hits = search(self.index, query, limit=limit, kind=kind)
        except QueryError as exc:
            raise ToolInputError(str(exc)) from None
        rows = self.report.rows()
        results = [
            SearchResult(
                id=h.doc.id,
                kind=h.doc.kind,
                title=h.doc.title,
                symbol=h.doc.symbol,
                reference=h.doc.reference,
                anchor=h.doc.anchor,
                url=h.doc.url,
                snippet=h.snippet,
                score=round(h.score, 3),
                code=section_code_summary(rows, h.doc.reference, h.doc.anchor)
                if h.doc.kind == "section" and h.doc.reference and h.doc.anchor
                else None,
            )
            for h in hits
        ]
        mode = "semantic" if self.index.semantic_available else "lexical"
        return SearchResponse(query=query, torch_version=self.index.torch_version, mode=mode, results=results,
                              note=lexical_note(query) if mode == "lexical" else None)

    # ------------------------------------------------------------------ API entries

    def resolve_symbol(self, symbol: str) -> tuple[str, list[str]]:
        """(qualified name, other candidates) for a qualified name, short name or alias."""
        cleaned = capped_name("symbol", symbol, "fully_shard").strip().removesuffix("()").strip("`").strip()
        if not cleaned:
            raise ToolInputError("symbol is empty: pass an API name such as 'fully_shard' or 'dist.all_reduce'")
        for spelling in (cleaned, resolve_prefix(cleaned), f"torch.{cleaned}"):
            matches = self.index.resolve_name(spelling)
            if matches:
                best = matches[0][0]
                names = [q for rank, q in matches if rank == best]
                return names[0], names[1:]
        qualified = closest_api_names(cleaned, self.index.all_names())
        hint = f" Closest names: {', '.join(qualified)}." if qualified else ""
        raise ToolInputError(
            f"no API entry named {quote(symbol)} in the torch {self.index.torch_version} docs.{hint} "
            "Search for it by description (search_docs, or `fsdp-skill search`)."
        )

    def get_api(self, symbol: str) -> ApiEntryResult:
        qualified, others = self.resolve_symbol(symbol)
        entry = self.index.payload("api", qualified)
        if entry is None:  # an alias of a module with no entry of its own (e.g. DCP)
            raise ToolInputError(
                f"{quote(symbol)} means {qualified}, which has no API entry of its own: "
                f"call search_docs({qualified!r}) for its pages"
            )
        examples = [
            ExampleBrief(
                id=ex["id"],
                code=ex["code"],
                world_size=ex["world_size"],
                status=summarize(self.report.statuses(ex["id"])),
            )
            for ex in self.index.examples_of(qualified)
        ]
        fields = {k: entry[k] for k in ApiEntryResult.model_fields if k in entry and k != "examples"}
        return ApiEntryResult(**fields, examples=examples, torch_version=self.index.torch_version, other_matches=others,
                              since=self.history.since(qualified))

    # ------------------------------------------------------------------ the API timeline (serve/history.py)

    def api_history(self, symbol: str) -> ApiHistoryResult:
        return self.history.api_history(symbol, self.resolve_symbol)

    def what_changed(self, from_version: str, to_version: str | None = None,
                     area: str | None = None) -> WhatChangedResult:
        return self.history.what_changed(from_version, to_version, area)

    def list_api(self, module: str | None = None, start_index: int = 0) -> ApiListPage:
        if module:
            capped_name("module", module, "torch.distributed.checkpoint")
        lines = api_lines(self.index.payloads("api"))
        try:
            if module and module.strip():
                lines = filter_module(lines, module)
            text, end, next_start = render_page(lines, module, start_index)
        except ApiListError as exc:
            raise ToolInputError(str(exc)) from None
        return ApiListPage(
            module=module or None,
            start_index=start_index,
            end_index=end,
            total=len(lines),
            next_start_index=next_start,
            text=text,
            torch_version=self.index.torch_version,
        )

    # ------------------------------------------------------------------ references

    def reference_names(self) -> list[str]:
        names = {r["name"] for r in self.index.references()}
        if self.references_dir.is_dir():
            names.update(p.name for p in self.references_dir.glob("*.md") if p.is_file())
        return sorted(names)

    def list_references(self) -> ReferenceList:
        known = {r["name"]: r for r in self.index.references()}
        infos = []
        for name in self.reference_names():
            meta = known.get(name)
            if meta:
                infos.append(
                    ReferenceInfo(
                        name=name, title=meta["title"], description=meta["description"], tokens=meta["tokens"]
                    )
                )
            else:
                text = (self.references_dir / name).read_text(encoding="utf-8")
                title = next((ln.lstrip("# ").strip() for ln in text.splitlines() if ln.startswith("#")), name)
                infos.append(ReferenceInfo(name=name, title=title, description="", tokens=len(text) // 4))
        return ReferenceList(torch_version=self.index.torch_version, references=infos)

    def _reference_file(self, name: str) -> Path:
        capped_name("name", name, "fsdp2.md")
        valid = self.reference_names()
        listing = ", ".join(valid) or f"(none: {rebuild_hint(self.root)})"
        if "\0" in name or "/" in name or "\\" in name or name.startswith(".") or Path(name).is_absolute():
            raise ToolInputError(
                f"{quote(name)} is not a reference name: pass a bare file name from list_references, one of: {listing}"
            )
        candidate = name if name.endswith(".md") else f"{name}.md"
        if candidate not in valid:
            raise ToolInputError(f"unknown reference {quote(name)}: pass one of: {listing}")
        path = (self.references_dir / candidate).resolve()
        if not path.is_relative_to(self.references_dir.resolve()) or not path.is_file():
            raise ToolInputError(
                f"reference {candidate!r} is listed but its file is missing: {rebuild_hint(self.root)}"
            )
        return path

    def _skill_page(self, name: str) -> str:
        path = self.root / name
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            raise ToolInputError(f"{name} cannot be read from the skill folder: {rebuild_hint(self.root)}") from None

    def _skill_part(self, page: str, section: str) -> tuple[str, str]:
        """(anchor, markdown) of a part of a skill page (a pitfall, a tuning section), as the index stores it:
        pitfalls are list items, not headings, so the page's own headings cannot find them."""
        wanted = section.split("#", 1)[1] if section.startswith(page + "#") else section.lstrip("#")
        found = self.index.payload("skill", f"{page}#{wanted}")
        if found is None:
            anchors = [i.split("#", 1)[1] for i in self.index.ids("skill") if i.startswith(page + "#")]
            close = _closest(wanted, anchors, n=6)
            hint = f" Closest: {', '.join(close)}." if close else ""
            raise ToolInputError(f"no part {quote(section)} in {page}.{hint} Call read_reference({page!r}) "
                                 "without section to read the whole page.")
        return wanted, str(found.get("markdown", ""))

    def _section_text(self, reference: str, text: str, section: str) -> tuple[str, str]:
        """(anchor, markdown of that section and its subsections) from the reference file's text."""
        wanted = section.split("#", 1)[1] if section.startswith(reference + "#") else section.lstrip("#")
        anchors = self.index.anchors(reference)
        position = next((i for i, a in enumerate(anchors) if a["anchor"] == wanted), None)
        if position is None:
            position = next((i for i, a in enumerate(anchors) if a["title"].lower() == wanted.lower()), None)
        if position is None:
            close = _closest(wanted, [a["anchor"] for a in anchors], n=6)
            hint = f" Closest anchors: {', '.join(close)}." if close else ""
            raise ToolInputError(
                f"no section {quote(section)} in {reference}.{hint} Call read_reference({reference!r}) "
                "without section to read its table of contents."
            )
        here = anchors[position]
        following = [a for a in anchors[position + 1 :] if a["level"] <= here["level"]]
        lines = text.splitlines(keepends=True)
        if here["line"] is not None:
            end = following[0]["line"] - 1 if following and following[0]["line"] else len(lines)
            return here["anchor"], "".join(lines[here["line"] - 1 : end])
        # No line numbers in the catalog: join the stored markdown of the section and its subsections.
        stop = anchors.index(following[0]) if following else len(anchors)
        return here["anchor"], "\n\n".join(a["markdown"] for a in anchors[position:stop])

    def read_reference(
        self, name: str, section: str | None = None, start_index: int = 0, max_chars: int = 8000
    ) -> ReferencePage:
        if section:
            capped_name("section", section, "fsdp2.md#mixed-precision")
        if not MIN_PAGE <= max_chars <= MAX_PAGE:
            raise ToolInputError(f"max_chars must be between {MIN_PAGE} and {MAX_PAGE}, got {max_chars}")
        if start_index < 0:
            raise ToolInputError(f"start_index must be 0 or more, got {start_index}")
        anchor = None
        if name.removeprefix("./") in SKILL_PAGES:  # what a search result of kind skill points at
            shown, text = name.removeprefix("./"), self._skill_page(name.removeprefix("./"))
            if section:
                anchor, text = self._skill_part(shown, section)
        else:
            path = self._reference_file(name)
            shown, text = path.name, path.read_text(encoding="utf-8")
            if section:
                anchor, text = self._section_text(path.name, text, section)
        total = len(text)
        if start_index and start_index >= total:
            raise ToolInputError(f"start_index {start_index} is past the end ({total} characters): start below {total}")
        end = min(start_index + max_chars, total)
        if end < total:
            # End the page on a line break so lines (and fence markers) are never split.
            newline = text.rfind("\n", start_index + max_chars // 2, end)
            end = newline + 1 if newline >= 0 else end
        page = text[start_index:end]
        reopened = open_fence_at(text[:start_index]) if start_index else None
        if reopened:  # the previous page closed this block; reopen it so the code reads as code
            page = reopened + "\n" + page
        still_open = open_fence_at(text[:end])
        if still_open and end < total:
            page = page.rstrip("\n") + "\n" + _closing_fence(still_open) + "\n"
        section_arg = f", section={anchor!r}" if anchor else ""
        if end < total:
            footer = (
                f"\n[{shown}{'#' + anchor if anchor else ''}: characters {start_index}-{end} of {total}. "
                f"Next page: read_reference(name={shown!r}{section_arg}, start_index={end})]"
            )
        else:
            footer = f"\n[end of {shown}{'#' + anchor if anchor else ''}: {total} characters]"
        return ReferencePage(
            name=shown,
            section=anchor,
            start_index=start_index,
            end_index=end,
            total_chars=total,
            next_start_index=end if end < total else None,
            text=page.rstrip("\n") + "\n" + footer,
        )

    # ------------------------------------------------------------------ examples and patterns

    def list_examples(
        self, symbol: str | None = None, status: str | None = None, start_index: int = 0, limit: int = EXAMPLE_PAGE
    ) -> ExampleList:
        if not 1 <= limit <= MAX_EXAMPLE_PAGE:
            raise ToolInputError(
                f"limit must be between 1 and {MAX_EXAMPLE_PAGE}, got {limit}: pass e.g. limit={EXAMPLE_PAGE}"
            )
        if start_index < 0:
            raise ToolInputError(f"start_index must be 0 or more, got {start_index}")
        if status is not None and status not in STATUS_FILTERS:
            raise ToolInputError(f"unknown status {quote(status)}: pass one of {', '.join(STATUS_FILTERS)}, or omit it")
        if symbol:
            capped_name("symbol", symbol, "all_reduce")
        payloads = self.index.payloads("example")
        if symbol and symbol.strip():
            needle = resolve_prefix(symbol.strip()).lower()
            payloads = [p for p in payloads if needle in p["symbol"].lower()]
        rows = [(p, self.report.statuses(p["id"])) for p in payloads]
        if status is not None:
            rows = [(p, statuses) for p, statuses in rows if status in _status_words(statuses)]
        total = len(rows)
        if start_index and start_index >= total:
            raise ToolInputError(
                f"start_index {start_index} is past the end ({total} examples match): start below {total}"
            )
        page = rows[start_index : start_index + limit]
        end = start_index + len(page)
        infos = [
            ExampleInfo(id=p["id"], status="/".join(_status_words(statuses)), line=_example_line(p, statuses))
            for p, statuses in page
        ]
        filters = "".join(
            f", {name}={quote(value)}" for name, value in (("symbol", symbol), ("status", status)) if value
        )
        if end < total:
            note = (
                f"[examples {start_index + 1}-{end} of {total}. Next page: list_examples(start_index={end}{filters}). "
                "get_example(id) gives the code and verification details.]"
            )
        elif total:
            note = f"[examples {start_index + 1}-{end} of {total}: the last page. get_example(id) gives the code.]"
        else:
            note = "[no examples match: drop or change the filters]"
        return ExampleList(
            total=total,
            start_index=start_index,
            next_start_index=end if end < total else None,
            examples=infos,
            note=note,
        )

    def get_example(self, name: str) -> ExampleDetail:
        capped_name("name", name, "torch.distributed.all_reduce#1")
        example = self.index.payload("example", name.strip())
        if example is None and is_page_code_id(name.strip()):
            return self._page_code_example(name.strip())
        if example is None:
            close = _closest(name, self.index.ids("example"), n=6)
            hint = f" Closest ids: {', '.join(close)}." if close else ""
            raise ToolInputError(
                f"no example {quote(name)}.{hint} Ids look like 'torch.distributed.all_reduce#1'; "
                "list_examples(symbol=...) lists them."
            )
        symbol_entry = self.index.payload("api", example["symbol"]) or {}
        statuses = self.report.statuses(example["id"])
        return ExampleDetail(
            id=example["id"],
            symbol=example["symbol"],
            reference=example["reference"],
            anchor=example["anchor"],
            url=symbol_entry.get("url"),
            code=example["code"],
            steps=[
                DoctestStepResult(
                    source=s["source"],
                    expected=s.get("expected"),
                    expected_by_rank={int(k): v for k, v in (s.get("expected_by_rank") or {}).items()},
                )
                for s in _fold_comment_steps(example["steps"])
            ],
            world_size=example["world_size"],
            device=example["device"],
            requires=example["requires"],
            skip=example.get("skip"),
            status=summarize(statuses),
            verification=statuses,
            torch_version=self.index.torch_version,
        )

    def _page_code_example(self, name: str) -> ExampleDetail:
        block = self.page_code.get(name)
        if block is None:
            close = _closest(name, self.page_code.ids(), n=6)
            hint = f" Closest ids: {', '.join(close)}." if close else ""
            raise ToolInputError(f"no code block {name[:200]!r}.{hint} Page-code ids look like "
                                 "'getting-started.md#point-to-point-communication:1' (file#anchor:position).")
        statuses = self.report.statuses(name)
        return ExampleDetail(
            id=name, symbol=block.get("section") or "", reference=block["reference"], anchor=block["anchor"],
            url=None, code=block["code"], steps=[],
            world_size=statuses[0].world_size if statuses else 1, device="cpu", requires=[], skip=None,
            status=summarize(statuses), verification=statuses, torch_version=self.index.torch_version,
            kind=block.get("kind"), language=block.get("language"), origin=block.get("origin"),
        )

    def list_patterns(self) -> PatternList:
        return PatternList(patterns=[PatternInfo(**p) for p in self.index.payloads("pattern")])

    def _pattern(self, name: str) -> dict | None:
        """The pattern named `name`, or whose file is `name` (SKILL.md links the files): 'fsdp2-training',
        'fsdp2_training', 'fsdp2_training.py' and 'assets/patterns/fsdp2_training.py' are one pattern."""
        wanted = _pattern_key(name)
        for pattern in self.index.payloads("pattern"):
            if wanted in (_pattern_key(pattern["name"]), _pattern_key(Path(pattern["file"]).stem)):
                return pattern
        return None

    def get_pattern(self, name: str) -> PatternDetail:
        capped_name("name", name, "fsdp2-training")
        pattern = self._pattern(name)
        if pattern is None:
            names = sorted(self.index.ids("pattern"))
            listing = ", ".join(names) if names else "(none yet)"
            raise ToolInputError(
                f"no pattern {quote(name)}: pass one of: {listing} (a file name such as fsdp2_training.py works too)"
            )
        path = (self.root / pattern["file"]).resolve()
        if not path.is_relative_to(self.root) or not path.is_file():
            raise ToolInputError(
                f"pattern {quote(name)} is in the catalog but {pattern['file']} is missing from this checkout"
            )
        # The runner names pattern rows `pattern:<name>` (fsdp_skill.verify.catalog_patterns.PATTERN_PREFIX).
        statuses = self.report.statuses("pattern:" + pattern["name"])
        return PatternDetail(
            **pattern, source=path.read_text(encoding="utf-8"), status=summarize(statuses), verification=statuses
        )

    # ------------------------------------------------------------------ running (serve --allow-run only)

    def verify_example(
        self, name: str, backend: str = "gloo", world_size: int | None = None, timeout: float = 120.0,
        handle: RunHandle | None = None,
    ) -> VerifyResult:
        capped_name("name", name, "torch.distributed.all_reduce#1")
        example = self.index.payload("example", name.strip())
        if example is None:
            detail = self.get_example(name)  # raises with the closest ids, unless it is a page's code block
            # Page code runs at the page's own world size (its launcher decides); world_size is not applied to it.
            example = {"id": detail.id, "world_size": detail.world_size}
        if backend not in ("gloo", "nccl"):
            raise ToolInputError(f"backend must be 'gloo' or 'nccl', got {quote(backend)}")
        size = world_size if world_size is not None else example["world_size"]
        if not 1 <= size <= MAX_WORLD_SIZE:
            raise ToolInputError(f"world_size must be between 1 and {MAX_WORLD_SIZE}, got {size}")
        if not 1 <= timeout <= MAX_VERIFY_TIMEOUT:
            raise ToolInputError(f"timeout must be between 1 and {MAX_VERIFY_TIMEOUT:.0f} seconds, got {timeout}")
        with self.runs.claim(size):
            results, tail = run_verification(example["id"], backend, size, timeout, self.root, handle)
        return VerifyResult(name=example["id"], backend=backend, world_size=size, results=results, log_tail=tail)


def _status_words(statuses: list[VerificationStatus]) -> list[str]:
    """The distinct statuses of an example's runs, in report order; ['not verified'] when it has none."""
    return list(dict.fromkeys(s.status for s in statuses)) or [NOT_VERIFIED]


def _example_line(example: dict, statuses: list[VerificationStatus]) -> str:
    """One line: '2 ranks, cpu' (+ 'needs cuda') (+ why it did not pass, shortened). An example that
    passed somewhere does not 'need' what it was written for: it says where it passed instead."""
    ranks = example["world_size"]
    plural = "s" if ranks != 1 else ""
    passed_on = list(dict.fromkeys(s.backend for s in statuses if s.status == "passed"))
    wants = [r for r in example.get("requires") or [] if r != example["device"]]
    if passed_on and (example["device"] != "cpu" or wants):
        written_for = ", ".join([example["device"], *wants])
        return f"{ranks} rank{plural}, written for {written_for}: passed on {' and '.join(passed_on)}"
    line = f"{ranks} rank{plural}, {example['device']}"
    if example.get("requires"):
        line += f", needs {', '.join(example['requires'])}"
    reason = next((s.reason for s in statuses if s.status != "passed" and s.reason), None)
    if reason:
        line += ": " + clip(reason, 90)
    return line


def _pattern_key(name: str) -> str:
    """A pattern name or file path reduced to what tells patterns apart: 'assets/patterns/Fsdp2_Training.py' ->
    'fsdp2-training'."""
    stem = name.strip().replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")
    return stem.lower().replace("_", "-")


def _fold_comment_steps(steps: list[dict]) -> list[dict]:
    """Steps whose source is only comments (a doctest `>>> # ...` line) joined to the step they introduce."""
    folded: list[dict] = []
    pending = ""
    for step in steps:
        lines = step["source"].splitlines()
        only_comments = all(ln.lstrip().startswith("#") or not ln.strip() for ln in lines)
        if only_comments and not step.get("expected") and not step.get("expected_by_rank"):
            pending += step["source"].rstrip("\n") + "\n"
            continue
        folded.append({**step, "source": pending + step["source"]} if pending else step)
        pending = ""
    if pending:  # comments after the last statement: keep them on it
        if folded:
            folded[-1] = {**folded[-1], "source": folded[-1]["source"].rstrip("\n") + "\n" + pending}
        else:
            folded.append({"source": pending})
    return folded


def _closing_fence(opening: str) -> str:
    stripped = opening.lstrip()
    char = stripped[0]
    return char * (len(stripped) - len(stripped.lstrip(char)))

"""Ranking: weighted bm25 candidates from FTS5, then boosts for API names the query mentions.

1. `parse_query` turns the text into quoted, OR-ed terms (identifier parts and aliases included).
2. FTS5 returns the best `POOL` documents by bm25 with column weights (title and names above body).
3. Each candidate's score is multiplied by a kind prior; by a symbol boost when the query names its
   API (`all_reduce`, `dist.all_reduce`, `MixedPrecisionPolicy`, prose like "distribute a tensor",
   or an abbreviation that is the whole query, "FSDP2"), scaled down when the name is only context
   in a longer question; a smaller boost for members of a named class; and a scope lift when an
   abbreviation names the document's topic ("… in FSDP2" → fsdp2.md, FSDPModule, …). Multiplying
   keeps every boost independent of bm25's query-dependent scale.
4. At most one example per symbol and two members per class survive (five copies of one thing help
   nobody), and each result gets a snippet of whole blocks around the query words.

The constants below were set on tests/eval/queries.jsonl and checked on tests/eval/heldout.jsonl,
which was written after tuning and never tuned on (`fsdp-skill bench search` prints both).
"""

from __future__ import annotations

from dataclasses import dataclass

from .index import DocRow, DocsIndex
from .query import SCOPES, ParsedQuery, identifier_parts, is_identifier, parse_query
from .snippets import make_snippet

KINDS = ("section", "api", "example", "pattern")
POOL = 60
# Examples are bare code: useful when asked for, noise otherwise.
KIND_PRIOR = {"section": 1.0, "api": 1.0, "example": 0.55, "pattern": 1.0}
# How much a named symbol lifts each kind of document about that symbol.
SYMBOL_BOOST = {"api": 1.0, "example": 0.6, "section": 0.0, "pattern": 0.0}
MAX_EXAMPLES_PER_SYMBOL = 1
MAX_MEMBERS_PER_CLASS = 2
# Strength of an abbreviation's entry when the abbreviation is the query ("FSDP2", "DCP").
ALIAS_STRENGTH = 2.0
# Lift for documents in the topic an abbreviation names (FSDP2 → fsdp2.md and FSDPModule …).
SCOPE_BOOST = 1.2
# Fraction of a class's symbol strength its members get.
MEMBER_SHARE = 0.5


@dataclass(frozen=True)
class Hit:
    doc: DocRow
    score: float
    snippet: str


def named_symbols(index: DocsIndex, parsed: ParsedQuery) -> dict[str, float]:
    """Qualified names the query mentions, with a strength (1.0 = a deliberate, exact mention).

    Code-like words (`all_reduce`, `dist.barrier`, `DeviceMesh`) are deliberate: full strength for an
    exact or alias match, a little less for a short name. Plain words that happen to be API names
    (`broadcast`, `Shard`) only count when typed exactly as the API spells them, and weakly: "reduce
    memory" is not a question about `dist.reduce`.
    """
    strengths: dict[str, float] = {}

    def lift(qualified: str, strength: float) -> None:
        strengths[qualified] = max(strengths.get(qualified, 0.0), strength)

    for glued in parsed.glued:
        # Prose that spells an API name ("distribute a tensor"): matched only through the glued
        # spelling of a multi-part name, so ordinary word pairs never qualify.
        for rank, qualified in index.resolve_name(glued)[:1]:
            if rank >= 2 and len(identifier_parts(qualified.rsplit(".", 1)[-1])) > 1:
                lift(qualified, 0.6)
    for word in parsed.symbol_words:
        matches = index.resolve_name(word)
        if not matches:
            continue
        best_rank = matches[0][0]
        for position, (rank, qualified) in enumerate(matches):
            if rank != best_rank:
                break
            # An ambiguous short name lifts its most public spelling most.
            ambiguity = 1.0 if position == 0 else 0.5
            if is_identifier(word) or rank == 3:
                lift(qualified, (1.0 if rank <= 1 else 0.8) * ambiguity)
            elif qualified.rsplit(".", 1)[-1] == word:
                lift(qualified, 0.3 * ambiguity)
    # A name that is most of the query ("fully_shard", "what does all_reduce return") is what the user
    # wants; the same name in a longer question ("bf16 compute with fully_shard") is context.
    focus = 1.0 if parsed.content_words <= 2 else max(0.3, 2.0 / parsed.content_words)
    strengths = {name: strength * focus for name, strength in strengths.items()}
    if parsed.content_words <= 2:  # "FSDP2", "DCP save": the abbreviation is the subject
        for qualified in parsed.alias_symbols:
            if index.resolve_name(qualified):
                # The entry never spells the abbreviation, so its text match is weak: lift it harder.
                lift(qualified, ALIAS_STRENGTH)
    return strengths


def is_class_name(qualified: str) -> bool:
    """CapWords last component (PEP 8): DeviceMesh, FSDPModule; not modules such as checkpoint.staging."""
    return qualified.rsplit(".", 1)[-1][:1].isupper()


def in_scope(scopes: list[str], reference: str | None, symbol: str | None) -> bool:
    for name in scopes:
        references, prefixes = SCOPES[name]
        if reference in references or (symbol and symbol.startswith(prefixes)):
            return True
    return False


def search(index: DocsIndex, text: str, limit: int = 5, kind: str | None = None) -> list[Hit]:
    """The `limit` best documents for a query (raises QueryError for an unusable query)."""
    parsed = parse_query(text)
    match = parsed.match_expression()
    pool = dict(index.candidates(match, kind, POOL))
    symbols = named_symbols(index, parsed)
    # A named class lifts its members a little: a question naming DTensor is often about a DTensor method.
    members = {name: strength * MEMBER_SHARE for name, strength in symbols.items() if is_class_name(name)}
    missing = [rowid for rowid in index.rowids_with_symbol(list(symbols), kind) if rowid not in pool]
    pool.update(index.scores_for(match, missing))
    keys = index.doc_keys(list(pool))

    ranked: list[tuple[float, int]] = []
    for rowid, base in pool.items():
        doc_kind, symbol, reference = keys[rowid]
        score = base * KIND_PRIOR[doc_kind]
        strength = symbols.get(symbol or "", 0.0)
        if not strength and symbol and "." in symbol:
            strength = members.get(symbol.rsplit(".", 1)[0], 0.0)
        if strength:
            score *= 1.0 + strength * SYMBOL_BOOST[doc_kind]
        if parsed.scopes and in_scope(parsed.scopes, reference, symbol):
            score *= SCOPE_BOOST
        ranked.append((score, rowid))
    ranked.sort(key=lambda item: (-item[0], item[1]))

    chosen: list[tuple[float, int]] = []
    examples_seen: dict[str, int] = {}
    members_seen: dict[str, int] = {}
    api_symbols = {symbol for kind_, symbol, _ in keys.values() if kind_ == "api"}
    for score, rowid in ranked:
        doc_kind, symbol, _ = keys[rowid]
        if doc_kind == "example":
            seen = examples_seen.get(symbol or "", 0)
            if seen >= MAX_EXAMPLES_PER_SYMBOL:
                continue
            examples_seen[symbol or ""] = seen + 1
        elif doc_kind == "api" and symbol and symbol.rsplit(".", 1)[0] in api_symbols and is_class_name(symbol.rsplit(".", 1)[0]):
            parent = symbol.rsplit(".", 1)[0]
            seen = members_seen.get(parent, 0)
            if seen >= MAX_MEMBERS_PER_CLASS:
                continue  # five methods of one class crowd out everything else
            members_seen[parent] = seen + 1
        chosen.append((score, rowid))
        if len(chosen) == limit:
            break

    docs = index.docs([rowid for _, rowid in chosen])
    words = list(dict.fromkeys([*parsed.highlight, *(t for t in parsed.terms if len(t) >= 3)]))
    return [Hit(doc=docs[rowid], score=score, snippet=make_snippet(docs[rowid].blocks, words)) for score, rowid in chosen]

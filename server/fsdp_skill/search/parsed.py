"""`ParsedQuery`: everything ranking needs to know about a query, filled in once by `query.parse_query`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# A token as the FTS tokenizer sees it (unicode61 with `_` a token character), Latin only: a query's terms and
# word pairs must stay quotable. The index build lists its floor words in the same alphabet (search/index.py).
TERM_TOKEN = re.compile(r"[a-z0-9_]+")


@dataclass
class ParsedQuery:
    """A user query reduced to what search needs; built by `parse_query` only."""

    text: str  # as typed
    normalized: str = ""  # NFKC form: what the rest was derived from (and what the dense side embeds)
    language: str = "latin"  # latin | mixed (Latin and another script) | other (no Latin letter)
    words: list[str] = field(default_factory=list)  # content words as typed (prefixes resolved)
    terms: list[str] = field(default_factory=list)  # lowercase FTS terms, deduplicated, in order
    symbol_words: list[str] = field(default_factory=list)  # words that may name an API entry
    alias_symbols: list[str] = field(default_factory=list)  # qualified names named by abbreviations
    highlight: list[str] = field(default_factory=list)  # lowercase strings to look for in snippets
    scopes: list[str] = field(default_factory=list)  # vocabulary scopes the query names
    content_words: int = 0  # words left after stop words (words of another script included): how specific
    # Words in a script other than Latin (query.foreign_words), less query.TRANSLATED_SHARE for each the
    # vocabulary translates: what only the embedding reads.
    other_words: float = 0
    glued: list[str] = field(default_factory=list)  # adjacent prose words joined: "distributetensor"
    # Lowercase words the user wrote as prose (no identifiers, no hyphenated compounds), with their
    # synonyms: what "the question spells an API name in words" is checked against.
    prose: list[str] = field(default_factory=list)
    # API names the query names → strength (1.0 = typed exactly); empty when parsed without a name table.
    symbols: dict[str, float] = field(default_factory=dict)
    # Neighbouring words of the query as typed (stop words dropped, lowercase [a-z0-9_] runs, the way the
    # FTS tokenizer splits): "split the world into groups" → (split, world), (world, groups).
    pairs: list[tuple[str, str]] = field(default_factory=list)
    # Every run of query.PHRASE_WORDS consecutive words as typed (stop words kept): a pasted error message
    # shares runs of words with the message torch raises, a question almost never does.
    phrases: list[tuple[str, ...]] = field(default_factory=list)
    # Qualified-name prefixes of the vocabulary's variant modules the query asks for ("a differentiable
    # all_reduce" → torch.distributed.nn.functional. …): their entries lose their lower prior.
    variant_prefixes: tuple[str, ...] = ()
    # The English words the vocabulary translates the query's foreign words to, in order ("как усреднить
    # лосс" → average, loss): the lexical side matches them, and the dense side reads them beside the question.
    glosses: list[str] = field(default_factory=list)
    # Whether the query asks about torch releases (names one, or since / deprecated / removed / replaced …):
    # the release documents then rank at their full prior (search/releases.py).
    asks_release: bool = False
    # The error lines of a pasted traceback or warning ("RuntimeError: Missing key in …": search/pasted.py);
    # empty for a question in words. With them, `normalized` is those lines and the prose around them.
    errors: list[str] = field(default_factory=list)

    @property
    def dense_text(self) -> str:
        """What the dense side embeds: the question, and after it in brackets the English of its foreign
        words the vocabulary knows. A small multilingual model places "усреднить лосс по процессам" far
        from the English docs; the glosses pull it toward them (multilingual dev, issue 21: semantic
        Recall@5 0.583 -> 0.639 and MRR 0.434 -> 0.519 with the 41 translations of then; English
        questions have no glosses and embed as typed)."""
        if not self.glosses:
            return self.normalized
        return f"{self.normalized} ({' '.join(gloss.replace('_', ' ') for gloss in self.glosses)})"

    @property
    def lexical_share(self) -> float:
        """The share of the query's content words the lexical side can read (Latin words and names): 1 for
        an English question, less for Russian or Japanese around API names, 0 with no Latin word."""
        if not self.content_words:
            return 1.0
        return 1.0 - self.other_words / self.content_words

    @property
    def lexical(self) -> bool:
        """Whether the lexical side has anything to match (a query in another script may not)."""
        return bool(self.terms)

    def match_expression(self, leave_out: frozenset[str] = frozenset()) -> str:
        """The FTS5 MATCH string: every term (but those in `leave_out`) quoted, OR-ed. Terms are [a-z0-9_] only."""
        return " OR ".join(f'"{term}"' for term in self.terms if term not in leave_out)

    def message_expression(self) -> str:
        """The FTS5 MATCH string of the query's runs of words, as phrases, in the messages column only."""
        return "messages : (" + " OR ".join('"' + " ".join(run) + '"' for run in self.phrases) + ")"

    def proximity_expression(self, distance: int) -> str:
        """The FTS5 MATCH string of the word pairs found near each other (at most `distance` tokens
        apart), OR-ed; empty when the query has fewer than two content words."""
        return " OR ".join(f'NEAR("{a}" "{b}", {distance})' for a, b in self.pairs)

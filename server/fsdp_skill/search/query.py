"""Query understanding, done once: the text → one `ParsedQuery` holding everything ranking needs.

`parse_query` NFKC-normalises the text (full-width `ｆｕｌｌｙ＿ｓｈａｒｄ` is `fully_shard`), notes its
script, and reduces it to quoted FTS5 terms (identifier parts, abbreviations and synonyms from
vocabulary.toml added), the API names it names (with a strength, matched against the index's name
table), the topics it scopes to, and the words snippets should highlight.

Why a bag of quoted terms: users ask in prose ("why does my allreduce hang with NCCL?"), so an AND of
their words would usually match nothing. We OR the content words and let bm25 reward documents that
contain more of them. Every term is a lowercase run of [a-z0-9_] wrapped in double quotes, so no FTS5
syntax typed by the user (quotes, `*`, `NOT`, `NEAR`, `(`, `:`) can reach the MATCH expression.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import pairwise

from fsdp_skill.core.errors import UserError
from fsdp_skill.search.identifiers import (  # noqa: F401 - re-exported: the index build imports them from here
    WORD,
    body_identifier_parts,
    identifier_parts,
    is_identifier,
    resolve_prefix,
)
from fsdp_skill.search.names import NameTable, named_symbols
from fsdp_skill.search.parsed import TERM_TOKEN, ParsedQuery
from fsdp_skill.search.pasted import take_apart
from fsdp_skill.search.release_words import asks_release, releases_named
from fsdp_skill.search.vocabulary import vocabulary

# A question is read whole up to MAX_QUERY_CHARS. A pasted traceback runs to a few thousand characters, so it
# may be up to MAX_PASTE_CHARS: what search reads of it is its error lines, then its prose, cut at
# MAX_QUERY_CHARS (every word read costs: 8,000 characters of Russian took 0.5 s to translate and rank).
MAX_QUERY_CHARS = 1000
MAX_PASTE_CHARS = 8000

# `all-gather`, `reduce-scatter`, `meta-device`: the hyphenated spelling of an identifier.
_HYPHENATED = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+\b")
# "ZeRO" is also the English "zero"; only the paper's capitalisation (ZeRO, ZeRO-3) is the alias.
_ZERO_STAGE = re.compile(r"\bZeRO(?:[- ]?(\d))?\b")
_LATIN = re.compile(r"[A-Za-z]")
# A candidate letter that is not A-Z: a word character that is no decimal digit, underscore or ASCII letter
# (numbers such as ² are word characters too: script_of keeps only the alphabetic ones).
_OTHER_LETTER = re.compile(r"[^\W\d_A-Za-z]")
# Words of another script, which the lexical side cannot read: a run of kanji, or of katakana (Japanese
# writes without spaces, so each run stands for a word; hiragana runs are mostly particles and verb
# endings, left out), or a word of a space-separated script (Cyrillic, Greek, Hangul, ...).
_KANJI, _KATAKANA = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff", r"\u30a0-\u30ff\u31f0-\u31ff"
_FOREIGN_WORD = re.compile(rf"[{_KANJI}]+|[{_KATAKANA}]+|[^\W\d_A-Za-z\u3040-\u30ff{_KANJI}\u31f0-\u31ff]{{2,}}")


class QueryError(UserError, ValueError):
    """The query cannot be searched; the message says how to fix it."""


def parse_query(text: str, names: NameTable | None = None) -> ParsedQuery:
    """Normalise, split, expand and quote a user query; with `names`, also find the API names it names.
    Raises QueryError for empty, oversized or punctuation-only input."""
    normalized = _validated(text)
    # A pasted traceback is read as its error lines and the prose around them (search/pasted.py): paths,
    # frames and prefixes are not words of the question.
    pasted = take_apart(normalized)
    if pasted is not None:
        normalized = pasted.text[:MAX_QUERY_CHARS]
    elif len(normalized) > MAX_QUERY_CHARS:
        raise QueryError(
            f"the query is {len(text)} characters; the limit is {MAX_QUERY_CHARS} for a question ({MAX_PASTE_CHARS} "
            "for a pasted traceback or warning, whose error lines are read): shorten it to the key words or API names"
        )
    parsed = ParsedQuery(text=text, normalized=normalized, language=script_of(normalized))
    parsed.errors = list(pasted.errors) if pasted else []
    terms = _TermBuilder(parsed)
    _expand_zero_stages(normalized, parsed, terms)
    rewritten = _rewrite_phrases(normalized)
    parsed.scopes.extend(scope for pattern, scope in vocabulary().phrase_scopes if pattern.search(normalized))
    words, content = _split_words(rewritten)
    # A query of nothing but common words ("how do I") is still searched, for what it is worth.
    foreign = foreign_words(normalized)
    # The vocabulary's translations give the lexical side terms to match; a translated word counts as
    # TRANSLATED_SHARE of a word the lexical side read (a gloss is a word, not the sentence around it).
    translated = _translate(foreign, terms)
    parsed.other_words = len(foreign) - TRANSLATED_SHARE * translated
    parsed.content_words = len(content or words) + len(foreign)
    plain = [w.lower() for w in content if not is_identifier(w)]
    parsed.glued = _glued(plain)
    parsed.prose = _prose_words(rewritten)
    for compound in _HYPHENATED.finditer(normalized):
        # "all-gather" is usually the operation in prose, not a pointer to the API: a term, no boost.
        terms.add_word(compound.group(0).replace("-", "_"), from_alias=True)
    _add_query_words(content or words, parsed, terms)
    # "2.14" names a release by one index term (torch_2_14), not by the digits every version string shares.
    for term in releases_named(normalized):
        terms.add_term(term)
    parsed.asks_release = asks_release(normalized)
    parsed.terms = terms.ordered()
    parsed.variant_prefixes = _variants_asked(parsed.words)
    parsed.pairs = _word_pairs(normalized)
    if pasted is not None:
        # The error lines are matched against torch's messages even when a question follows them.
        parsed.phrases = list(dict.fromkeys(run for message in pasted.messages for run in _word_runs(message)))
        parsed.phrases = parsed.phrases[:MAX_PHRASES]
    else:
        parsed.phrases = [] if is_question(normalized) else _word_runs(normalized)
    if not parsed.terms and parsed.language != "other":
        raise QueryError(
            f"the query {text[:80]!r} has no searchable words, only punctuation: add a topic word or an API name"
        )
    if names is not None:
        parsed.symbols = named_symbols(names, parsed)
    return parsed


def _variants_asked(words: list[str]) -> tuple[str, ...]:
    """The prefixes of the variant modules whose words the query uses, alone or inside a dotted name."""
    parts = {part for word in words for part in re.split(r"[._]+", word.lower()) if part}
    return tuple(prefix for variant in vocabulary().variants if parts & variant.words for prefix in variant.prefixes)


def script_of(text: str) -> str:
    """latin, mixed, or other: whether the query has Latin letters, and letters of another script."""
    latin = bool(_LATIN.search(text))
    other = any(found.group().isalpha() for found in _OTHER_LETTER.finditer(text))
    return "mixed" if latin and other else "latin" if latin or not other else "other"


# Measured on the multilingual dev set (tests/eval/multilingual_dev.jsonl, issue 21) with the glossary of 132
# translations, semantic Recall@5 / MRR: 0 (the lexical share counted only Latin words) 0.694 / 0.526,
# 0.25 0.722 / 0.561, 0.5 0.722 / 0.571, 0.75 0.750 / 0.557, 1 0.667 / 0.511.
TRANSLATED_SHARE = 0.5


def _translate(foreign: list[str], terms: _TermBuilder) -> int:
    """Add the English terms of the foreign words the vocabulary knows (a Russian word by its stem, a
    Japanese run by the words it contains); return how many of the words were translated."""
    translations = vocabulary().translations
    count = 0
    glosses = terms.parsed.glosses
    for word in foreign:
        lower, found = word.lower(), False
        for key, means in translations:
            if lower.startswith(key) if _is_spaced(key) else key in lower:
                found = True
                for extra in means:
                    terms.add_word(extra, from_alias=True)
                    if extra not in glosses:
                        glosses.append(extra)
                if _is_spaced(key):
                    break  # one stem per Russian word; a Japanese run may hold several words
                lower = lower.replace(key, " ")
        count += found
    return count


def _is_spaced(key: str) -> bool:
    """A key of a script written with spaces between words (matched as a word's stem, not a substring)."""
    return not re.search(rf"[{_KANJI}{_KATAKANA}\u3040-\u309f]", key)


def foreign_words(text: str) -> list[str]:
    """The words of the text in a script other than Latin ("как сохранить чекпоинт FSDP" → 3,
    "FSDPで勾配クリッピング" → 勾配, クリッピング): what only the semantic side can read."""
    return _FOREIGN_WORD.findall(text)


def _validated(text: str) -> str:
    if not text or not text.strip():
        raise QueryError("the query is empty: pass a few words or an API name, e.g. 'fully_shard mixed precision'")
    if len(text) > MAX_PASTE_CHARS:
        raise QueryError(
            f"the query is {len(text)} characters; the limit is {MAX_PASTE_CHARS} for a pasted traceback and "
            f"{MAX_QUERY_CHARS} for a question: shorten it to the error lines, or to the key words or API names"
        )
    return unicodedata.normalize("NFKC", text)


class _TermBuilder:
    """The query's FTS terms (an ordered set) and the words that may name APIs, added word by word."""

    def __init__(self, parsed: ParsedQuery) -> None:
        self.parsed = parsed
        self.terms: dict[str, None] = {}

    def ordered(self) -> list[str]:
        return list(self.terms)

    def add_term(self, term: str) -> None:
        term = term.lower()
        if term and term not in self.terms:
            self.terms[term] = None

    def add_word(self, word: str, from_alias: bool = False) -> None:
        word = resolve_prefix(word)
        if from_alias:
            # Expansions add their whole tokens only: the parts of FullyShardedDataParallel (fully,
            # sharded, data, parallel) would match half the corpus and drown the user's own words.
            for component in word.split("."):
                self.add_term(component)
            return
        if is_identifier(word):
            for component in word.split("."):
                self.add_term(component)
            for part in identifier_parts(word):
                self.add_term(part)
        else:
            self.add_term(word)
        self.parsed.symbol_words.append(word)
        self.parsed.highlight.append(word.rsplit(".", 1)[-1].lower())


def _expand_zero_stages(text: str, parsed: ParsedQuery, terms: _TermBuilder) -> None:
    """ZeRO, ZeRO-3: the paper's spelling names ZeroRedundancyOptimizer (or the FSDP stage it matches)."""
    vocab = vocabulary()
    for stage in _ZERO_STAGE.finditer(text):
        parsed.scopes.append("zero")
        parsed.alias_symbols.append(vocab.symbol_aliases["zero"])
        for extra in vocab.term_aliases.get(f"zero{stage.group(1) or ''}", vocab.term_aliases["zero"]):
            terms.add_word(extra, from_alias=True)


def _rewrite_phrases(text: str) -> str:
    rewritten = text
    for pattern, extra in vocabulary().phrase_rewrites:
        if pattern.search(rewritten):
            rewritten += " " + extra
    return rewritten


def _split_words(text: str) -> tuple[list[str], list[str]]:
    """(every word, the content words: stop words dropped unless code-like)."""
    stop = vocabulary().stop_words
    words = [w for w in (m.group(0).strip("._") for m in WORD.finditer(text)) if w]
    return words, [w for w in words if w.lower() not in stop or is_identifier(w)]


def _glued(plain: list[str]) -> list[str]:
    """Neighbouring prose words glued together, for API names typed as prose ("distribute tensor")."""
    return [a + b for a, b in pairwise(plain)] + [a + b + c for a, b, c in zip(plain, plain[1:], plain[2:])]


def _word_pairs(text: str) -> list[tuple[str, str]]:
    """Neighbouring non-stop words of the text as typed (not the rewritten one: an appended expansion
    is next to nothing), each pair once."""
    stop = vocabulary().stop_words
    tokens = [t for t in TERM_TOKEN.findall(text.lower()) if t.strip("_") and t not in stop]
    return list(dict.fromkeys(pairwise(tokens)))


MAX_PHRASES = 60  # a pasted traceback line is long; its first 60 runs of three words are evidence enough


PHRASE_WORDS = 4


# How a question starts; a pasted error or warning does not (nor does it end with "?").
_INTERROGATIVES = frozenset(
    "what how why which when where who whom whose can could should would does do did is are was were will "
    "shall may might".split()
)


def is_question(text: str) -> bool:
    """Whether the query is phrased as a question: it is then not matched against torch's messages, whose
    runs of small words it can share by chance ("what is the rank of the current process?" lifted
    dist.send, which raises "... the rank of the current process")."""
    words = TERM_TOKEN.findall(text.lower())
    return text.rstrip().endswith("?") or bool(words and words[0] in _INTERROGATIVES)


def _word_runs(text: str) -> list[tuple[str, ...]]:
    """Every PHRASE_WORDS consecutive words of the text as the FTS tokenizer splits them, stop words kept
    (an error message is mostly small words: "must have the same mesh"), each once."""
    tokens = [t for t in TERM_TOKEN.findall(text.lower()) if t.strip("_")]
    runs = zip(*(tokens[i:] for i in range(PHRASE_WORDS)))
    return list(dict.fromkeys(runs))[:MAX_PHRASES]


def _prose_words(text: str) -> list[str]:
    vocab = vocabulary()
    prose: dict[str, None] = {}
    for match in WORD.finditer(_HYPHENATED.sub(" ", text)):
        word = match.group(0).strip("._").lower()
        if word and word not in vocab.stop_words and not is_identifier(match.group(0)):
            prose.setdefault(word, None)
            for extra in vocab.synonyms.get(word, ()):
                if not is_identifier(extra):
                    prose.setdefault(extra.lower(), None)
    return list(prose)


def _add_query_words(words: list[str], parsed: ParsedQuery, terms: _TermBuilder) -> None:
    """Each word as a term (with its parts), plus its abbreviation expansions, synonyms, named API and scope."""
    vocab = vocabulary()
    for raw in words:
        lower = raw.lower()
        required = vocab.case_sensitive.get(lower)
        if required is not None and raw != lower and _ZERO_STAGE.fullmatch(raw):
            continue  # handled with its stage by _expand_zero_stages
        parsed.words.append(resolve_prefix(raw))
        terms.add_word(raw)
        if required is not None:
            continue  # lowercase "zero" is the English word
        if lower in vocab.term_aliases and (lower not in vocab.topic_abbreviations or parsed.content_words <= 2):
            for extra in vocab.term_aliases[lower]:
                terms.add_word(extra, from_alias=True)
        for extra in vocab.synonyms.get(lower, ()):
            terms.add_word(extra, from_alias=True)
        if lower in vocab.symbol_aliases:
            parsed.alias_symbols.append(vocab.symbol_aliases[lower])
        if lower in vocab.scopes:
            parsed.scopes.append(lower)

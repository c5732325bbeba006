"""The search vocabulary (vocabulary.toml beside this file): abbreviations, synonyms, phrase rewrites,
import prefixes and stop words, each entry with the source it comes from.

Loaded once, on first use; the data file is packaged with the code (pyproject package-data).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

VOCABULARY_FILE = Path(__file__).with_name("vocabulary.toml")
SOURCE_FORMAT = re.compile(r"^(?:docs: [a-z0-9-]+\.md(?:#\S+)?|standard: ).+")


@dataclass(frozen=True)
class Scope:
    references: tuple[str, ...]
    prefixes: tuple[str, ...]


@dataclass(frozen=True)
class Variant:
    """A module whose functions are variants of the torch.distributed collectives of the same names
    (differentiable, traceable): an answer only to a question that asks for what makes them different."""

    prefixes: tuple[str, ...]  # qualified-name prefixes of its entries
    words: frozenset[str]  # lowercase query words that ask for it


@dataclass(frozen=True)
class Vocabulary:
    stop_words: frozenset[str]
    term_aliases: dict[str, tuple[str, ...]]  # abbreviation → words added to the query
    symbol_aliases: dict[str, str]  # abbreviation → the API entry it names
    scopes: dict[str, Scope]  # abbreviation → the topic it names
    topic_abbreviations: frozenset[str]  # expand only when (nearly) the whole query
    case_sensitive: dict[str, str]  # abbreviation → the only spelling that counts (ZeRO)
    synonyms: dict[str, tuple[str, ...]]
    phrase_rewrites: tuple[tuple[re.Pattern[str], str], ...]
    phrase_scopes: tuple[tuple[re.Pattern[str], str], ...]
    prefixes: dict[str, str]
    name_abbreviations: dict[str, str]  # a written-out word → how API names abbreviate it
    sources: tuple[tuple[str, str], ...]  # (entry, source) for every entry: what the provenance test reads
    # A Russian word's stem or a Japanese word → the English terms the docs use: what lets the lexical side
    # read a question asked in those languages (longest first, so 非同期 wins over 同期).
    translations: tuple[tuple[str, tuple[str, ...]], ...] = ()
    variants: tuple[Variant, ...] = ()


def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def parse_vocabulary(text: str) -> Vocabulary:
    data = tomllib.loads(text)
    sources: list[tuple[str, str]] = [("stop_words", data["stop_words"]["source"])]
    term_aliases: dict[str, tuple[str, ...]] = {}
    symbol_aliases: dict[str, str] = {}
    scopes: dict[str, Scope] = {}
    topics: set[str] = set()
    case_sensitive: dict[str, str] = {}
    for entry in data.get("abbreviation", []):
        word = entry["word"].lower()
        sources.append((f"abbreviation {word}", entry.get("source", "")))
        if entry.get("expands"):
            term_aliases[word] = tuple(entry["expands"])
        if entry.get("names"):
            symbol_aliases[word] = entry["names"]
        if entry.get("scope"):
            scopes[word] = Scope(tuple(entry["scope"].get("references", ())), tuple(entry["scope"].get("prefixes", ())))
        if entry.get("topic"):
            topics.add(word)
        if entry.get("case_sensitive"):
            case_sensitive[word] = entry["case_sensitive"]
    synonyms = {}
    for entry in data.get("synonym", []):
        sources.append((f"synonym {entry['word']}", entry.get("source", "")))
        synonyms[entry["word"].lower()] = tuple(entry["means"])
    rewrites = []
    for entry in data.get("phrase", []):
        sources.append((f"phrase {entry['pattern']}", entry.get("source", "")))
        rewrites.append((_compile(entry["pattern"]), entry["adds"]))
    phrase_scopes = []
    for entry in data.get("phrase_scope", []):
        sources.append((f"phrase_scope {entry['pattern']}", entry.get("source", "")))
        phrase_scopes.append((_compile(entry["pattern"]), entry["scope"]))
    prefixes = {}
    for entry in data.get("prefix", []):
        sources.append((f"prefix {entry['short']}", entry.get("source", "")))
        prefixes[entry["short"]] = entry["full"]
    written_out = {}
    for entry in data.get("name_abbreviation", []):
        sources.append((f"name_abbreviation {entry['short']}", entry.get("source", "")))
        for full in entry["full"]:
            written_out[full] = entry["short"]
    translations: dict[str, tuple[str, ...]] = {}
    for entry in data.get("translation", []):
        sources.append((f"translation {entry['means']}", entry.get("source", "")))
        for word in entry["words"]:
            translations[word.lower()] = tuple(entry["means"])
    variants = []
    for entry in data.get("variant", []):
        sources.append((f"variant {entry['prefixes'][0]}", entry.get("source", "")))
        variants.append(Variant(tuple(entry["prefixes"]), frozenset(w.lower() for w in entry["words"])))
    return Vocabulary(
        variants=tuple(variants),
        translations=tuple(sorted(translations.items(), key=lambda item: (-len(item[0]), item[0]))),
        stop_words=frozenset(data["stop_words"]["words"].split()),
        term_aliases=term_aliases,
        symbol_aliases=symbol_aliases,
        scopes=scopes,
        topic_abbreviations=frozenset(topics),
        case_sensitive=case_sensitive,
        synonyms=synonyms,
        phrase_rewrites=tuple(rewrites),
        phrase_scopes=tuple(phrase_scopes),
        prefixes=prefixes,
        name_abbreviations=written_out,
        sources=tuple(sources),
    )


@cache
def vocabulary() -> Vocabulary:
    return parse_vocabulary(VOCABULARY_FILE.read_text(encoding="utf-8"))

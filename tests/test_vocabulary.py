"""vocabulary.toml: every entry says where it comes from, and a docs source points at a real section."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fsdp_skill.search.query import parse_query
from fsdp_skill.search.vocabulary import SOURCE_FORMAT, VOCABULARY_FILE, parse_vocabulary, vocabulary

REPO = Path(__file__).resolve().parents[1]


def test_every_vocabulary_entry_names_its_source_as_docs_or_a_standard_term() -> None:
    vocab = vocabulary()
    assert len(vocab.sources) > 50
    for entry, source in vocab.sources:
        assert SOURCE_FORMAT.match(source), (
            f"{entry}: source {source!r} is neither 'docs: ref.md#anchor' nor 'standard: ...'"
        )


def test_every_docs_source_points_at_a_section_or_api_entry_of_the_committed_catalog() -> None:
    catalog_file = REPO / "references" / "catalog.json"
    if not catalog_file.is_file():
        pytest.skip("references/ has not been generated in this checkout")
    catalog = json.loads(catalog_file.read_text(encoding="utf-8"))
    targets = {s["id"] for s in catalog["sections"]} | {f"{a['reference']}#{a['anchor']}" for a in catalog["api"]}
    references = {r["name"] for r in catalog["references"]}
    for entry, source in vocabulary().sources:
        match = re.match(r"docs: (\S+?)(?:#(\S+))? ", source + " ")
        if not match:
            continue
        assert match.group(1) in references, (entry, source)
        if match.group(2):
            assert f"{match.group(1)}#{match.group(2).rstrip(')')}" in targets, (entry, source)


def test_an_entry_without_a_source_is_reported_by_the_format_check() -> None:
    vocab = parse_vocabulary(
        '[stop_words]\nsource = "standard: x"\nwords = "a"\n[[synonym]]\nword = "x"\nmeans = ["y"]\n'
    )
    assert [source for entry, source in vocab.sources if entry == "synonym x"] == [""]
    assert not SOURCE_FORMAT.match("")


def test_the_vocabulary_file_is_data_inside_the_package() -> None:
    # The wheel ships server/fsdp_skill whole (pyproject: only-include), so a file beside the code ships.
    assert VOCABULARY_FILE.name == "vocabulary.toml" and VOCABULARY_FILE.is_file()
    assert VOCABULARY_FILE.parent == REPO / "server" / "fsdp_skill" / "search"
    assert '"server/fsdp_skill"' in (REPO / "pyproject.toml").read_text(encoding="utf-8")


def test_rules_that_only_restated_eval_questions_are_gone() -> None:
    # convert→translate and python objects→picklable were written to fix held-out questions (issue 11).
    assert "translate" not in parse_query("convert a checkpoint").terms
    assert "picklable" not in parse_query("scatter python objects from rank 0").terms

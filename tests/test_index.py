"""The FTS5 index: query parsing, snippets, reproducible builds, staleness, ranking."""

from __future__ import annotations

import hashlib
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_skill.core.catalog import Section, save_catalog
from fsdp_skill.search import ranking as search_module
from fsdp_skill.search.documents import split_pattern_source
from fsdp_skill.search.freshness import stale_reason
from fsdp_skill.search.index import (
    DocsIndex,
    IndexUnavailable,
    build_index,
    index_content_digest,
    open_index,
)
from fsdp_skill.search.names import named_symbols, prose_names
from fsdp_skill.search.query import QueryError, identifier_parts, parse_query
from fsdp_skill.search.ranking import in_scope, rank_key, search
from fsdp_skill.search.snippets import code_block, make_snippet, markdown_blocks, open_fence_at
from search_fixture import make_catalog, make_tree


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    return root


@pytest.fixture(scope="module")
def index(tree: Path):
    idx = open_index(tree, warn=lambda message: pytest.fail(f"unexpected warning: {message}"))
    yield idx
    idx.close()


def ids(hits) -> list[str]:
    return [h.doc.id for h in hits]


# ---------------------------------------------------------------- query parsing


def test_identifier_parts_split_snake_camel_and_screaming_case_and_add_the_glued_form() -> None:
    assert identifier_parts("all_reduce") == ["all", "reduce", "allreduce"]
    assert identifier_parts("MixedPrecisionPolicy") == ["mixed", "precision", "policy", "mixedprecisionpolicy"]
    assert identifier_parts("TORCH_DISTRIBUTED_DEBUG") == ["torch", "distributed", "debug", "torchdistributeddebug"]
    assert identifier_parts("DTensor") == ["d", "tensor", "dtensor"]
    assert identifier_parts("plain") == []


def test_query_keeps_identifiers_whole_and_adds_their_parts() -> None:
    parsed = parse_query("how do I use fully_shard with MixedPrecisionPolicy?")
    assert "fully_shard" in parsed.terms and {"fully", "shard"} <= set(parsed.terms)
    assert "mixedprecisionpolicy" in parsed.terms and "precision" in parsed.terms
    assert "how" not in parsed.terms and "with" not in parsed.terms


def test_query_resolves_dist_prefix_and_abbreviation_aliases() -> None:
    parsed = parse_query("dist.all_reduce vs FSDP2 and DCP")
    assert "torch.distributed.all_reduce" in parsed.symbol_words
    assert "torch.distributed.fsdp.fully_shard" in parsed.alias_symbols
    assert "torch.distributed.checkpoint" in parsed.alias_symbols
    assert parsed.scopes == ["fsdp2", "dcp"]


def test_topic_abbreviations_expand_only_when_they_are_most_of_the_query() -> None:
    assert "checkpoint" in parse_query("DCP").terms
    assert "fully_shard" in parse_query("FSDP2 prefetch").terms
    long = parse_query("offload the sharded parameters to CPU memory in FSDP2")
    assert "fully_shard" not in long.terms and long.scopes == ["fsdp2"]


def test_user_vocabulary_and_phrases_map_to_the_docs_words() -> None:
    assert "gather" in parse_query("collect tensors from every rank").terms
    assert "get_world_size" in parse_query("how many processes are in the job").terms
    assert "timeout" in parse_query("the collective keeps timing out").terms
    assert "all_gather" in parse_query("manually all-gather the parameters").terms
    assert "distributetensor" in parse_query("distribute a tensor over the mesh").glued


def test_zero_is_an_alias_only_in_the_papers_capitalisation() -> None:
    assert "torch.distributed.optim.ZeroRedundancyOptimizer" in parse_query("ZeRO-3 style sharding").alias_symbols
    assert parse_query("zero the gradients").alias_symbols == []


def test_contraction_fragments_are_not_search_terms() -> None:
    parsed = parse_query("backward doesn't all-gather them again, isn't it?")
    assert not {"t", "doesn", "isn"} & set(parsed.terms)
    assert "backward" in parsed.terms


def test_full_width_and_compatibility_characters_are_nfkc_normalised() -> None:
    parsed = parse_query("ｆｕｌｌｙ＿ｓｈａｒｄ　ｍｉｘｅｄ ｐｒｅｃｉｓｉｏｎ")
    assert parsed.normalized == "fully_shard mixed precision"
    assert {"fully_shard", "fully", "shard", "mixed", "precision"} <= set(parsed.terms)
    assert parsed.language == "latin"


def test_a_query_without_latin_letters_parses_with_no_terms_and_says_its_script() -> None:
    for text in ("как дела у тебя сегодня", "こんにちは 元気ですか"):  # no word the vocabulary translates
        parsed = parse_query(text)
        assert parsed.language == "other" and parsed.terms == [] and not parsed.lexical
    translated = parse_query("как сохранить чекпоинт")
    assert translated.language == "other" and translated.terms == ["save", "checkpoint"]
    mixed = parse_query("смешанная точность в FSDP2")
    assert mixed.language == "mixed" and "fsdp2" in mixed.terms


def test_prose_words_leave_out_identifiers_and_hyphenated_compounds() -> None:
    parsed = parse_query("prefetch the next all-gather with fully_shard in a subgroup")
    assert {"prefetch", "next", "subgroup", "group"} <= set(parsed.prose)
    assert not {"all", "gather", "fully", "shard", "fully_shard"} & set(parsed.prose)


def test_search_quotes_fts_syntax_so_it_cannot_break_the_query() -> None:
    for hostile in ['"', 'fully_shard" OR *', "NOT all_reduce", "(barrier", "NEAR(a b)", "title:fsdp", "a AND OR"]:
        expression = parse_query(hostile if hostile != '"' else 'x"').match_expression()
        # Every term is a quoted lowercase word; the operators between them are ours.
        assert re.fullmatch(r'"[a-z0-9_]+"( OR "[a-z0-9_]+")*', expression), expression


def test_proximity_pairs_are_neighbouring_content_words_and_quote_fts_syntax_too() -> None:
    assert parse_query("split the world into groups of 4 ranks").pairs == [
        ("split", "world"),
        ("world", "groups"),
        ("groups", "4"),
        ("4", "ranks"),
    ]
    assert parse_query("fully_shard").pairs == []
    for hostile in ['x" NEAR(a b) "y', "a:b OR (c", "NOT d * e"]:
        expression = parse_query(hostile).proximity_expression(5)
        near = r'NEAR\("[a-z0-9_]+" "[a-z0-9_]+", 5\)'
        assert re.fullmatch(f"{near}( OR {near})*", expression), expression


def test_empty_oversized_and_punctuation_only_queries_raise_errors_that_say_what_to_do() -> None:
    with pytest.raises(QueryError, match="empty"):
        parse_query("   \t")
    with pytest.raises(QueryError, match="10000 characters"):
        parse_query("x" * 10_000)
    with pytest.raises(QueryError, match="no searchable words"):
        parse_query('"*():')


# ---------------------------------------------------------------- snippets


def test_markdown_blocks_slice_whole_blocks_from_the_source_and_drop_the_own_heading() -> None:
    markdown = "## Mixed precision\n\nSome text\nover two lines.\n\n```python\nx = 1\n\ny = 2\n```\n\n- a\n- b\n"
    blocks = markdown_blocks(markdown, skip_heading="Mixed precision")
    assert blocks == [
        ("text", "Some text\nover two lines."),
        ("code", "```python\nx = 1\n\ny = 2\n```"),
        ("text", "- a\n- b"),
    ]


def test_snippets_stay_within_400_characters_and_never_leave_a_code_block_open() -> None:
    long_code = code_block("\n".join(f"value_{i} = compute({i})" for i in range(80)))
    cases = [
        [("text", "Intro sentence. " * 5), long_code, ("text", "After.")],
        [long_code],
        [("text", "word " * 300)],
        [("text", "short"), ("code", "```python\nx = 1\n```"), ("text", "tail " * 100)],
    ]
    for blocks in cases:
        snippet = make_snippet(blocks, ["value_3", "compute"])
        assert 0 < len(snippet) <= 400
        assert open_fence_at(snippet) is None, snippet


def test_snippet_starts_at_the_block_that_mentions_the_query() -> None:
    blocks = [("text", "Unrelated opening paragraph about setup."), ("text", "Use set_requires_gradient_sync here.")]
    assert make_snippet(blocks, ["set_requires_gradient_sync"]).startswith("Use set_requires_gradient_sync")


def test_open_fence_at_tracks_fences_including_longer_and_tilde_fences() -> None:
    assert open_fence_at("text\n```python\nx = 1\n") == "```python"
    assert open_fence_at("```python\nx\n```\n") is None
    assert open_fence_at("````md\n```\ninner\n```\n") == "````md"
    assert open_fence_at("~~~\ncode\n~~~\n") is None


# ---------------------------------------------------------------- build


def test_two_builds_of_the_same_catalog_are_byte_identical(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    first, second = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    build_index(catalog, first, root=tmp_path)
    build_index(catalog, second, root=tmp_path)
    assert hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(second.read_bytes()).digest()
    assert index_content_digest(first) == index_content_digest(second)


def test_content_digest_changes_when_a_document_changes(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    build_index(catalog, tmp_path / "a.sqlite", root=tmp_path)
    catalog.api[0].summary = "Something else entirely."
    build_index(catalog, tmp_path / "b.sqlite", root=tmp_path)
    assert index_content_digest(tmp_path / "a.sqlite") != index_content_digest(tmp_path / "b.sqlite")


def test_build_leaves_no_temp_files_and_replaces_the_index_atomically(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    target = tmp_path / "out" / "index.sqlite"
    build_index(catalog, target, root=tmp_path)
    build_index(catalog, target, root=tmp_path)
    assert [p.name for p in target.parent.iterdir()] == ["index.sqlite"]


def test_sections_that_render_an_api_entry_are_indexed_once_as_the_api_entry(index) -> None:
    kinds = {row[0]: row[1] for row in index._all("SELECT id, kind FROM docs")}
    assert kinds["torch.distributed.all_reduce"] == "api"
    assert "collectives.md#torch.distributed.all_reduce" not in kinds
    assert "collectives.md#asynchronous-work" in kinds


# ---------------------------------------------------------------- staleness


def test_current_index_is_opened_read_only(index) -> None:
    assert not index.temporary
    with pytest.raises(sqlite3.OperationalError):
        index._conn.execute("DELETE FROM meta")


def test_stale_index_is_rebuilt_in_a_temp_dir_with_a_warning(tmp_path: Path) -> None:
    make_tree(tmp_path)
    catalog = make_catalog(tmp_path)
    catalog.api[0].summary = "A changed summary that only the new catalog has."
    save_catalog(catalog, tmp_path / "references" / "catalog.json")
    committed = (tmp_path / "references" / "index.sqlite").read_bytes()
    warnings: list[str] = []
    idx = open_index(tmp_path, warn=warnings.append)
    try:
        assert idx.temporary and "another catalog.json" in warnings[0] and "regenerate" in warnings[0]
        assert idx.payload("api", "torch.distributed.all_reduce")["summary"].startswith("A changed summary")
        assert (tmp_path / "references" / "index.sqlite").read_bytes() == committed  # never rewritten
    finally:
        idx.close()


def test_changed_pattern_file_makes_the_index_stale(tmp_path: Path) -> None:
    make_tree(tmp_path)
    assert (
        stale_reason(tmp_path / "references" / "index.sqlite", tmp_path / "references" / "catalog.json", tmp_path)
        is None
    )
    (tmp_path / "assets" / "patterns" / "fsdp2_train.py").write_text("# edited\n", encoding="utf-8")
    reason = stale_reason(tmp_path / "references" / "index.sqlite", tmp_path / "references" / "catalog.json", tmp_path)
    assert reason is not None and "pattern" in reason


def test_regenerate_check_reports_an_index_built_from_other_pattern_files(tmp_path: Path) -> None:
    from fsdp_skill.build import pipeline as build

    catalog = make_tree(tmp_path)
    output = build.Output(files={}, catalog=catalog, warnings=[])
    index_lines = [line for line in build.differences(output, tmp_path / "references") if "index.sqlite" in line]
    assert index_lines == []
    pattern = tmp_path / "assets" / "patterns" / "fsdp2_train.py"
    pattern.write_text(pattern.read_text() + "# edited\n")
    index_lines = [line for line in build.differences(output, tmp_path / "references") if "index.sqlite" in line]
    assert index_lines == [
        f"differs: references/index.sqlite ({tmp_path / 'references' / 'index.sqlite'} "
        "was built from other pattern files)"
    ]


def test_missing_index_is_built_from_the_catalog_and_garbage_index_too(tmp_path: Path) -> None:
    make_tree(tmp_path)
    index_file = tmp_path / "references" / "index.sqlite"
    index_file.write_bytes(b"not a database at all" * 100)
    warnings: list[str] = []
    idx = open_index(tmp_path, warn=warnings.append)
    assert idx.temporary and "unreadable" in warnings[0]
    idx.close()
    index_file.unlink()
    idx = open_index(tmp_path, warn=warnings.append)
    assert idx.temporary and "missing" in warnings[1]
    assert search(idx, "all_reduce")
    idx.close()


def test_no_index_and_no_catalog_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(IndexUnavailable, match="regenerate"):
        open_index(tmp_path, warn=lambda m: None)


# ---------------------------------------------------------------- ranking


def test_exact_api_name_ranks_its_entry_first_in_every_spelling(index) -> None:
    for query in ["all_reduce", "dist.all_reduce", "torch.distributed.all_reduce", "allreduce", "all_reduce()"]:
        assert ids(search(index, query))[0] == "torch.distributed.all_reduce", query


def test_camel_case_names_match_whole_and_by_parts(index) -> None:
    assert ids(search(index, "MixedPrecisionPolicy"))[0] == "torch.distributed.fsdp.MixedPrecisionPolicy"
    assert set(ids(search(index, "mixed precision policy", limit=2))) & {
        "torch.distributed.fsdp.MixedPrecisionPolicy",
        "fsdp2.md#mixed-precision",
    }


def test_screaming_case_env_var_matches_whole_and_by_parts(index) -> None:
    assert ids(search(index, "TORCH_DISTRIBUTED_DEBUG"))[0] == "debugging.md#environment-variables"
    assert "debugging.md#environment-variables" in ids(search(index, "distributed debug detail"))


def test_abbreviations_find_what_they_stand_for(index) -> None:
    assert ids(search(index, "FSDP2"))[0] == "torch.distributed.fsdp.fully_shard"
    assert ids(search(index, "FSDP wrapper", kind="api"))[0] == "torch.distributed.fsdp.FullyShardedDataParallel"


def test_kind_filter_returns_only_that_kind(index) -> None:
    for kind in ("section", "api", "example", "pattern"):
        hits = search(index, "fully_shard all_reduce training", kind=kind)
        assert hits and {h.doc.kind for h in hits} == {kind}


def test_at_most_one_example_per_symbol_is_returned(index) -> None:
    hits = search(index, "all_reduce example tensor", limit=10)
    examples = [h.doc.symbol for h in hits if h.doc.kind == "example"]
    assert len(examples) == len(set(examples)) == 1


def test_prose_questions_find_the_section_that_answers_them(index) -> None:
    assert (
        ids(search(index, "my job hangs, how do I find which rank never arrived?"))[0]
        == "debugging.md#hangs-and-timeouts"
    )
    assert (
        ids(search(index, "accumulate gradients without syncing every micro-batch"))[0]
        == "fsdp2.md#gradient-accumulation"
    )


def test_patterns_are_searchable_by_their_summary_and_source(index) -> None:
    hits = search(index, "meta device init training loop", kind="pattern")
    assert ids(hits) == ["fsdp2-train"]
    assert "fully_shard" in hits[0].snippet or "meta device" in hits[0].snippet


def test_patterns_are_scored_even_when_bm25_cuts_them_from_the_candidate_pool(index, monkeypatch) -> None:
    query = "mixed precision training"
    monkeypatch.setattr(search_module, "POOL", 1)  # bm25 keeps one candidate, and it is not the pattern
    (kept,) = [index.docs([r])[r] for r, _ in index.candidates(parse_query(query).match_expression(), None, 1)]
    assert kept.kind != "pattern"
    assert "fsdp2-train" in ids(search(index, query, limit=5))
    assert "fsdp2-train" not in ids(search(index, query, kind="section", limit=5))


def test_patterns_tagged_with_a_topic_get_its_scope_lift() -> None:
    assert in_scope(["fsdp2"], "assets/patterns/x.py", None, frozenset({"fsdp2", "training"}))
    assert not in_scope(["dcp"], "assets/patterns/x.py", None, frozenset({"fsdp2", "training"}))
    assert in_scope(["fsdp2"], "fsdp2.md", None)


def test_a_pattern_summary_counts_as_body_text_and_only_its_tags_are_keys(tmp_path: Path) -> None:
    # A pattern's summary is a paragraph; weighted like the one-line summary of an API entry it made every
    # recipe match every question that shares a word with it ("gradients", "workers", "copy", "device").
    from fsdp_skill.search.documents import catalog_documents

    catalog = make_catalog(tmp_path)
    (pattern,) = [d for d in catalog_documents(catalog, tmp_path) if d.kind == "pattern"]
    assert pattern.keys == "fsdp2 meta-device training"
    assert catalog.patterns[0].summary.split(",")[0] in " ".join(pattern.body.split())


def test_pattern_documents_index_prose_in_full_and_each_code_word_once() -> None:
    source = (
        '"""name: demo\n\nShard a model with fully_shard, then train it."""\n'
        "import torch.distributed as dist\n"
        "# all-reduce the loss so every rank logs the same number\n"
        "dist.all_reduce(loss)\ndist.all_reduce(loss)  # twice on purpose\n"
        'print(f"loss {loss}")\n'
    )
    prose, words = split_pattern_source(source, ".py")
    assert "Shard a model with fully_shard, then train it." in prose
    assert "all-reduce the loss so every rank logs the same number" in prose and "twice on purpose" in prose
    assert words.count("all_reduce") == 1 and words.count("dist") == 1 and "loss" in words
    shell_prose, shell_words = split_pattern_source(
        "#!/bin/bash\n# launch one node\nexec torchrun --standalone x.py\n", ".sh"
    )
    assert shell_prose == "launch one node" and {"exec", "torchrun", "standalone"} <= set(shell_words)


def test_a_patterns_mutant_lines_are_not_words_of_its_recipe() -> None:
    # A mutant states the claim made false: indexed, it made the recipe match questions about what it warns against.
    header = (
        '"""\nname: demo\ntitle: Demo recipe\ntags: fsdp2\n'
        "mutant: per-rank-seed: `torch.manual_seed(seed)` -> `torch.manual_seed(seed + rank)`\n\n"
        'Seed every rank the same.\n"""\nimport torch\n'
    )
    prose, _ = split_pattern_source(header, ".py")
    assert "per-rank-seed" not in prose and "seed + rank" not in prose
    assert "title: Demo recipe" in prose and "Seed every rank the same." in prose
    shell, _ = split_pattern_source(
        "#!/bin/bash\n# name: demo\n# mutant: many: `--nproc 1` -> `--nproc 8`\n#\n# launch one node\ntorchrun x.py\n",
        ".sh",
    )
    assert shell == "name: demo\nlaunch one node"


def test_equal_scores_order_by_kind_then_id_whatever_the_catalog_order(tmp_path: Path) -> None:
    catalog = make_catalog(tmp_path)
    text = "## Twin\n\nIdentical twin paragraph about zebra sharding.\n"
    twins = [
        Section(id=f"twins.md#{name}", reference="twins.md", anchor=name, title="Twin", level=2, markdown=text, line=1)
        for name in ("b-twin", "a-twin", "c-twin")
    ]
    orders = []
    for n, sections in enumerate([twins, twins[::-1]]):
        build_index(
            catalog.model_copy(update={"sections": [*catalog.sections, *sections]}), tmp_path / f"{n}.sqlite", tmp_path
        )
        idx = DocsIndex(tmp_path / f"{n}.sqlite")
        hits = search(idx, "zebra twin")
        assert len({round(h.score, 3) for h in hits}) == 1  # a genuine tie
        orders.append(ids(hits))
        idx.close()
    assert orders[0] == orders[1] == ["twins.md#a-twin", "twins.md#b-twin", "twins.md#c-twin"]
    assert sorted([rank_key(1.0, "section", "a"), rank_key(1.0, "api", "z"), rank_key(1.0001, "example", "e")]) == [
        rank_key(1.0, "api", "z"),
        rank_key(1.0, "section", "a"),
        rank_key(1.0001, "example", "e"),
    ]


def test_abbreviations_are_indexed_as_names_of_the_entry_they_stand_for(tree: Path) -> None:
    conn = sqlite3.connect(tree / "references" / "index.sqlite")
    try:
        rows = conn.execute(
            "SELECT d.id FROM docs_fts f JOIN docs d ON d.rowid = f.rowid WHERE docs_fts MATCH 'symbol : \"fsdp2\"'"
        ).fetchall()
    finally:
        conn.close()
    assert rows == [("torch.distributed.fsdp.fully_shard",)]


def test_an_abbreviation_in_a_longer_question_lifts_its_entry_only_when_another_word_names_it(index) -> None:
    fully_shard = "torch.distributed.fsdp.fully_shard"
    assert named_symbols(index, parse_query("how do I shard my model with FSDP2")).get(fully_shard, 0) > 0
    assert fully_shard not in named_symbols(index, parse_query("mixed precision for the reduction in FSDP2"))
    assert ids(search(index, "how do I shard my model with FSDP2"))[0] == fully_shard


def test_prose_that_says_every_word_of_an_api_name_names_the_most_specific_public_one(index) -> None:
    def said(text: str) -> list[str]:
        return prose_names(index, parse_query(text).prose)

    assert said("initialize the default process group") == ["torch.distributed.init_process_group"]
    assert said("reduce and scatter a tensor to every rank") == ["torch.distributed.reduce_scatter_tensor"]
    # all_reduce and nn.functional.all_reduce have the same words: the shorter public path wins.
    assert said("reduce across all ranks") == ["torch.distributed.all_reduce"]
    assert said("reduce memory") == []  # one-word names never count: ordinary prose would name them


def test_the_candidate_cut_keeps_the_best_scores_and_gives_an_equal_score_to_the_lower_rowid() -> None:
    from fsdp_skill.search.index import best

    # Inserted in an order that is neither by rowid nor by score: the cut must not depend on it.
    scores = {9: 1.0, 4: 3.0, 7: 2.0, 2: 2.0, 5: 2.0, 1: 0.5}
    assert best(scores, 3) == [(4, 3.0), (2, 2.0), (5, 2.0)]
    assert best(scores, 10) == [(4, 3.0), (2, 2.0), (5, 2.0), (7, 2.0), (9, 1.0), (1, 0.5)]


@pytest.mark.parametrize(
    "text, script",
    [("fully_shard", "latin"), ("как дела", "other"), ("FSDPで勾配", "mixed"), ("café", "mixed"), ("x² 123 _", "latin"),
     ("混合精度", "other"), ("Σ of ranks", "mixed"), ("42 !?", "latin")],
)
def test_a_query_s_script_is_latin_other_or_mixed_by_its_letters_not_its_digits_or_symbols(
    text: str, script: str
) -> None:
    from fsdp_skill.search.query import script_of

    assert script_of(text) == script


def test_search_results_never_leave_a_code_block_open(index) -> None:
    for query in ["async work wait", "mixed precision policy layers", "x_250 code block", "fully_shard"]:
        for hit in search(index, query, limit=10):
            assert len(hit.snippet) <= 400 and open_fence_at(hit.snippet) is None, (query, hit.snippet)


def test_index_and_search_modules_never_import_torch(tree: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from fsdp_skill.search.index import open_index; "
        "from fsdp_skill.search.ranking import search; "
        f"idx = open_index(Path({str(tree)!r})); search(idx, 'all_reduce'); "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_fixture_tree_is_self_contained(tree: Path, tmp_path: Path) -> None:
    # Copying the tree elsewhere keeps the index current: nothing in it depends on absolute paths.
    copy = tmp_path / "copy"
    shutil.copytree(tree, copy)
    assert stale_reason(copy / "references" / "index.sqlite", copy / "references" / "catalog.json", copy) is None


# ---------------------------------------------------------------- the eval set against the committed corpus


REPO = Path(__file__).resolve().parents[1]
EVAL = REPO / "tests" / "eval"


@pytest.fixture(scope="module")
def committed_index():
    if not (REPO / "references" / "catalog.json").is_file():
        pytest.skip("references/ has not been generated in this checkout")
    idx = open_index(REPO, warn=lambda message: None)
    yield idx
    idx.close()


@pytest.mark.parametrize(
    "name, size",
    [("queries.jsonl", 50), ("heldout.jsonl", 20), ("dev2.jsonl", 90), ("blind.jsonl", 60), ("multilingual.jsonl", 12),
     ("multilingual_dev.jsonl", 36), ("mixed.jsonl", 12), ("agent.jsonl", 12), ("agent_dev.jsonl", 60),
     ("agent_blind.jsonl", 40)],
)
def test_eval_sets_are_large_enough_and_their_answers_exist_in_the_committed_catalog(
    committed_index, name: str, size: int
) -> None:
    from fsdp_skill.cli.bench_search import canonical, load_queries

    queries = load_queries(EVAL / name)
    assert len(queries) >= size and len({q.question for q in queries}) == len(queries)
    canonical(committed_index, queries)  # raises on an expected symbol the catalog lacks
    sections = {f"{k[3]}#{k[4]}" for k, _ in committed_index.document_texts()} | set(committed_index.ids("section")) \
        | set(committed_index.ids("release"))
    patterns = set(committed_index.ids("pattern"))
    for query in queries:
        assert query.symbols or query.sections or query.patterns, query.question
        assert query.sections <= sections, (query.question, query.sections - sections)
        assert query.patterns <= patterns, (query.question, query.patterns - patterns)


# CI gates: regression guards (Recall@5, MRR), each just under what `fsdp-skill bench search --skip-load`
# measured on the committed index (919 documents) after issue 11's two quality rounds (term proximity in
# semantic mode only): dev lexical 0.974 / 0.830, semantic 0.987 / 0.901; dev2 (132 plain-language questions
# written from the docs before their rankings were looked at, then tuned on) lexical 0.773 / 0.642, semantic
# 0.795 / 0.710; blind lexical 0.714 / 0.588, semantic 0.802 / 0.641; ru/ja semantic 0.778 / 0.535. They are
# not the targets: issue 11 asks blind >= 0.95 / 0.85, which this ranking does not reach. Raise a gate when
# the ranking improves on dev or dev2; never tune on blind.jsonl (a fall below its gate means a change hurt
# questions nobody tuned for).
# Lowered again when issues 18-21 landed together (measured on the merged index, 987 documents): 28 API
# entries for torch.distributed.nn.functional / _functional_collectives, DistributedSampler, SyncBatchNorm and
# clip_grad_norm_ compete for the top ranks (queries semantic 0.974 / 0.877, dev2 lexical 0.758 / 0.625,
# semantic 0.803 / 0.678, blind semantic 0.780 / 0.613: a real loss on blind, reported, not tuned away).
# The agent set gained its three differentiable-collective searches once those entries existed; two of them
# miss (R@5 0.833 both modes): deprecated and private-module entries carry SUPERSEDED_PRIOR, so the
# _functional_collectives replacement is pushed down with the deprecated name.
# Raised when variant modules (vocabulary.toml [[variant]]) kept their prior unless asked for, questions stopped
# matching torch's messages, and mutant lines stopped being words of a pattern: dev lexical 0.962 / 0.847,
# semantic 0.974 / 0.896; agent 1.000 / 0.903 and 1.000 / 0.917. dev2 semantic lost one question from its top 5
# (0.803 -> 0.795, MRR 0.678 both): shorter patterns rank a little higher for generic questions.
# Lowered with the torch 2.15.0 pin and fact-check round 3 (no ranking change; issue 31 owns search): the corpus
# grew by 5 API entries (2.14/2.15's gather_single, set_timeout, GradientReductionHandle, FsspecReader/Writer), 9
# claim checks whose claims and docstrings join their skill documents, and assets/traps.md's sections as skill
# documents, which now compete for the top ranks. Measured then: dev semantic 0.974 / 0.897, dev2 lexical
# 0.758 / 0.619, dev2 semantic 0.795 / 0.685, ru/ja dev 0.583 / 0.479 lexical and 0.722 / 0.556 semantic, ru/ja
# 0.889 / 0.601, agent 1.000 / 0.861 in both modes (every agent question still in the top 5); blind unchanged
# above its gates.
GATES = {
    ("queries.jsonl", "lexical"): (0.96, 0.84),
    ("dev2.jsonl", "lexical"): (0.75, 0.61),
    # Blind MRR gates lowered with issue 21 (lexical 0.57 -> 0.55, semantic 0.63 -> 0.61): the skill's own parts
    # became documents and compete for the top ranks; the blind set's expected answers predate them and, blind,
    # may not be re-judged (measured at the change: lexical 0.714 / 0.560, semantic 0.802 / 0.620).
    ("blind.jsonl", "lexical"): (0.70, 0.55),
    # Semantic gates raised with the parameter lift (ranking.add_parameter_matches, tuned on dev / dev2): dev
    # 0.974 / 0.896 -> 0.974 / 0.903, dev2 0.795 / 0.678 -> 0.811 / 0.684; blind, never tuned on, moved with them
    # (0.780 / 0.612 -> 0.802 / 0.625).
    ("queries.jsonl", "semantic"): (0.97, 0.89),
    # dev2 MRR gate 0.68 -> 0.67 with issue 31: PARAMETER_WEIGHT 0.1 took dev2 0.683 -> 0.680 (R@5 0.795 both)
    # while it raised dev (0.905 -> 0.909), agent dev (0.825 -> 0.836) and its parameter questions' Recall@5
    # (0.929 -> 1.000); at 0.05-0.08 dev2 was 0.683-0.686 and those fell back.
    ("dev2.jsonl", "semantic"): (0.79, 0.67),
    ("blind.jsonl", "semantic"): (0.80, 0.62),
    # Raised when the vocabulary's translations grew from 41 to 132 general terms and the dense side read their
    # English beside the question (ParsedQuery.dense_text), tuned on multilingual_dev.jsonl only: ru/ja dev
    # semantic 0.583 / 0.434 -> 0.722 / 0.585, lexical 0.389 / 0.321 -> 0.583 / 0.481; ru/ja 0.833 / 0.585 ->
    # 0.889 / 0.615; mixed 1.000 / 0.775 -> 0.950 / 0.790 (one question left its top 5).
    ("multilingual_dev.jsonl", "lexical"): (0.58, 0.47),
    ("multilingual_dev.jsonl", "semantic"): (0.72, 0.55),
    ("multilingual.jsonl", "semantic"): (0.88, 0.60),
    # Russian/Japanese around API names (issue 21), and the searches agents made (a regression guard: every
    # one of them answered in the top 5).
    ("mixed.jsonl", "semantic"): (0.95, 0.78),
    ("agent.jsonl", "lexical"): (1.0, 0.86),
    ("agent.jsonl", "semantic"): (1.0, 0.86),
    # Issue 31's agent-style sets (pasted tracebacks, paraphrased parameters, release questions, symptoms, code,
    # ru/ja), written in one sitting before any ranking was looked at. Measured with the release documents,
    # the traceback reading and PARAMETER_WEIGHT 0.1 in both modes: agent dev semantic 0.971 / 0.836, lexical
    # 0.957 / 0.814 (the target: Recall@5 >= 0.90); agent blind (never tuned on) 1.000 / 0.861 and
    # 1.000 / 0.854. The same change moved dev semantic 0.974 / 0.904 -> 0.987 / 0.909, dev2 0.795 / 0.683 ->
    # 0.795 / 0.680, blind 0.802 / 0.625 -> 0.813 / 0.631; lexical dev 0.962 / 0.847 -> 0.974 / 0.851.
    ("agent_dev.jsonl", "lexical"): (0.94, 0.80),
    ("agent_dev.jsonl", "semantic"): (0.95, 0.82),
    ("agent_blind.jsonl", "lexical"): (0.97, 0.83),
    ("agent_blind.jsonl", "semantic"): (0.97, 0.84),
}


@pytest.mark.parametrize("name, mode", sorted(GATES))
def test_ranking_stays_above_its_gate_and_plain_bm25_on_every_gated_eval_set(
    committed_index, name: str, mode: str
) -> None:
    from fsdp_skill.cli.bench_search import PlainBM25, canonical, load_queries, our_rankings, score_rankings

    if mode == "semantic" and committed_index.dense is None:
        pytest.skip(f"semantic gate: {committed_index.search_mode}")
    queries = canonical(committed_index, load_queries(EVAL / name))
    ours = score_rankings(queries, our_rankings(committed_index, queries, use_dense=mode == "semantic"))
    plain = score_rankings(queries, [PlainBM25(committed_index).rank(q.question) for q in queries])
    recall5, mrr = GATES[(name, mode)]
    assert ours.recall5 >= recall5 and ours.mrr >= mrr, (ours.recall5, ours.mrr, len(ours.misses))
    # Never below plain BM25, and ahead of it in MRR (dev2 lexical ties it on Recall@5 since issue 21's merge).
    assert ours.recall5 >= plain.recall5 and ours.mrr > plain.mrr


def test_bench_reports_every_eval_set_in_the_folder_known_ones_first(tmp_path: Path) -> None:
    from fsdp_skill.cli.bench_search import eval_sets

    for name in ("multilingual.jsonl", "zz-extra.jsonl", "dev2.jsonl", "queries.jsonl", "blind.jsonl", "notes.txt"):
        (tmp_path / name).write_text("", encoding="utf-8")
    assert eval_sets(tmp_path) == [
        ("dev", "queries.jsonl"),
        ("dev2", "dev2.jsonl"),
        ("blind", "blind.jsonl"),
        ("ru/ja", "multilingual.jsonl"),
        ("zz-extra", "zz-extra.jsonl"),
    ]
    assert {name for _, name in eval_sets(EVAL)} == {path.name for path in EVAL.glob("*.jsonl")}


def test_bench_metrics_count_recall_and_reciprocal_rank_correctly() -> None:
    from fsdp_skill.cli.bench_search import EvalQuery, score_rankings

    q1 = EvalQuery("a", frozenset({"torch.distributed.all_reduce"}), frozenset(), frozenset())
    q2 = EvalQuery("b", frozenset(), frozenset({"fsdp2.md#mixed-precision"}), frozenset())
    q3 = EvalQuery("c", frozenset({"torch.distributed.fsdp.FSDPModule"}), frozenset(), frozenset({"p"}))
    other = ("section", "x.md#y", None, "x.md", "y")
    rankings = [
        [("api", "torch.distributed.all_reduce", "torch.distributed.all_reduce", "c.md", "a")],  # rank 1
        [other, other, ("api", "z", "z.q", "fsdp2.md", "mixed-precision")],  # rank 3 via reference#anchor
        [other] * 5 + [("api", "m", "torch.distributed.fsdp.FSDPModule.unshard", "f.md", "u")],  # member, rank 6
    ]
    quality = score_rankings([q1, q2, q3], rankings)
    assert quality.recall1 == pytest.approx(1 / 3) and quality.recall5 == pytest.approx(2 / 3)
    assert quality.mrr == pytest.approx((1 + 1 / 3 + 1 / 6) / 3)
    assert [question for question, _ in quality.misses] == ["c"]


# ---------------------------------------------------------------- result text without boilerplate


GENERATED_TOP = """\
# Distributed checkpoint (DCP)

Save and load sharded state dicts with DCP.

API reference text comes from the docstrings of **torch 2.13.0**. Generated by `fsdp-skill regenerate` from the \
sources below; do not edit by hand.

| Repository | File | Commit | Licence |
| --- | --- | --- | --- |
| pytorch/pytorch | [`docs/source/distributed.checkpoint.md`](https://github.com/x) | `eb3f6f66d6` | BSD-3-Clause |

**Contents**

- [Saving](#saving)
  - [Loading](#loading)
"""


def test_section_documents_drop_the_generated_header_sources_table_and_contents_list() -> None:
    from fsdp_skill.search.documents import _section_document

    section = Section(
        id="dcp.md#distributed-checkpoint-dcp",
        reference="dcp.md",
        anchor="distributed-checkpoint-dcp",
        title="Distributed checkpoint (DCP)",
        level=1,
        markdown=GENERATED_TOP,
        line=1,
    )
    doc = _section_document(section)
    assert [text for _, text in doc.blocks] == ["Save and load sharded state dicts with DCP."]
    assert "Generated by" not in doc.body and "Contents" not in doc.body and "Repository" not in doc.body


def test_snippets_never_cut_a_markdown_link_in_half() -> None:
    text = (
        "Intro words here. " * 8
        + "See [the profiler documentation](https://pytorch.org/docs/main/profiler.html) for more."
    )
    for budget in range(60, 240, 7):
        snippet = make_snippet([("text", text)], ["profiler"], budget=budget)
        assert snippet.count("[") == snippet.count("]") and snippet.count("](") == snippet.count(".html)"), snippet


def test_a_section_of_bare_command_output_ranks_below_one_that_says_what_to_do(tmp_path: Path) -> None:
    from fsdp_skill.search.documents import OUTPUT_PRIOR, is_output_only

    catalog = make_catalog(tmp_path)
    dump = "## Expected output\n\n```text\nzebra mismatch: zebra ranks missing, zebra collective zebra mismatch\n```\n"
    advice = (
        "## Find the zebra rank\n\nWhen the zebra job reports a mismatch, run the trace tool on the dumps and read "
        "which rank never joined the collective; fix the code path that skips it.\n"
    )
    sections = [
        Section(id=f"z.md#{anchor}", reference="z.md", anchor=anchor, title=title, level=2, markdown=text, line=1)
        for anchor, title, text in (
            ("expected-output", "Expected output", dump),
            ("find-the-zebra-rank", "Find the zebra rank", advice),
        )
    ]
    build_index(
        catalog.model_copy(update={"sections": [*catalog.sections, *sections]}), tmp_path / "z.sqlite", tmp_path
    )
    idx = DocsIndex(tmp_path / "z.sqlite")
    try:
        hits = search(idx, "zebra mismatch ranks")
        assert [h.doc.id for h in hits[:2]] == ["z.md#find-the-zebra-rank", "z.md#expected-output"]
        output, prose = sorted(hits[:2], key=lambda h: h.doc.id)
        assert output.score < prose.score
        raw = dict(idx.candidates(parse_query("zebra mismatch ranks").match_expression(), None, 5))
        ids = {r: idx.docs([r])[r].id for r in raw}
        by_id = {ids[r]: s for r, s in raw.items()}
        # bm25 alone prefers the dump (it repeats the words); the prior is what puts the advice first.
        assert (
            by_id["z.md#expected-output"]
            > by_id["z.md#find-the-zebra-rank"]
            > by_id["z.md#expected-output"] * OUTPUT_PRIOR
        )
    finally:
        idx.close()
    assert is_output_only([("code", "```text\nout\n```")]) and not is_output_only([("code", "```python\nx\n```")])


def test_proximity_runs_only_in_a_search_fused_with_the_dense_side(committed_index, monkeypatch) -> None:
    # Lexical mode has a 2 ms p50 budget that proximity's extra FTS5 query would break; fused with the
    # dense side, the query embedding dominates and proximity is applied.
    from fsdp_skill.search import ranking

    calls: list[str] = []  # the proximity queries: the main query goes through matching() too
    original = committed_index.matching

    def recording(match: str, kind: str | None = None) -> dict[int, float]:
        if "NEAR(" in match:
            calls.append(match)
        return original(match, kind)

    monkeypatch.setattr(committed_index, "matching", recording)
    query = "collectives hang when a rank skipped one"
    ranking.search(committed_index, query, use_dense=False)
    assert calls == []
    if committed_index.dense is None:
        pytest.skip(f"the fused case needs the semantic side: {committed_index.search_mode}")
    ranking.search(committed_index, query)
    assert len(calls) == 1


FLOOR_QUERIES = [
    "torch.distributed all_gather_into_tensor one output tensor per rank",
    "how do I use torch.distributed.checkpoint to save a sharded model",
    "python objects broadcast from one rank in torch distributed",
    "using distributed data parallel with one process per GPU",
]


def test_floor_words_are_the_words_bm25_gives_its_floor_idf_and_no_other(committed_index) -> None:
    from fsdp_skill.search.index import WORD_COLUMNS

    conn = sqlite3.connect(committed_index.path)
    total = conn.execute("SELECT count(*) FROM docs").fetchone()[0]

    def matched(word: str) -> int:
        query = "SELECT count(*) FROM docs_fts WHERE docs_fts MATCH ?"
        return conn.execute(query, (f'{WORD_COLUMNS} : "{word}"',)).fetchone()[0]

    floor = committed_index.floor_words
    assert {"torch", "distributed", "use"} <= floor
    assert all(2 * matched(word) >= total for word in floor)
    # Common words below half keep an idf that ranks: they must be scored.
    for word in ("rank", "tensor", "process", "all", "model", "gradient"):
        assert word not in floor and 2 * matched(word) < total


@pytest.mark.parametrize("query", FLOOR_QUERIES)
def test_leaving_floor_words_out_keeps_the_pool_and_its_scores(committed_index, query: str) -> None:
    from fsdp_skill.search.index import WORD_COLUMNS, best
    from fsdp_skill.search.ranking import POOL, informative_match

    parsed = parse_query(query, committed_index)
    assert committed_index.floor_words.intersection(parsed.terms), "the query must hold a floor word to test this"
    whole = committed_index.matching(f"{WORD_COLUMNS} : ({parsed.match_expression()})")
    informative = informative_match(committed_index, parsed, None)
    assert len(informative) < len(whole)  # the floor words' own documents were not scored
    kept, expected = best(informative, POOL), best(whole, POOL)
    assert [rowid for rowid, _ in kept] == [rowid for rowid, _ in expected]
    assert all(abs(a - b) < 1e-4 for (_, a), (_, b) in zip(kept, expected, strict=True))


def test_a_query_whose_other_words_match_too_little_is_scored_whole(committed_index) -> None:
    from fsdp_skill.search.index import WORD_COLUMNS
    from fsdp_skill.search.ranking import informative_match

    parsed = parse_query("torch distributed zqxjkvw", committed_index)
    whole = committed_index.matching(f"{WORD_COLUMNS} : ({parsed.match_expression()})")
    assert whole and informative_match(committed_index, parsed, None) == whole


@pytest.mark.parametrize("query", [
    "torch.distributed all_gather_into_tensor one output tensor per rank",
    "RuntimeError: Default process group has not been initialized, please make sure to call init_process_group.",
    "how to average model weights every few steps",
])
def test_the_fts_queries_the_bench_times_are_the_ones_a_lexical_search_runs(
    committed_index, monkeypatch, query: str
) -> None:
    from fsdp_skill.search.index import DocsIndex
    from fsdp_skill.search.ranking import fts_matches

    calls: list[tuple[str, tuple]] = []
    for name in ("matching", "message_matches", "parameter_matches"):
        original = getattr(DocsIndex, name)

        def record(self, *args, _name=name, _original=original):
            calls.append((_name, args))
            return _original(self, *args)

        monkeypatch.setattr(DocsIndex, name, record)
    search(committed_index, query, 5, None, False)
    searched, calls[:] = list(calls), []
    fts_matches(committed_index, parse_query(query, committed_index), None)
    assert calls == searched and len({name for name, _ in calls}) >= 2

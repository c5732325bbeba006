"""What each ranking constant does, pinned: a constant the eval cannot see still has a test that fails
when it stops doing its job. (Constants that moved neither dev set were removed; see the issue 11 report.)"""

from __future__ import annotations

import pytest

from fsdp_skill.core.catalog import ApiEntry, Catalog, Section
from fsdp_skill.search import anchors, names, ranking
from fsdp_skill.search.index import open_index
from fsdp_skill.search.query import parse_query
from search_fixture import make_tree


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    idx = open_index(root, warn=lambda message: pytest.fail(message))
    yield idx
    idx.close()


def scores(index, query: str) -> dict[int, float]:
    """Lexical scores as semantic mode computes them (proximity on), without the parameter lift: it adds to
    scores like proximity, and the tests using this pin other constants."""
    saved, ranking.PARAMETER_WEIGHT = ranking.PARAMETER_WEIGHT, 0.0
    try:
        return dict(ranking.lexical_ranking(index, parse_query(query, index), None)[0])
    finally:
        ranking.PARAMETER_WEIGHT = saved


def test_scope_boost_lifts_documents_of_the_topic_an_abbreviation_names_and_nothing_else(index, monkeypatch) -> None:
    monkeypatch.setattr(ranking, "PROXIMITY_WEIGHT", 0.0)  # additive, scaled by the best score: not a factor
    query = "reduce precision across ranks in FSDP2"
    lifted = scores(index, query)
    monkeypatch.setattr(ranking, "SCOPE_BOOST", 1.0)
    flat = scores(index, query)
    docs = index.docs(list(lifted))
    inside = {
        r
        for r, d in docs.items()
        if ranking.in_scope(["fsdp2"], d.reference, d.symbol, index.pattern_tags.get(r, frozenset()))
    }
    assert inside and inside != set(lifted)
    for rowid, score in lifted.items():
        assert score == pytest.approx(flat[rowid] * (1.2 if rowid in inside else 1.0)), docs[rowid].id


def test_proximity_lifts_candidates_where_neighbouring_query_words_stand_close_and_adds_none(
    index, monkeypatch
) -> None:
    assert ranking.PROXIMITY_WEIGHT == 0.05 and ranking.PROXIMITY_DISTANCE == 5
    query = "collectives hang when a rank skipped one"
    lifted = scores(index, query)
    monkeypatch.setattr(ranking, "PROXIMITY_WEIGHT", 0.0)
    flat = scores(index, query)
    parsed = parse_query(query, index)
    near = index.matching(parsed.proximity_expression(ranking.PROXIMITY_DISTANCE))
    near = {r: s for r, s in near.items() if r in flat}
    assert set(lifted) == set(flat) and near and set(near) != set(flat)
    scale = 0.05 * max(flat.values()) / max(near.values())
    for rowid, score in lifted.items():
        assert score == pytest.approx(flat[rowid] + scale * near.get(rowid, 0.0))
    # "rank skipped" stands in "one rank skipped a collective" (distance 0), not five tokens apart elsewhere.
    assert any(index.docs([r])[r].id.endswith("hangs-and-timeouts") for r in near)


def test_examples_score_kind_prior_times_their_text_match(index, monkeypatch) -> None:
    monkeypatch.setattr(ranking, "PROXIMITY_WEIGHT", 0.0)  # additive, scaled by the best score: not a factor
    with_prior = scores(index, "all_reduce example tensor")
    monkeypatch.setattr(ranking, "KIND_PRIOR", {kind: 1.0 for kind in ranking.KINDS})
    without = scores(index, "all_reduce example tensor")
    kinds = {r: d.kind for r, d in index.docs(list(with_prior)).items()}
    assert "example" in kinds.values()
    for rowid, score in with_prior.items():
        assert score == pytest.approx(without[rowid] * (0.55 if kinds[rowid] == "example" else 1.0))


def test_members_of_a_named_class_get_member_share_of_its_lift() -> None:
    assert ranking.MEMBER_SHARE == 0.5 and ranking.is_class_name("torch.distributed.DeviceMesh")
    assert not ranking.is_class_name("torch.distributed.checkpoint.staging")


def test_at_most_max_members_per_class_survive_when_the_class_is_a_candidate() -> None:
    keys = {1: ("api", "C", "m.C", "r.md", 1.0)}
    keys.update({n: ("api", f"C.f{n}", f"m.C.f{n}", "r.md", 1.0) for n in range(2, 7)})
    ranked = [(rowid, 10.0 - rowid) for rowid in sorted(keys)]
    chosen = ranking.diversified(ranked, 10, keys)
    assert [rowid for rowid, _ in chosen] == [1, 2, 3]  # the class and MAX_MEMBERS_PER_CLASS = 2 of its methods
    without_class = ranking.diversified(ranked[1:], 10, {k: v for k, v in keys.items() if k != 1})
    assert len(without_class) == 5  # a class that is not a candidate caps nothing


def test_a_named_api_is_lifted_by_one_plus_its_strength_and_focus_shrinks_it_in_long_questions(index) -> None:
    assert names.focus(2) == 1.0 and names.focus(4) == 0.5 and names.focus(50) == 0.3
    exact = parse_query("dist.all_reduce", index).symbols["torch.distributed.all_reduce"]
    short = parse_query("all_reduce", index).symbols["torch.distributed.all_reduce"]
    long = parse_query("all_reduce across every rank of the whole big training job", index).symbols[
        "torch.distributed.all_reduce"
    ]
    assert exact == names.EXACT_STRENGTH and short == names.SHORT_STRENGTH
    assert long == pytest.approx(names.SHORT_STRENGTH * 0.3)


def test_an_ambiguous_short_name_lifts_its_less_public_spellings_by_the_ambiguity_factor(index) -> None:
    symbols = parse_query("all_reduce", index).symbols
    assert symbols["torch.distributed.all_reduce"] == pytest.approx(names.SHORT_STRENGTH)
    assert symbols["torch.distributed.nn.functional.all_reduce"] == pytest.approx(
        names.SHORT_STRENGTH * names.AMBIGUITY
    )


def test_a_plain_english_word_that_is_an_api_name_names_nothing(index) -> None:
    assert "torch.distributed.reduce" not in parse_query("reduce memory use when training", index).symbols


def _catalog(sentences: list[str]) -> Catalog:
    api = [
        ApiEntry(
            qualified_name=f"torch.distributed.{name}",
            kind="function",
            module="torch.distributed",
            summary="s",
            reference="c.md",
            anchor=f"torch.distributed.{name}",
        )
        for name in ("all_reduce", "broadcast", "barrier")
    ]
    section = Section(
        id="t.md#t",
        reference="t.md",
        anchor="t",
        title="T",
        level=2,
        line=1,
        markdown="## T\n\n" + " ".join(sentences) + "\n",
    )
    return Catalog(torch_version="2.13.0", ref="v2.13.0", api=api, sections=[section])


def test_anchor_text_keeps_sentences_naming_one_or_two_apis_in_code_and_drops_lists_and_long_runs() -> None:
    texts = anchors.anchor_texts(
        _catalog(
            [
                "`dist.broadcast(tensor, src)`: Copies `tensor` from `src` to all other processes.",
                "Use `all_reduce` or `dist.broadcast` here.",
                "Compare `all_reduce`, `dist.broadcast` and `dist.barrier` in the table.",
                "Then `dist.barrier` " + "waits " * 80 + "forever.",
            ]
        )
    )
    assert texts["torch.distributed.broadcast"] == [
        "`dist.broadcast(tensor, src)`: Copies `tensor` from `src` to all other processes.",
        "Use `all_reduce` or `dist.broadcast` here.",
    ]
    assert "torch.distributed.barrier" not in texts  # named in a 3-API list and a run-on over MAX_SENTENCE_CHARS
    many = anchors.anchor_texts(_catalog([f"Call `dist.barrier` in step {n}." for n in range(40)]))
    assert len(many["torch.distributed.barrier"]) == anchors.MAX_ANCHORS_PER_API


def test_variant_modules_rank_at_the_superseded_prior_until_the_query_asks_for_the_variant(
    committed_index, monkeypatch
) -> None:
    from fsdp_skill.search.documents import SUPERSEDED_PRIOR

    assert ranking.VARIANT_LIFT * SUPERSEDED_PRIOR == 1.0  # the lift undoes the prior, no more
    monkeypatch.setattr(ranking, "PROXIMITY_WEIGHT", 0.0)
    monkeypatch.setattr(ranking, "PARAMETER_WEIGHT", 0.0)  # its lift is scaled to the best candidate, not the prior
    rowids = {d.symbol: r for r, d in committed_index.docs(committed_index.rowids_of_kind("api")).items()}
    twin, base = rowids["torch.distributed.nn.functional.scatter"], rowids["torch.distributed.scatter"]
    keys = committed_index.doc_keys([twin, base])
    assert keys[twin][4] == SUPERSEDED_PRIOR and keys[base][4] == 1.0

    plain = parse_query("scatter a list of tensors so each rank gets one", committed_index)
    asked = parse_query("scatter a list of tensors so each rank gets one, differentiable", committed_index)
    assert not plain.variant_prefixes and "torch.distributed.nn.functional." in asked.variant_prefixes
    assert ranking.prior_of(keys[twin], plain) == SUPERSEDED_PRIOR and ranking.prior_of(keys[twin], asked) == 1.0
    assert ranking.prior_of(keys[base], asked) == 1.0
    flat = dict(ranking.lexical_ranking(committed_index, plain, None, proximity=False)[0])
    assert flat[base] > flat[twin]  # the plain question gets dist.scatter first
    lifted = dict(ranking.lexical_ranking(committed_index, asked, None, proximity=False)[0])
    monkeypatch.setattr(ranking, "VARIANT_LIFT", 1.0)
    unlifted = dict(ranking.lexical_ranking(committed_index, asked, None, proximity=False)[0])
    assert lifted[twin] == pytest.approx(2.0 * unlifted[twin]) and lifted[base] == pytest.approx(unlifted[base])


def test_a_question_is_not_matched_against_torchs_messages_and_a_pasted_error_is(committed_index) -> None:
    from fsdp_skill.search.query import is_question

    question = "what is the rank of the current process?"
    assert is_question(question) and is_question("How do I set the NCCL timeout")
    assert not parse_query(question, committed_index).phrases
    # dist.send raises "... the rank of the current process": by run matching it outranked dist.get_rank.
    top = ranking.search(committed_index, question, 1, None, use_dense=False)[0]
    assert top.doc.symbol == "torch.distributed.get_rank"
    pasted = (
        "ValueError: Invalid destination rank: destination rank should not be the same as the rank of "
        "the current process."
    )
    parsed = parse_query(pasted, committed_index)
    assert not is_question(pasted) and parsed.phrases
    found = committed_index.docs(list(committed_index.message_matches(parsed.message_expression())))
    assert "torch.distributed.send" in {d.symbol for d in found.values()}



def test_a_parameter_row_of_its_own_scores_what_one_parameter_does_and_belongs_to_its_entry(committed_index) -> None:
    found = committed_index.parameter_matches('"timeout" OR "collective"')
    symbols = {d.symbol: found[r] for r, d in committed_index.docs(list(found)).items()}
    assert "torch.distributed.init_process_group" in symbols and all(s > 0 for s in symbols.values())
    # Only API entries have parameter rows, and a torch-private parameter (`_ranks`) has none.
    assert {d.kind for d in committed_index.docs(list(found)).values()} == {"api"}
    assert not committed_index.parameter_matches('"_ranks"')


def test_a_question_describing_a_parameter_lifts_the_entry_that_takes_it_in_both_modes(
    committed_index, monkeypatch
) -> None:
    # dev2: PostLocalSGDOptimizer's `averager` is "A model averager instance to run post-localSGD algorithm."
    question = "average model weights every few steps instead of all-reducing every step"
    expected = "torch.distributed.optim.PostLocalSGDOptimizer"
    parsed = parse_query(question, committed_index)
    for proximity in (False, True):  # lexical mode (no proximity) too since issue 31
        monkeypatch.setattr(ranking, "PARAMETER_WEIGHT", 0.1)
        lifted = dict(ranking.lexical_ranking(committed_index, parsed, None, proximity=proximity)[0])
        monkeypatch.setattr(ranking, "PARAMETER_WEIGHT", 0.0)
        flat = dict(ranking.lexical_ranking(committed_index, parsed, None, proximity=proximity)[0])
        rowid = next(r for r, d in committed_index.docs(list(lifted)).items() if d.symbol == expected)
        assert lifted[rowid] > flat.get(rowid, 0.0)

    def rank(weight: float, dense: bool) -> int:
        monkeypatch.setattr(ranking, "PARAMETER_WEIGHT", weight)
        found = [h.doc.symbol for h in ranking.search(committed_index, question, 10, use_dense=dense)]
        return found.index(expected) if expected in found else len(found)

    # The whole search: in the top 3 with the lift, lower without (measured: 3rd / 8th lexical, 3rd / 6th fused).
    for dense in [False, True] if committed_index.dense is not None else [False]:
        assert rank(0.1, dense) < min(3, rank(0.0, dense))
    # A question in another script goes without it: its lexical terms are a few translated words.
    other = parse_query("усреднять веса модели каждые несколько шагов averager", committed_index)
    assert other.other_words
    monkeypatch.setattr(ranking, "PARAMETER_WEIGHT", 0.1)
    lexical = dict(ranking.lexical_ranking(committed_index, other, None, proximity=False)[0])
    monkeypatch.setattr(ranking, "PARAMETER_WEIGHT", 0.0)
    assert lexical == dict(ranking.lexical_ranking(committed_index, other, None, proximity=False)[0])

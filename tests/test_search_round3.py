"""Issue 31: release questions, pasted tracebacks and paraphrased parameters, on the committed index."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fsdp_skill.search import ranking
from fsdp_skill.search.freshness import stale_reason
from fsdp_skill.search.pasted import take_apart
from fsdp_skill.search.query import MAX_PASTE_CHARS, MAX_QUERY_CHARS, QueryError, parse_query
from fsdp_skill.search.release_words import RELEASE_KIND, RELEASE_PRIOR, asks_release, releases_named

REPO = Path(__file__).resolve().parents[1]

TRACEBACK = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/home/me/train.py", line 88, in <module>
[rank1]:     dist.init_process_group("nccl")
[rank1]:   File "/usr/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81, in wrapper
[rank1]:     return func(*args, **kwargs)
[rank1]:            ^^^^^^^^^^^^^^^^^^^^^
[rank1]:   File "/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 1563, in init_pg
[rank1]:     raise ValueError("trying to initialize the default process group twice!")
[rank1]: ValueError: trying to initialize the default process group twice!
It happens when my eval script calls main() a second time, how do I fix it?"""


def top(index, question: str, n: int = 5, use_dense: bool = True, kind: str | None = None) -> list[str]:
    return [h.doc.id for h in ranking.search(index, question, n, kind, use_dense=use_dense)]


def modes(index) -> list[bool]:
    return [False, True] if index.dense is not None else [False]


# ---------------------------------------------------------------- releases


def test_release_numbers_become_one_term_each_and_python_versions_or_floats_do_not() -> None:
    assert releases_named("torch 2.5.1, then v2.14 and 2.13.0+cpu") == ["torch_2_5", "torch_2_14", "torch_2_13"]
    assert releases_named("python3.11 on 3.11 with lr 2.0e-4 and 2.145 steps") == []
    assert "torch_2_14" in parse_query("what did torch 2.14 add").terms
    assert asks_release("is all_gather_into_tensor deprecated?") and asks_release("since which torch is it there")
    assert not asks_release("how do I shard a transformer with fully_shard")


def test_a_question_that_names_a_release_finds_that_releases_document_first(committed_index) -> None:
    for dense in modes(committed_index):
        assert top(committed_index, "what did torch 2.14 add to torch.distributed", use_dense=dense)[0] == \
            "versions.md#torch-2141-against-2130"


def test_release_documents_rank_low_unless_the_query_asks_about_releases(committed_index) -> None:
    rowid = committed_index.rowids_of_kind(RELEASE_KIND)[0]
    key = committed_index.doc_keys([rowid])[rowid]
    assert key[0] == RELEASE_KIND and key[4] == RELEASE_PRIOR < 1.0
    assert ranking.prior_of(key, parse_query("what changed in torch 2.15")) == 1.0
    assert ranking.prior_of(key, parse_query("shard a model with fully_shard")) == RELEASE_PRIOR
    # A question not about releases gets none of them in its top 5, though they name its APIs.
    for dense in modes(committed_index):
        assert not [i for i in top(committed_index, "fully_shard mixed precision", use_dense=dense)
                    if i.startswith("versions.md#")]


def test_is_x_deprecated_finds_the_entry_whose_history_line_says_so(committed_index) -> None:
    for dense in modes(committed_index):
        hits = ranking.search(committed_index, "is set_reduce_scatter_divide_factor deprecated?", 5, use_dense=dense)
        assert hits[0].doc.symbol == "torch.distributed.fsdp.FSDPModule.set_reduce_scatter_divide_factor"
        history = [text for kind, text in hits[0].doc.blocks if text.startswith("History: ")]
        assert history and "deprecated since 2.8" in history[0]


def test_an_import_error_on_an_old_release_reaches_the_entry_or_the_release_that_added_it(committed_index) -> None:
    question = ("ImportError: cannot import name 'fully_shard' from 'torch.distributed.fsdp' on torch 2.5.1; "
                "from which release does this import work?")
    for dense in modes(committed_index):
        found = top(committed_index, question, use_dense=dense)
        assert {"torch.distributed.fsdp.fully_shard", "versions.md#torch-260-against-251"} & set(found[:3]), found


def test_a_release_result_opens_with_read_reference_and_filters_by_kind(committed_index) -> None:
    from fsdp_skill.serve.tools import Toolbox

    box = Toolbox(committed_index, REPO)
    found = box.search_docs("what changed in torch 2.10", 3, RELEASE_KIND).results
    assert found and {r.kind for r in found} == {RELEASE_KIND}
    page = box.read_reference(found[0].reference or "", section=found[0].anchor)
    assert page.text.startswith("## torch 2.10.0 (against 2.9.1)") and "### 2.10.0: added" in page.text


def test_an_index_built_from_another_api_timeline_is_stale(tmp_path: Path) -> None:
    refs = tmp_path / "references"
    shutil.copytree(REPO / "references", refs)
    for pattern in ("assets", "SKILL.md"):
        source = REPO / pattern
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / pattern)
    catalog = refs / "catalog.json"
    if not catalog.is_file():
        pytest.skip("references/ has not been generated in this checkout")
    assert stale_reason(refs / "index.sqlite", catalog, tmp_path) is None
    history = json.loads((refs / "api-history.json").read_text(encoding="utf-8"))
    history["pinned"] = "2.14.1"
    (refs / "api-history.json").write_text(json.dumps(history), encoding="utf-8")
    assert "API timeline" in (stale_reason(refs / "index.sqlite", catalog, tmp_path) or "")


# ---------------------------------------------------------------- pasted tracebacks


def test_a_traceback_is_taken_apart_into_its_error_line_and_the_prose_around_it() -> None:
    pasted = take_apart(TRACEBACK)
    assert pasted is not None
    assert pasted.errors == ("ValueError: trying to initialize the default process group twice!",)
    assert pasted.messages == ("trying to initialize the default process group twice!",)
    # The user's own frame keeps its code; torch's frames, paths, line numbers and prefixes are gone.
    assert 'dist.init_process_group("nccl")' in pasted.prose and "eval script" in pasted.prose
    for debris in ("site-packages", "line 88", "[rank1]", "return func", "^^^", "wrapper", "c10d_logger"):
        assert debris not in pasted.text


def test_warnings_and_torchrun_summaries_are_error_lines_and_a_question_in_words_is_not() -> None:
    warning = take_apart("/opt/x/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_state.py:212: UserWarning: "
                         "a sharded module returned a view")
    assert warning and warning.messages == ("a sharded module returned a view",)
    summary = take_apart("Root Cause (first observed failure):\n[0]:\n  time      : 2026-12-04_10:00:00\n"
                         "  exitcode  : -9 (pid: 4242)\n  traceback : Signal 9 (SIGKILL) received by PID 4242")
    assert summary and "Signal 9 (SIGKILL) received by PID" in summary.messages[-1]
    assert take_apart("how do I fix a ValueError in fully_shard?") is None
    assert take_apart("RuntimeError is raised when I call dist.barrier") is None  # prose naming an exception


def test_a_pasted_traceback_ending_in_a_question_is_still_matched_against_torchs_messages(committed_index) -> None:
    parsed = parse_query(TRACEBACK, committed_index)
    assert parsed.errors and parsed.phrases  # a question in words after the paste no longer turns this off
    assert "site" not in parsed.terms and "packages" not in parsed.terms and "rank1" not in parsed.terms
    for dense in modes(committed_index):
        assert "torch.distributed.init_process_group" in top(committed_index, TRACEBACK, 3, use_dense=dense)


def test_a_pasted_traceback_finds_the_section_that_explains_its_error(committed_index) -> None:
    pasted = (
        "Traceback (most recent call last):\n"
        '  File "/work/train.py", line 40, in <module>\n'
        "    clip_grad_norm_(model.parameters(), 1.0)\n"
        '  File "/usr/local/lib/python3.12/site-packages/torch/nn/utils/clip_grad.py", line 36, in _no_grad_wrapper\n'
        "    return func(*args, **kwargs)\n"
        "RuntimeError: aten.stack.default: got mixed torch.Tensor and DTensor, need to convert all torch.Tensor "
        "to DTensor before calling distributed operators!\n"
        "this is FSDP2 plus tensor parallel on a 2D mesh"
    )
    for dense in modes(committed_index):
        found = top(committed_index, pasted, use_dense=dense)
        assert {"dtensor.md#mixed-tensor-and-dtensor-operations", "tp-fsdp2-2d",
                "fsdp2.md#gradient-clipping-and-optimizer-with-dtensor"} & set(found[:3]), found


def test_a_traceback_of_a_few_thousand_characters_is_accepted_and_a_long_question_or_huge_paste_is_refused() -> None:
    frames = "".join(f'  File "/usr/lib/python3.11/site-packages/torch/x{i}.py", line {i}, in f{i}\n    g()\n'
                     for i in range(60))
    long = "Traceback (most recent call last):\n" + frames + "RuntimeError: Missing key: x.\n" + "why? " * 400
    assert MAX_QUERY_CHARS < 4000 < len(long) <= MAX_PASTE_CHARS
    parsed = parse_query(long)
    # What is read: the error line first, then the prose, cut at MAX_QUERY_CHARS.
    assert parsed.errors == ["RuntimeError: Missing key: x."] and len(parsed.normalized) == MAX_QUERY_CHARS
    with pytest.raises(QueryError, match="the limit is 1000 for a question"):
        parse_query("как сохранить чекпоинт " * 60)
    with pytest.raises(QueryError, match="the limit is 8000 for a pasted traceback"):
        parse_query("ValueError: x\n" + "x " * MAX_PASTE_CHARS)


# ---------------------------------------------------------------- parameters described in other words


@pytest.mark.parametrize(
    "question, expected",
    [
        # monitored_barrier's `wait_all_ranks`: "whether to collect all failed ranks or not"
        ("a debugging barrier that collects every rank that failed to arrive instead of stopping at the first "
         "missing one", "torch.distributed.monitored_barrier"),
        # DistributedDataParallel's `find_unused_parameters`
        ("my DDP model skips some layers in forward for some inputs; make the reducer traverse the autograd "
         "graph to mark parameters that did not receive a gradient", "torch.nn.parallel.DistributedDataParallel"),
    ],
)
def test_a_question_that_paraphrases_a_parameter_finds_the_function_that_takes_it(
    committed_index, question: str, expected: str
) -> None:
    for dense in modes(committed_index):
        found = [h.doc.symbol for h in ranking.search(committed_index, question, 5, use_dense=dense)]
        assert expected in found, (dense, found)


def test_the_parameter_lift_is_what_ranks_the_function_first_in_both_modes(committed_index, monkeypatch) -> None:
    question = ("a debugging barrier that collects every rank that failed to arrive instead of stopping at the first "
                "missing one")
    for dense in modes(committed_index):
        assert top(committed_index, question, use_dense=dense)[0] == "torch.distributed.monitored_barrier"
    monkeypatch.setattr(ranking, "PARAMETER_WEIGHT", 0.0)
    for dense in modes(committed_index):
        assert top(committed_index, question, use_dense=dense)[0] != "torch.distributed.monitored_barrier"

"""Doctest parsing: steps, per-rank outputs, world size, device, requirements, skips."""

from __future__ import annotations

from fsdp_skill.doctests import count_prompts, parse_doctest

ALL_REDUCE = '''
    >>> # xdoctest: +SKIP("no rank")
    >>> # We have 2 process groups, 2 ranks.
    >>> device = torch.device(f"cuda:{rank}")
    >>> tensor = torch.arange(2, dtype=torch.int64, device=device) + 1 + 2 * rank
    >>> tensor
    tensor([1, 2], device='cuda:0') # Rank 0
    tensor([3, 4], device='cuda:1') # Rank 1
    >>> dist.all_reduce(tensor, op=ReduceOp.SUM)

    >>> tensor = torch.tensor(
    ...     [1 + 1j, 2 + 2j], dtype=torch.cfloat, device=device
    ... ) + 2 * rank * (1 + 1j)
    >>> tensor
    tensor([1.+1.j, 2.+2.j], device='cuda:0') # Rank 0
'''


def test_blank_line_between_doctest_paragraphs_keeps_one_example_sharing_variables() -> None:
    [example] = parse_doctest(ALL_REDUCE)
    assert "device = torch.device" in example.code and "tensor = torch.tensor(\n" in example.code
    assert count_prompts(example.text) == count_prompts(ALL_REDUCE)


def test_outputs_tagged_rank_n_are_split_per_rank_and_set_world_size() -> None:
    [example] = parse_doctest(ALL_REDUCE)
    shown = next(s for s in example.steps if s.source == "tensor" and s.expected_by_rank.get(1))
    assert shown.expected_by_rank == {0: "tensor([1, 2], device='cuda:0')", 1: "tensor([3, 4], device='cuda:1')"}
    assert shown.expected is None
    assert example.world_size == 2


def test_skip_reason_device_and_requirements_are_read_from_the_text() -> None:
    [example] = parse_doctest(ALL_REDUCE)
    assert example.skip == "no rank"
    assert example.device == "cuda" and example.requires == ["cuda", "multi-gpu"]
    assert not any("xdoctest" in s.source for s in example.steps)


def test_continuation_lines_join_their_statement_and_untagged_output_is_shared() -> None:
    [example] = parse_doctest(">>> x = (1 +\n...      2)\n>>> x\n3\n")
    assert [s.source for s in example.steps] == ["x = (1 +\n     2)", "x"]
    assert example.steps[1].expected == "3" and example.world_size == 1 and example.device == "cpu"


def test_statement_continued_with_prompts_instead_of_dots_is_one_step() -> None:
    [example] = parse_doctest(">>> model = FSDP(\n>>>     model,\n>>> )\n>>> y = 1\n")
    assert [s.source for s in example.steps] == ["model = FSDP(\n    model,\n)", "y = 1"]


def test_prose_between_doctests_splits_examples_and_becomes_the_caption() -> None:
    examples = parse_doctest(">>> a = 1\n\nNow with numpy:\n\n>>> import numpy as np\n>>> np.zeros(1)\narray([0.])\n")
    assert [e.caption for e in examples] == ["", "Now with numpy:"]
    assert examples[1].requires == ["numpy"] and examples[1].line == 5


def test_world_size_comes_from_text_when_no_rank_tags() -> None:
    [example] = parse_doctest('>>> dist.init_process_group("gloo", rank=rank, world_size=4)\n')
    assert example.world_size == 4


def test_doctest_nested_in_a_list_item_ends_at_the_dedent_and_keeps_its_steps() -> None:
    # StateDictType's note: the example sits deeper than the list items around it, and the next
    # item ("3. ...") directly follows with no blank line; it is prose, not the example's output.
    note = (
        "FSDP supports:\n"
        "    2. ``_local_state_dict``: use it via the context manager as follows:\n"
        "           >>> # xdoctest: +SKIP(\"undefined variables\")\n"
        "           >>> with fsdp.state_dict_type(StateDictType.LOCAL_STATE_DICT):\n"
        "           ...     state = fsdp.state_dict()  # loads local state dict\n"
        "    3. ``_sharded_state_dict``: sharded, unflattened parameters.\n"
    )
    [example] = parse_doctest(note)
    assert [s.source for s in example.steps] == [
        "with fsdp.state_dict_type(StateDictType.LOCAL_STATE_DICT):\n    state = fsdp.state_dict()  # loads local state dict"
    ]
    assert example.steps[0].expected is None and example.skip == "undefined variables"
    assert "3." not in example.text and count_prompts(example.text) == 2

"""Doctest parsing: steps, per-rank outputs, world size, device, requirements, skips."""

from __future__ import annotations

from fsdp_skill.apidoc.doctests import count_prompts, parse_doctest

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
        "with fsdp.state_dict_type(StateDictType.LOCAL_STATE_DICT):\n    state = fsdp.state_dict()  # loads local "
        "state dict"
    ]
    assert example.steps[0].expected is None and example.skip == "undefined variables"
    assert "3." not in example.text and count_prompts(example.text) == 2


# --- world size: the largest lower bound any evidence in the example gives -------------------------


def test_assumes_world_size_of_n_in_a_comment_sets_the_world_size() -> None:
    text = (
        ">>> if dist.get_rank() == 0:\n"
        ">>>     # Assumes world_size of 3.\n"
        ">>>     objects = [\"foo\", 12, {1: 2}]\n"
        ">>> else:\n"
        ">>>     objects = [None, None, None]\n"
    )
    [example] = parse_doctest(text)
    assert example.world_size == 3


def test_a_literal_device_mesh_needs_the_product_of_its_shape() -> None:
    assert parse_doctest('>>> tp_mesh = init_device_mesh("cuda", (8,))\n')[0].world_size == 8
    assert parse_doctest('>>> mesh = init_device_mesh("cpu", mesh_shape=(2, 4))\n')[0].world_size == 8
    [example] = parse_doctest('>>> mesh = DeviceMesh(device_type="cuda", mesh=[[0, 1, 2, 3],[4, 5, 6, 7]])\n')
    assert example.world_size == 8 and example.requires == ["cuda", "multi-gpu"]
    assert parse_doctest('>>> mesh = DeviceMesh("cpu", torch.arange(4).view(2, 2))\n')[0].world_size == 4


def test_meshes_of_several_sizes_in_one_example_need_the_largest() -> None:
    # A mesh may be smaller than the world (torch only refuses a bigger one): 16 ranks fit both.
    text = (
        '>>> mesh_1d = init_device_mesh("cuda", mesh_shape=(8,))\n'
        '>>> mesh_2d = init_device_mesh("cuda", mesh_shape=(2, 8), mesh_dim_names=("dp", "tp"))\n'
    )
    assert parse_doctest(text)[0].world_size == 16


def test_literal_ranks_need_the_largest_rank_plus_one() -> None:
    text = (
        ">>> # Create two subgroups, where each has 2 processes.\n"
        ">>> cur_subgroup, subgroups = dist.new_subgroups(ranks=[[0, 2], [1, 3]])\n"
    )
    assert parse_doctest(text)[0].world_size == 4
    assert parse_doctest(">>> dist.send(t, dst=1)\n")[0].world_size == 2
    assert parse_doctest(">>> dist.send(t, dst=rank + 1)\n")[0].world_size == 1  # not a literal rank


def test_an_example_that_assumes_n_cuda_devices_needs_n_ranks() -> None:
    text = (
        ">>> cur_subgroup, subgroups = dist.new_subgroups()\n"
        ">>> tensor\n"
        "tensor([28])  # Assume 8 CUDA devices per machine.  28 is sum(range(8)).\n"
    )
    assert parse_doctest(text)[0].world_size == 8
    assert parse_doctest(">>> # Run this on 4 GPUs.\n>>> x = 1\n")[0].world_size == 4
    # A subgroup's size, said in processes, is not the world's.
    assert parse_doctest(">>> # Two subgroups of 2 processes each.\n>>> x = 1\n")[0].world_size == 1


def test_numbers_in_the_prose_before_an_example_do_not_set_its_world_size() -> None:
    [example] = parse_doctest("Run it with torchrun --nproc-per-node=8 train.py:\n\n>>> dist.init_process_group()\n")
    assert example.world_size == 1


def test_a_comment_that_mentions_nccl_does_not_make_a_cpu_example_need_cuda() -> None:
    text = '>>> # Assumes backend is not NCCL\n>>> device = torch.device("cpu")\n'
    [example] = parse_doctest(text)
    assert example.device == "cpu" and example.requires == []


# --- statement boundaries: as the interactive console reads them -----------------------------------


def test_an_unprompted_line_inside_open_brackets_continues_the_statement_instead_of_being_output() -> None:
    text = (
        ">>> state = PowerSGDState(process_group=process_group, matrix_approximation_rank=1,\n"
        "                          start_powerSGD_iter=10, min_compression_rate=0.5)\n"
        ">>> ddp_model.register_comm_hook(state, powerSGD_hook)\n"
    )
    [example] = parse_doctest(text)
    first, second = example.steps
    assert first.source.endswith("min_compression_rate=0.5)") and first.expected is None
    assert second.source == "ddp_model.register_comm_hook(state, powerSGD_hook)"
    compile(example.code, "<example>", "exec")


def test_a_class_written_with_prompts_is_one_step_across_bare_prompts_and_column_zero_comments() -> None:
    # LoadPlanner's example: methods separated by a bare ">>>", a comment at column 0 in a body.
    text = (
        ">>> # xdoctest: +SKIP(\"undefined vars\")\n"
        ">>> class RenamePlanner(DefaultLoadPlanner):\n"
        ">>>     def set_up_planner(self, state_dict, metadata):\n"
        ">>>         self.original_state_dict = state_dict\n"
        ">>>\n"
        ">>>     def load_bytes(self, read_item, value):\n"
        ">>> # Remove the \"foo_\" prefix\n"
        ">>>         self.original_state_dict[read_item.dest_index.fqn[4:]] = value\n"
        ">>> planner = RenamePlanner()\n"
    )
    [example] = parse_doctest(text)
    assert [s.source.split("\n")[0] for s in example.steps] == [
        "class RenamePlanner(DefaultLoadPlanner):",
        "planner = RenamePlanner()",
    ]
    assert all(compile(s.source, "<step>", "exec") for s in example.steps)


def test_if_else_decorators_and_a_mistyped_def_keep_their_bodies() -> None:
    text = (
        ">>> if dist.get_rank() == 0:\n"
        ">>>     objects = [1]\n"
        ">>> else:\n"
        ">>>     objects = [None]\n"
        ">>> @register_sharding(aten._softmax.default)\n"
        ">>> def custom(x):\n"
        ">>>     return x\n"
        ">>> def allreduce(pg, bucket): -> torch.futures.Future\n"
        ">>>     return pg\n"
        ">>> objects\n"
        "[1]\n"
    )
    [example] = parse_doctest(text)
    assert [s.line for s in example.steps] == [1, 5, 8, 10]
    assert example.steps[1].source.startswith("@register_sharding") and example.steps[1].source.endswith("return x")
    assert example.steps[2].source.endswith("    return pg")  # upstream's typo is kept; the body stays with it
    assert example.steps[3].expected == "[1]"


def test_a_block_ends_at_a_statement_back_at_column_zero() -> None:
    [example] = parse_doctest(">>> for i in range(2):\n>>>     x = i\n>>> # done\n>>> y = x\n")
    assert [s.source for s in example.steps] == ["for i in range(2):\n    x = i", "# done", "y = x"]


def test_an_xdoctest_platform_requirement_is_an_operating_system_not_a_package_to_install() -> None:
    [example] = parse_doctest(">>> # xdoctest: +REQUIRES(LINUX)\n>>> x = 1\n")
    assert example.requires == ["platform:linux"]

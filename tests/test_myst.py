"""MyST page → CommonMark: directives, colon fences, roles, targets, code fences, autodoc calls."""

from __future__ import annotations

from fsdp_skill.build.markdown_checks import artefacts
from fsdp_skill.convert.myst import myst_to_markdown, prepass


class Recorder:
    """An autodoc hook that records its calls and renders a recognisable stub entry."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, str], int, int]] = []

    def __call__(self, directive: str, argument: str, options: dict[str, str], line: int, level: int) -> str:
        self.calls.append((directive, argument, options, line, level))
        if directive == "currentmodule":
            return ""
        return f'<a id="{argument}"></a>\n\n{"#" * level} `{argument}`\n\nEntry for {argument}.\n'


def convert(text: str, hook: Recorder | None = None, warnings: list[tuple[str, int, str]] | None = None, **kw) -> str:
    sink = warnings if warnings is not None else []
    return myst_to_markdown(text, origin="page.md", warn=lambda o, n, m: sink.append((o, n, m)), autodoc=hook, **kw)


def test_eval_rst_autodoc_reaches_the_hook_with_page_line_and_a_level_below_the_heading() -> None:
    hook = Recorder()
    page = "# Title\n\n## Section\n\n```{eval-rst}\n.. autofunction:: all_reduce\n```\n"
    out = convert(page, hook)
    assert hook.calls == [("autofunction", "all_reduce", {}, 6, 3)]
    assert '<a id="all_reduce"></a>' in out and "### `all_reduce`" in out


def test_autoclass_options_in_eval_rst_are_passed_to_the_hook() -> None:
    hook = Recorder()
    convert("# T\n\n```{eval-rst}\n.. autoclass:: Store\n    :members:\n    :special-members: __init__\n```\n", hook)
    assert hook.calls[0][:3] == ("autoclass", "Store", {"members": "", "special-members": "__init__"})


def test_colon_fence_note_becomes_a_quoted_admonition() -> None:
    out = convert("# T\n\n:::{note}\nUse {func}`init_process_group` first.\n:::\n")
    assert "> **Note:** Use `init_process_group()` first." in out
    assert ":::" not in out


def test_colon_fence_holding_a_code_fence_stays_closed_and_keeps_the_code() -> None:
    page = "# T\n\n:::{warning}\nDo not:\n\n```python\nx = 1\n```\n:::\n\nAfter.\n"
    out = convert(page)
    assert "> ```python\n> x = 1\n> ```" in out
    assert out.rstrip().endswith("After.")
    assert artefacts(out) == []


def test_nested_colon_fences_with_more_colons_on_the_outside() -> None:
    page = "# T\n\n::::{important}\nOuter.\n\n:::{note}\nInner.\n:::\n::::\n"
    out = convert(page)
    assert "> **Important:** Outer." in out
    assert "> > **Note:** Inner." in out


def test_indented_directive_body_is_prose_not_an_indented_code_block() -> None:
    out = convert("# T\n\n:::{warning}\n    The loss_parallel API is experimental.\n:::\n")
    assert "> **Warning:** The loss_parallel API is experimental." in out
    assert "```" not in out


def test_backtick_directive_fence_admonition_and_seealso() -> None:
    out = convert("# T\n\n```{seealso}\nThe DDP notes.\n```\n")
    assert "> **See also:** The DDP notes." in out


def test_roles_are_converted_but_code_spans_are_left_alone() -> None:
    out = convert("# T\n\nCall {func}`~torch.distributed.new_group` or {class}`DTensor`, not `{func}`x``.\n")
    assert "`new_group()`" in out and "`DTensor`" in out
    assert "`{func}`x``" in out


def test_targets_comments_html_comments_and_toctree_are_dropped() -> None:
    page = (
        "(my-label)=\n\n# T\n\n% a comment\n\n<!-- hidden -->\n\n```{toctree}\n:maxdepth: 1\n\nelastic/run\n```\n\n"
        "```{role} hidden\n---\nclass: hidden-section\n---\n```\n\nText.\n"
    )
    out = convert(page)
    assert out == "# T\n\nText.\n"


def test_unlabeled_python_fence_gets_python_and_log_output_gets_text() -> None:
    page = (
        "# T\n\n```\nimport torch\nx = torch.ones(2)\n```\n\n"
        "```\nRuntimeError: Rank 1 failed to pass monitoredBarrier\n```\n"
    )
    out = convert(page)
    assert "```python\nimport torch" in out
    assert "```text\nRuntimeError" in out


def test_labelled_fences_keep_their_language() -> None:
    out = convert("# T\n\n```bash\ntorchrun --nproc-per-node 2 train.py\n```\n")
    assert "```bash\ntorchrun" in out


def test_myst_currentmodule_colon_fence_goes_to_the_hook() -> None:
    hook = Recorder()
    convert(":::{currentmodule} torch.distributed.tensor\n:::\n\n# T\n", hook)
    assert hook.calls[0][:2] == ("currentmodule", "torch.distributed.tensor")


def test_unknown_directive_warns_with_the_page_line_and_keeps_its_text() -> None:
    warnings: list[tuple[str, int, str]] = []
    out = convert("# T\n\nIntro.\n\n```{frobnicate}\nKept text.\n```\n", warnings=warnings)
    assert "Kept text." in out
    assert warnings == [("page.md", 5, "unknown MyST directive {frobnicate}: its body is kept as plain text")]


def test_definition_list_becomes_a_list_under_its_term() -> None:
    page = "# T\n\nThree ways:\n: - {meth}`distribute_tensor` shards\n    a tensor.\n  - factories.\n"
    out = convert(page)
    assert "Three ways:\n\n- `distribute_tensor()` shards\n  a tensor.\n- factories." in out


def test_prepass_keeps_the_line_count_so_warnings_point_at_the_page() -> None:
    lines = ["(x)=", "# T", ":::{note}", "text", ":::", "% c", "+++", "Term", ": def"]
    assert len(prepass(lines)) == len(lines)


def test_raw_rst_directive_outside_eval_rst_is_converted_as_rst() -> None:
    hook = Recorder()
    out = convert(
        "# T\n\nText.\n\n.. autoclass:: torch.distributed.checkpoint.HuggingFaceStorageReader\n  :members:\n", hook
    )
    assert hook.calls[0][:2] == ("autoclass", "torch.distributed.checkpoint.HuggingFaceStorageReader")
    assert ".. autoclass::" not in out


def test_relative_links_resolve_and_bare_labels_keep_only_their_text() -> None:
    out = convert("# T\n\nSee [notes](notes/ddp.md) and [CE](copy-engine-collectives) and [x](https://e.org).\n",
                  resolve_uri=lambda uri: "https://docs.example/" + uri)
    assert "[notes](https://docs.example/notes/ddp.html)" in out
    assert "and CE and" in out
    assert "[x](https://e.org)" in out


def test_setext_heading_becomes_atx_and_sets_the_level_for_later_entries() -> None:
    hook = Recorder()
    out = convert("Title\n=====\n\nSub\n---\n\n```{eval-rst}\n.. autofunction:: f\n```\n", hook)
    assert out.startswith("# Title\n\n## Sub\n")
    assert hook.calls[0][4] == 3


def test_eval_rst_grid_table_becomes_a_pipe_table() -> None:
    page = (
        "# T\n\n```{eval-rst}\n+------+-----+\n| a    | b   |\n+======+=====+\n| send | ✓   |\n+------+-----+\n```\n"
    )
    out = convert(page)
    assert "| a | b |" in out and "| send | ✓ |" in out


def test_output_of_a_mixed_page_has_no_artefacts() -> None:
    hook = Recorder()
    page = (
        "```{eval-rst}\n.. role:: hidden\n    :class: hidden-section\n```\n\n# Page\n\n(lbl)=\n\n## S\n\n"
        ":::{note}\nSee {ref}`lbl` and {doc}`multiprocessing`.\n:::\n\n```{eval-rst}\n.. currentmodule:: "
        "torch.distributed\n"
        ".. autofunction:: send\n```\n\n```\nprint(1)\n```\n"
    )
    out = convert(page, hook)
    assert artefacts(out) == []
    assert [c[0] for c in hook.calls] == ["currentmodule", "autofunction"]

"""The shared markdown vocabulary: the plain parser, fence sizing, admonitions, heading shifts, dedent."""

from __future__ import annotations

from fsdp_skill.convert.markdown import admonition, blockquote, shift_headings
from fsdp_skill.convert.rst.blocks import dedent
from fsdp_skill.core.markdown import code_fence, fence_marker, markdown_parser


def test_shift_headings_moves_the_top_heading_to_the_target_and_clamps_at_six() -> None:
    text = "# Page\n\n## Sub\n\n##### Deep\n\n###### Deeper\n"
    assert shift_headings(text, 2) == "## Page\n\n### Sub\n\n###### Deep\n\n###### Deeper\n"


def test_shift_headings_rewrites_setext_headings_as_atx() -> None:
    assert shift_headings("Title\n=====\n\nBody.\n", 2) == "## Title\n\nBody.\n"


def test_shift_headings_leaves_hash_lines_in_code_alone() -> None:
    text = "# T\n\n```python\n# a comment\n```\n"
    assert shift_headings(text, 2) == "## T\n\n```python\n# a comment\n```\n"


def test_shift_headings_can_move_headings_up_as_well_as_down() -> None:
    assert shift_headings("#### Note\n\nText.\n\n##### Detail", 2) == "## Note\n\nText.\n\n### Detail"


def test_fence_is_longer_than_any_backtick_run_that_starts_a_line_of_the_code() -> None:
    assert fence_marker("x = 1\n") == "```"
    assert fence_marker("```python\nx\n```\n") == "````"
    assert fence_marker("  `````\n") == "``````"


def test_backticks_in_the_middle_of_a_line_cannot_close_a_fence_and_do_not_lengthen_it() -> None:
    assert fence_marker('s = "```"\n') == "```"
    code = 'doc = """\n```\n"""'
    fenced = code_fence(code, "python")
    tokens = [t for t in markdown_parser().parse(fenced) if t.type == "fence"]
    assert len(tokens) == 1 and tokens[0].content == code + "\n"


def test_admonition_puts_the_label_before_prose_and_on_its_own_line_before_other_blocks() -> None:
    assert admonition("Note", "Use it.\nTwice.") == "> **Note:** Use it.\n> Twice."
    for body in ("```python\nx\n```", "- one\n- two", "* one\n* two", "1. one", "| a |\n|---|", "# Title", "> quoted"):
        quoted = admonition("Warning", body)
        assert quoted.startswith("> **Warning:**\n>\n> "), body


def test_blockquote_keeps_blank_lines_inside_the_quote() -> None:
    assert blockquote("a\n\n  \nb") == "> a\n>\n>\n> b"
    tokens = markdown_parser().parse(blockquote("a\n\nb"))
    assert [t.type for t in tokens].count("blockquote_open") == 1


def test_dedent_removes_the_common_indentation_and_keeps_trailing_spaces_of_doctest_output() -> None:
    assert dedent(["    >>> print('a ')", "    a ", "", "      b"]) == [">>> print('a ')", "a ", "", "  b"]
    assert dedent(["   ", "  x"]) == ["", "x"]

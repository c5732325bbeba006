"""RST → CommonMark: unit behaviours, then every real upstream RST input converts without artefacts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fsdp_skill.build.markdown_checks import artefacts, fences, tables
from fsdp_skill.convert.rst.converter import inline_to_markdown, rst_to_markdown

UPSTREAM = Path(__file__).resolve().parents[2] / "shared" / "upstream"
if not UPSTREAM.is_dir():
    UPSTREAM = Path("/work/shared/upstream")


def convert(text: str, **kwargs) -> tuple[str, list[tuple[str, int, str]]]:
    warnings: list[tuple[str, int, str]] = []
    markdown = rst_to_markdown(text, origin="page.rst", warn=lambda o, ln, m: warnings.append((o, ln, m)), **kwargs)
    return markdown, warnings


def test_python_roles_become_code_spans_with_sphinx_display_text() -> None:
    text = ":func:`~torch.distributed.all_reduce` on :class:`torch.nn.Module` via :meth:`Foo.bar <x.Foo.bar>`"
    assert inline_to_markdown(text) == "`all_reduce()` on `torch.nn.Module` via `Foo.bar`"


def test_myst_roles_and_rst_literals_and_links_convert_inline() -> None:
    assert inline_to_markdown("{func}`init_process_group`") == "`init_process_group()`"
    assert inline_to_markdown("``x = 1``") == "`x = 1`"
    assert inline_to_markdown("see `the docs <https://pytorch.org/docs>`__.") == "see [the docs](https://pytorch.org/docs)."
    assert inline_to_markdown(":ref:`notes <fsdp_notes>` and :math:`a^2`") == "notes and $a^2$"


def test_a_one_character_literal_does_not_swallow_the_next_literal() -> None:
    # DDP's note: "trained on ``M`` nodes with ``batch=N``" came out as ```M`` nodes with ``batch=N```.
    assert (
        inline_to_markdown("trained on ``M`` nodes with ``batch=N``, the") == "trained on `M` nodes with `batch=N`, the"
    )


def test_relative_links_resolve_to_the_docs_site_and_zero_width_spaces_leave_urls() -> None:
    resolve = lambda uri: "https://docs.pytorch.org/tutorials/beginner/" + uri  # noqa: E731
    markdown, _ = convert("See `Writing apps <../intermediate/dist_tuto.html>`__ and "
                          "`FSDPModule <\u200bhttps://docs.pytorch.org/x.html#y>`__ or `top <#anchor>`__.",
                          resolve_uri=resolve)
    assert markdown == ("See [Writing apps](https://docs.pytorch.org/tutorials/beginner/../intermediate/dist_tuto.html)"
                        " and [FSDPModule](https://docs.pytorch.org/x.html#y) or [top](#anchor).")


def test_a_role_shown_inside_a_literal_stays_literal() -> None:
    out = inline_to_markdown("write ``:func:`x``` here")
    assert out == "write `` :func:`x` `` here"


def test_section_titles_become_atx_headings_in_order_of_appearance_offset_by_base() -> None:
    markdown, _ = convert("Title\n=====\n\nIntro.\n\nPart\n----\n\nBody.\n\nOther\n=====\n", heading_base=2)
    assert [ln for ln in markdown.split("\n") if ln.startswith("#")] == ["## Title", "### Part", "## Other"]


def test_overlined_titles_are_a_distinct_style_from_underlined_ones() -> None:
    markdown, _ = convert("=====\nTop\n=====\n\nSub\n=====\n")
    assert "# Top" in markdown and "## Sub" in markdown


def test_literal_block_after_double_colon_becomes_a_python_fence() -> None:
    markdown, _ = convert("Run this::\n\n    model = FSDP(model)\n    model(x)\n\nAfter.")
    assert fences(markdown) == [("python", "model = FSDP(model)\nmodel(x)\n")]
    assert "Run this:" in markdown and "::" not in markdown


def test_double_colon_line_directly_over_an_indented_doctest_is_a_literal_block_not_a_term() -> None:
    # DDP's static_graph parameter: "Example::" with no blank line before the indented >>> block
    # used to bounce between paragraph and definition_list until RecursionError.
    text = "Set it to ``True``.\n\nExample::\n    >>> model = DDP(model)\n    >>> static = True\n"
    markdown, warnings = convert(text)
    assert fences(markdown) == [("python", ">>> model = DDP(model)\n>>> static = True\n")]
    assert "Example:" in markdown and "::" not in markdown and warnings == []


def test_shell_and_output_literals_get_bash_and_text_fences() -> None:
    markdown, _ = convert("::\n\n    torchrun --nproc-per-node=2 train.py\n\nOutput::\n\n    Rank 0 done\n")
    assert [info for info, _ in fences(markdown)] == ["bash", "text"]


def test_python_literal_that_does_not_parse_is_still_python_when_it_starts_like_python() -> None:
    # Work.wait's example: "except:" followed only by a comment is a SyntaxError, but it is Python.
    markdown, _ = convert("Example::\n\n    try:\n        work.wait(timeout)\n    except:\n        # some handling\n")
    assert [info for info, _ in fences(markdown)] == ["python"]


def test_code_block_directives_keep_their_language_and_code() -> None:
    markdown, _ = convert(
        ".. code-block:: python\n   :linenos:\n\n   import torch\n\n.. code:: bash\n\n   pip install x\n"
    )
    assert fences(markdown) == [("python", "import torch\n"), ("bash", "pip install x\n")]


def test_doctest_block_keeps_prompts_inside_a_python_fence() -> None:
    markdown, _ = convert("Example:\n\n>>> x = 1\n>>> x\n1\n")
    assert fences(markdown) == [("python", ">>> x = 1\n>>> x\n1\n")]


def test_admonitions_become_labelled_blockquotes() -> None:
    markdown, _ = convert(
        ".. note::\n   Use gloo on CPU.\n\n.. warning:: Not thread safe.\n\n.. versionadded:: 2.1\n   New.\n"
    )
    assert "> **Note:** Use gloo on CPU." in markdown
    assert "> **Warning:** Not thread safe." in markdown
    assert "> **New in version 2.1:** New." in markdown


def test_sloppy_note_without_double_colon_is_still_a_note() -> None:
    markdown, _ = convert(".. note:\n    Rank 0 is the coordinator.\n")
    assert markdown == "> **Note:** Rank 0 is the coordinator."


def test_warning_with_a_space_before_its_colons_is_a_warning_without_stray_colons() -> None:
    markdown, _ = convert("Text.\n\n.. warning ::\n    In normal cases, do not set it.\n")
    assert "> **Warning:** In normal cases, do not set it." in markdown and "::" not in markdown


def test_grid_table_with_column_spans_flattens_a_two_row_header() -> None:
    text = (
        "+---------+-----------+\n"
        "| Backend | ``gloo``  |\n"
        "+---------+-----+-----+\n"
        "| Device  | CPU | GPU |\n"
        "+=========+=====+=====+\n"
        "| send    | ✓   | ✘   |\n"
        "+---------+-----+-----+\n"
    )
    markdown, warnings = convert(text)
    assert markdown.split("\n")[0] == "| Backend / Device | `gloo` CPU | `gloo` GPU |"
    assert tables(markdown) == 1 and not warnings


def test_simple_table_and_list_table_parse_as_gfm_tables() -> None:
    simple = "=====  =====\nA      B\n=====  =====\n1      2\n3      4\n=====  =====\n"
    listed = (
        ".. list-table::\n   :header-rows: 1\n\n   * - Field\n     - Meaning\n   * - ``state``\n     - where it is\n"
    )
    for text, header in ((simple, "| A | B |"), (listed, "| Field | Meaning |")):
        markdown, _ = convert(text)
        assert tables(markdown) == 1 and markdown.startswith(header)


def test_math_directive_and_images_convert() -> None:
    markdown, _ = convert(".. math::\n\n   a = b^2\n\n.. figure:: /_static/img/x.png\n   :alt: Ring\n\n   The ring.\n",
                          resolve_uri=lambda u: "https://pytorch.org/tutorials" + u)
    assert ("math", "a = b^2\n") in fences(markdown)
    assert "![Ring](https://pytorch.org/tutorials/_static/img/x.png)" in markdown and "The ring." in markdown


def test_offline_meaningless_directives_targets_and_comments_vanish_silently() -> None:
    text = ".. _label:\n\n.. toctree::\n   a\n\n.. raw:: html\n\n   <div>\n\n.. a comment\n\nText.\n"
    markdown, warnings = convert(text)
    assert markdown == "Text." and warnings == []


def test_unknown_directive_warns_with_line_and_keeps_its_content() -> None:
    markdown, warnings = convert("Intro.\n\n.. frobnicate:: x\n\n   Kept text.\n", first_line=10)
    assert warnings == [("page.rst", 12, "unknown directive frobnicate")]
    assert "Kept text." in markdown and ".. " not in markdown


def test_autodoc_directives_go_to_the_hook_with_options_and_current_module() -> None:
    calls: list[tuple[str, str, dict[str, str], int]] = []

    def hook(directive: str, argument: str, options: dict[str, str], line: int) -> str:
        calls.append((directive, argument, options, line))
        return "ENTRY" if directive != "currentmodule" else ""

    text = (
        ".. currentmodule:: torch.distributed\n\n.. autoclass:: Store\n    :members:\n\n"
        ".. autosummary::\n   :nosignatures:\n\n   a\n   b\n"
    )
    markdown, _ = convert(text, autodoc=hook)
    assert calls == [
        ("currentmodule", "torch.distributed", {}, 1),
        ("autoclass", "Store", {"members": ""}, 3),
        ("autosummary", "a\nb", {"nosignatures": ""}, 6),
    ]
    assert markdown == "ENTRY\n\nENTRY"


def test_autodoc_without_a_hook_is_dropped_with_a_warning() -> None:
    markdown, warnings = convert(".. autofunction:: all_reduce\n")
    assert markdown == "" and len(warnings) == 1 and "autofunction all_reduce" in warnings[0][2]


def test_lists_nest_and_wrapped_items_stay_in_their_item() -> None:
    markdown, _ = convert("- one\n  continues\n- two\n\n  - nested\n\n1. first\n2. second\n")
    assert markdown.split("\n")[:2] == ["- one", "  continues"]
    assert "  - nested" in markdown and "1. first" in markdown


def test_deeper_lines_under_a_long_or_wrapped_paragraph_continue_its_sentence() -> None:
    # set_state_dict: "WARN: ... after ``step()``" then "    is called on the optimizers." (docutils'
    # "unexpected indentation") used to split the sentence into two paragraphs.
    text = ("WARN: ``set_state_dict`` can only be called before ``backward()`` or after ``step()``\n"
            "    is called on the optimizers.\n\nA short\nwrapped line\n    continues.\n")
    markdown, _ = convert(text)
    assert markdown.split("\n\n") == [
        "WARN: `set_state_dict` can only be called before `backward()` or after `step()`\nis called on the optimizers.",
        "A short\nwrapped line\ncontinues.",
    ]


def test_code_under_a_lead_in_line_without_double_colon_becomes_a_python_fence() -> None:
    text = (
        "Usage Patterns:\n    # Synchronous staging\n    stager = DefaultStager(opts)\n    stager.close()\n\n"
        "Thread Safety:\n    DefaultStager is not thread-safe.\n\nIndented after a blank:\n\n    model = FSDP(model)\n"
    )
    markdown, _ = convert(text)
    assert fences(markdown) == [("python", "# Synchronous staging\nstager = DefaultStager(opts)\nstager.close()\n"),
                                ("python", "model = FSDP(model)\n")]
    assert "Thread Safety:\n\nDefaultStager is not thread-safe." in markdown


def test_prose_that_looks_like_markdown_syntax_is_escaped() -> None:
    markdown, _ = convert("A value of\n# not a heading\nand <host> stays text.\n")
    assert "\\# not a heading" in markdown and "\\<host>" in markdown


def test_artefact_check_flags_a_role_whose_target_markdown_it_made_a_code_span() -> None:
    # markdown-it parses `x` into a code span, so the prose text only ends with ":func:" / "{class}".
    found = {problem for _, problem, _ in artefacts("See :func:`x` and {class}`Y` here.\n")}
    assert found == {"RST role", "MyST role"}
    assert artefacts("Write `:func:` or `{class}` in code; a time 10:30: `x`.\n") == []


def test_artefact_check_flags_an_unclosed_fence_even_inside_a_quote() -> None:
    assert artefacts("> ```python\n> x = 1\n> ```\n") == []
    [(line, problem, _)] = artefacts("Text.\n\n> ```python\n> x = 1\n")
    assert (line, problem) == (3, "unclosed code fence")


def _upstream_rst_inputs() -> list[Path]:
    tutorials = sorted((UPSTREAM / "pytorch-tutorials").rglob("*.rst"))
    return tutorials + [UPSTREAM / "pytorch" / "docs" / "source" / "notes" / "fsdp.rst"]


def _eval_rst_blocks() -> list[tuple[str, int, str]]:
    blocks = []
    for page in sorted((UPSTREAM / "pytorch" / "docs" / "source").rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"```\{eval-rst\}\n(.*?)```", text, re.S):
            blocks.append((page.name, text[: match.start()].count("\n") + 2, match.group(1)))
    return blocks


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="upstream snapshot not present")
def test_every_upstream_rst_page_converts_without_artefacts() -> None:
    pages = _upstream_rst_inputs()
    assert len(pages) >= 12
    for page in pages:
        markdown, warnings = convert(page.read_text(encoding="utf-8"), autodoc=lambda *a: "")
        # The one link the upstream page itself holds that a reader cannot follow (a PDF viewer's
        # chrome-extension:// wrapper around an https address) is the build's to repair (build.page_checks).
        found = [a for a in artefacts(markdown) if not (a[1].startswith("link a reader cannot follow")
                                                         and "/https://" in a[2])]
        assert found == [], page.name
        assert not [w for w in warnings if "unknown directive" in w[2]], (page.name, warnings)
        assert markdown.count("\n#") >= 1, page.name


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="upstream snapshot not present")
def test_every_eval_rst_block_of_the_myst_pages_converts_without_artefacts() -> None:
    blocks = _eval_rst_blocks()
    assert len(blocks) > 100
    for name, line, body in blocks:
        markdown, warnings = convert(body, first_line=line, autodoc=lambda *a: "")
        assert artefacts(markdown) == [], (name, line)
        assert not [w for w in warnings if "unknown directive" in w[2]], (name, line, warnings)
    backend_table = next(body for name, _, body in blocks if name == "distributed.md" and "| Backend" in body)
    markdown, _ = convert(backend_table)
    assert tables(markdown) == 1
    assert markdown.split("\n")[0].startswith("| Backend / Device | `gloo` CPU | `gloo` GPU | `mpi` CPU")


def test_math_role_keeps_its_backslashes_as_latex_needs_them() -> None:
    """docutils hands the math role its text with backslashes restored; `\\text` must stay `\\text`."""
    assert (
        inline_to_markdown(r":math:`i^{\text{th}}` tensor, :math:`\rightarrow`")
        == r"$i^{\text{th}}$ tensor, $\rightarrow$"
    )
    assert inline_to_markdown(r"{math}`\alpha_i`") == r"$\alpha_i$"

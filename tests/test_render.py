"""Topic rendering: slugs and anchors, header, table of contents, section split."""

from __future__ import annotations

import re

from fsdp_skill.build.lint import problems
from fsdp_skill.build.render import (
    Slugger,
    SourceRow,
    drop_empty_sections,
    drop_quotes_matching,
    github_slug,
    outline,
    render_reference,
    split_sections,
)

ROWS = [
    SourceRow("pytorch/pytorch", "docs/source/fsdp.md", "7b2b3239feab2066310fac08b3b6b81517527db3", "BSD-3-Clause", "https://x"),
    SourceRow("pytorch/tutorials", "intermediate_source/FSDP_tutorial.rst", None, "BSD-3-Clause"),
]


def test_github_slug_drops_punctuation_and_keeps_underscores_and_hyphens() -> None:
    assert github_slug("Debugging `torch.distributed` applications") == "debugging-torchdistributed-applications"
    assert github_slug("PyTorch FSDP2 (fully_shard)") == "pytorch-fsdp2-fully_shard"
    assert github_slug("Which backend to use?") == "which-backend-to-use"


def test_duplicate_headings_get_github_suffixes_in_document_order() -> None:
    anchors = [Slugger().anchor(h) for h in outline("# A\n\n## Logging\n")]
    assert anchors == ["a", "logging"]
    slugger = Slugger()
    assert [slugger.anchor(h) for h in outline("## Logging\n\n## Logging\n\n## Logging\n")] == [
        "logging",
        "logging-1",
        "logging-2",
    ]


def test_api_heading_takes_the_explicit_anchor_above_it() -> None:
    text = '# T\n\n<a id="torch.distributed.all_reduce"></a>\n\n### all_reduce\n\nText.\n'
    heading = outline(text)[1]
    assert heading.anchor_id == "torch.distributed.all_reduce"
    assert Slugger().anchor(heading) == "torch.distributed.all_reduce"


def test_header_names_each_source_with_short_commit_licence_and_torch_version() -> None:
    rendered = render_reference("FSDP1", "The FSDP1 wrapper.", ROWS, "2.13.0", "## Body\n\nText.\n")
    text = rendered.text
    assert text.startswith("# FSDP1\n\nThe FSDP1 wrapper.\n")
    assert "| pytorch/pytorch | [`docs/source/fsdp.md`](https://x) | `7b2b3239fe` | BSD-3-Clause |" in text
    assert "| pytorch/tutorials | `intermediate_source/FSDP_tutorial.rst` | not recorded | BSD-3-Clause |" in text
    assert "torch 2.13.0" in text
    assert "**Contents**" not in text  # short file: no TOC
    assert text.splitlines()[rendered.body_start] == "## Body"


def test_long_file_gets_a_toc_whose_links_are_the_section_anchors() -> None:
    body = "\n\n".join(
        f"## Part {i}\n\n" + "line\n\n" * 20 + f'<a id="pkg.f{i}"></a>\n\n### f{i}\n\nDoc.' for i in range(12)
    )
    body += "\n\n## Part 0\n\nAgain.\n"
    text = render_reference("Big", "Long.", ROWS, "2.13.0", body).text
    assert len(text.splitlines()) > 300
    assert "**Contents**" in text
    toc_links = re.findall(r"\]\(#([^)]+)\)", text.split("## Part 0")[0])
    anchors = {span.anchor for span in split_sections(text)}
    assert toc_links and set(toc_links) <= anchors
    assert "part-0-1" in toc_links and "pkg.f3" in toc_links


def test_split_sections_gives_breadcrumbs_lines_and_leaves_the_next_anchor_out() -> None:
    text = '# T\n\nIntro.\n\n## A\n\nText A.\n\n<a id="m.f"></a>\n\n### f\n\nDoc of f.\n\n## B\n\nText B.\n'
    spans = split_sections(text)
    assert [(s.anchor, s.level, s.breadcrumb, s.line) for s in spans] == [
        ("t", 1, (), 1),
        ("a", 2, ("T",), 5),
        ("m.f", 3, ("T", "A"), 11),
        ("b", 2, ("T",), 15),
    ]
    assert spans[1].markdown == "## A\n\nText A.\n"  # the `<a id>` line belongs to `f`
    assert spans[2].markdown == "### f\n\nDoc of f.\n"


def test_drop_quotes_matching_removes_only_top_level_matching_quotes() -> None:
    text = "# T\n\n> **Note:** View and edit this tutorial in [github](u).\n\n> **Note:** Keep me.\n\nText.\n"
    out = drop_quotes_matching(text, re.compile(r"View and edit this tutorial in \[github\]"))
    assert out == "# T\n\n> **Note:** Keep me.\n\nText.\n"


def test_lint_flags_artefacts_unlabelled_and_unclosed_fences_and_duplicate_anchors() -> None:
    bad = (
        "# T\n\nSee :func:`x` and {class}`Y` [source]\n\n## Heading ¶\n\n```\ncode\n```\n\n"
        '<a id="a.b"></a>\n\n## One\n\n<a id="a.b"></a>\n\n## Two\n\n> ```python\n> x = 1\n'
    )
    found = "\n".join(problems("bad.md", bad))
    for expected in (
        "RST role",
        "MyST role",
        "[source]",
        "headerlink debris",
        "without a language",
        "unclosed code fence",
        "anchor 'a.b'",
    ):
        assert expected in found, expected


def test_lint_accepts_a_clean_file_with_a_fence_inside_a_quote() -> None:
    clean = "# T\n\n> **Note:** code:\n>\n> ```python\n> x = 1\n> ```\n\n## A\n\nText with `:func:` in code.\n"
    assert problems("ok.md", clean) == []


def test_drop_empty_sections_removes_headings_without_content_but_keeps_code_blank_lines() -> None:
    text = (
        "# Elastic\n\nIntro.\n\n## Get Started\n\n## Documentation\n\n### Sub\n\nText.\n\n"
        "```python\ndef a():\n    pass\n\n\ndef b():\n    pass\n```\n"
    )
    out = drop_empty_sections(text)
    assert "Get Started" not in out
    assert "## Documentation\n\n### Sub" in out  # not empty: it holds a subsection
    assert "    pass\n\n\ndef b" in out


def test_a_heading_whose_only_child_section_is_empty_goes_too() -> None:
    assert drop_empty_sections("# T\n\nText.\n\n## A\n\n### B\n\n## C\n\nc.\n") == "# T\n\nText.\n\n## C\n\nc.\n"


def test_lint_flags_an_api_entry_heading_with_nothing_under_it_but_not_a_page_heading_with_subsections() -> None:
    text = (
        '# T\n\n<a id="torch.distributed"></a>\n\n## torch.distributed\n\n## Backends\n\n### Gloo\n\nText.\n\n'
        '<a id="torch.distributed.x"></a>\n\n## torch.distributed.x\n\n```python\nx()\n```\n'
    )
    found = problems("t.md", text)
    assert found == ["t.md:5: API entry 'torch.distributed' has nothing under its heading"]

"""docutils as the oracle for the hand-written RST converter.

Every upstream RST source — the tutorial and note files, and each `{eval-rst}` block of the MyST
pages — is parsed by docutils with Sphinx's roles and directives registered (tests/docutils_sphinx.py)
and must raise no error; the structure the converter emits for it must agree with docutils'
doctree: the same section titles at the same levels, the same code blocks with the same code, the
same tables with the same cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from docutils_sphinx import Table, code_blocks, headings, parse, tables
from fsdp_skill.convert.markdown import plain_text
from fsdp_skill.convert.myst_tokens import myst_parser
from fsdp_skill.convert.rst.converter import rst_to_markdown
from fsdp_skill.core.markdown import markdown_parser

UPSTREAM = Path(__file__).resolve().parents[1] / "upstream"
# The tutorials' build defines |edit| (the "edit on GitHub" pencil) outside the pages; Sphinx
# appends such definitions to every file, so the oracle does too.
TUTORIALS_EPILOG = "\n\n.. |edit| image:: /_static/pencil-16.png\n"
# Authoring errors upstream that Sphinx reports too (the converter renders what the author meant):
KNOWN_UPSTREAM_ERRORS = {
    # `torch elastic/torchrun<https://...>`__ : no space before "<", so not an embedded URI.
    "intermediate_source/ddp_tutorial.rst": ["Anonymous hyperlink mismatch"],
    # `.. code-block:: python` with the code on the next line, no blank line between: the code
    # becomes a second argument. The converter keeps it as the block's code.
    "intermediate_source/DCP_tutorial.rst": ['Error in "code-block" directive'],
}
# Code blocks docutils does not see for the error above: (file, index among the file's code blocks).
CODE_ONLY_THE_CONVERTER_KEEPS = {("intermediate_source/DCP_tutorial.rst", 2)}


@dataclass(frozen=True)
class Source:
    name: str  # path under upstream/, with ":line" for an eval-rst block
    text: str
    epilog: str = ""


def _sources() -> list[Source]:
    sources = []
    for path in sorted(UPSTREAM.rglob("*.rst")):
        name = str(path.relative_to(UPSTREAM)).split("/", 1)[1]
        epilog = TUTORIALS_EPILOG if "pytorch-tutorials" in path.parts else ""
        sources.append(Source(name, path.read_text(encoding="utf-8"), epilog))
    for path in sorted(UPSTREAM.rglob("*.md")):
        for token in myst_parser().parse(path.read_text(encoding="utf-8")):
            if token.type in ("fence", "colon_fence") and token.info.strip() == "{eval-rst}" and token.map:
                name = f"{str(path.relative_to(UPSTREAM)).split('/', 1)[1]}:{token.map[0] + 2}"
                sources.append(Source(name, token.content))
    return sources


SOURCES = _sources()
FILES = [s for s in SOURCES if ":" not in s.name]


def _normalized(code: str) -> str:
    lines = [line.rstrip() for line in code.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


@dataclass
class Emitted:
    headings: list[tuple[int, str]]
    code: list[str]
    tables: list[list[list[str]]]


def _emitted(source: Source) -> Emitted:
    """What the converter makes of the source, read back with the CommonMark parser."""
    markdown = rst_to_markdown(source.text, origin=source.name, warn=lambda *a: None, autodoc=lambda *a: "")
    tokens = markdown_parser().parse(markdown)
    out = Emitted([], [], [])
    table: list[list[str]] | None = None
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            out.headings.append((int(token.tag[1]), " ".join(plain_text(tokens[index + 1]).split())))
        elif token.type == "fence" and token.info.strip() != "math":
            out.code.append(_normalized(token.content))
        elif token.type == "table_open":
            table = []
            out.tables.append(table)
        elif token.type == "tr_open" and table is not None:
            table.append([])
        elif token.type == "inline" and table is not None and tokens[index - 1].type in ("th_open", "td_open"):
            table[-1].append(" ".join(plain_text(token).split()))
        elif token.type == "table_close":
            table = None
    return out


def test_the_oracle_covers_every_upstream_rst_source() -> None:
    assert len(FILES) >= 12
    assert len(SOURCES) - len(FILES) >= 300  # eval-rst blocks of the MyST pages


@pytest.mark.parametrize("source", SOURCES, ids=[s.name for s in SOURCES])
def test_upstream_rst_parses_in_docutils_without_errors(source: Source) -> None:
    errors = parse(source.text + source.epilog, source.name).errors
    expected = KNOWN_UPSTREAM_ERRORS.get(source.name, [])
    assert len(errors) == len(expected), errors
    for error, known in zip(errors, expected):
        assert known in error


@pytest.mark.parametrize("source", SOURCES, ids=[s.name for s in SOURCES])
def test_converted_headings_code_and_tables_agree_with_the_docutils_doctree(source: Source) -> None:
    doctree = parse(source.text + source.epilog, source.name).doctree
    emitted = _emitted(source)
    assert emitted.headings == headings(doctree)
    code = [c for k, c in enumerate(emitted.code) if (source.name, k) not in CODE_ONLY_THE_CONVERTER_KEEPS]
    assert code == [_normalized(c) for c in code_blocks(doctree)]
    assert len(emitted.tables) == len(tables(doctree))
    for rows, table in zip(emitted.tables, tables(doctree)):
        _assert_same_table(rows, table)


def _assert_same_table(rows: list[list[str]], table: Table) -> None:
    """A pipe table has one header row: docutils' header rows are merged into it column by column
    (each column's labels in order, joined by " " or " / "); a table without a header has its first
    row promoted. Body cells agree one for one."""
    if not table.header:
        assert rows == table.body
        return
    header, body = rows[0], rows[1:]
    assert body == table.body
    assert len(header) == len(table.header[0])
    for column, merged in enumerate(header):
        labels = list(dict.fromkeys(row[column] for row in table.header if row[column]))
        assert merged.replace(" / ", " ").split() == " ".join(labels).split(), (column, merged, labels)


def test_oracle_totals_over_the_upstream_sources() -> None:
    """The numbers behind the agreement (printed with -s): sources, headings, code blocks, tables."""
    totals = {"sources": len(SOURCES), "headings": 0, "code blocks": 0, "tables": 0}
    for source in SOURCES:
        doctree = parse(source.text + source.epilog, source.name).doctree
        totals["headings"] += len(headings(doctree))
        totals["code blocks"] += len(code_blocks(doctree))
        totals["tables"] += len(tables(doctree))
    print("docutils oracle:", totals)
    assert totals["headings"] >= 90 and totals["code blocks"] >= 90 and totals["tables"] >= 5


# Docstrings (RST after the sections are cut out) with an error Sphinx reports too, or that only
# resolves in the page the docstring is rendered into:
KNOWN_DOCSTRING_ERRORS = {
    # A note's line indented by one stray space: "(as opposed to DTensor\n or ShardedTensor)".
    "torch.distributed.checkpoint.load": "Unexpected indentation",
    # `create_dtensor`_ names the `(create_dtensor)=` target of distributed.tensor.md, where autodoc
    # places this docstring; parsed on its own, docutils cannot see it.
    "torch.distributed.tensor.DTensor": 'Unknown target name: "create_dtensor"',
}
# "Usage Patterns:" over indented code without "::": a definition list to docutils, a code block
# to the converter (the lead-in rule for docstrings that forget the "::").
CODE_DOCUTILS_READS_AS_PROSE = {"torch.distributed.checkpoint.staging.DefaultStager"}


class _DocumentingHook:
    """The page's autodoc hook: documents each directive against the installed torch, renders nothing."""

    def __init__(self, page: str) -> None:
        self.page = page
        self.current: str | None = None

    def __call__(self, directive: str, argument: str, options: dict[str, str], line: int, level: int) -> str:
        from fsdp_skill.apidoc import docstrings

        if directive == "currentmodule":
            self.current = argument.strip() or None
        else:
            docstrings.document(directive, argument, options=options, current_module=self.current,
                                origin=self.page, line=line, warn=lambda *a: None)
        return ""


def _docstring_pieces(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(object, RST) of every docstring piece the build converts for the upstream pages' autodoc directives."""
    from fsdp_skill.apidoc import docstrings
    from fsdp_skill.convert.myst import myst_to_markdown

    pieces: list[tuple[str, str]] = []
    convert = docstrings.rst_to_markdown

    def recording(text: str, **kwargs: object) -> str:
        pieces.append((str(kwargs["origin"]), text))
        return convert(text, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(docstrings, "rst_to_markdown", recording)
    for page in sorted(UPSTREAM.rglob("*.md")):
        myst_to_markdown(page.read_text(encoding="utf-8"), origin=page.name, warn=lambda *a: None,
                         autodoc=_DocumentingHook(page.name))
    return list(dict.fromkeys(pieces))


@pytest.mark.torch
def test_docstring_rst_parses_in_docutils_and_agrees_with_what_the_converter_emits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pieces = _docstring_pieces(monkeypatch)
    assert len(pieces) >= 900
    errors: dict[str, list[str]] = {}
    compared = {"headings": 0, "code blocks": 0, "tables": 0}
    for name, text in pieces:
        parsed = parse(text, name)
        if parsed.errors:
            errors[name] = parsed.errors
        emitted = _emitted(Source(name, text))
        assert emitted.headings == headings(parsed.doctree), name
        if name not in CODE_DOCUTILS_READS_AS_PROSE:
            assert emitted.code == [_normalized(c) for c in code_blocks(parsed.doctree)], name
        assert len(emitted.tables) == len(tables(parsed.doctree)), name
        compared["headings"] += len(emitted.headings)
        compared["code blocks"] += len(emitted.code)
        compared["tables"] += len(emitted.tables)
    assert sorted(errors) == sorted(KNOWN_DOCSTRING_ERRORS)
    for name, known in KNOWN_DOCSTRING_ERRORS.items():
        assert len(errors[name]) == 1 and known in errors[name][0]
    print(
        f"docutils oracle, docstrings: {len(pieces)} pieces, {sum(map(len, errors.values()))} errors (known), "
        f"{compared}"
    )

"""Catalog → search documents: one per section, API entry, example, pattern and skill-page part.

Each document carries the columns the FTS index weighs differently (title, symbol, keys, body and
the identifier parts of each) and its body cut into whole markdown blocks for snippets. A section
that merely renders an API entry (same reference and anchor) is left out: the API document is the
richer copy of the same text, and two results for one thing waste the model's tokens.
"""

from __future__ import annotations

import io
import json
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from fsdp_skill.core.catalog import ApiEntry, Catalog, Example, Pattern, Section, SkillDoc
from fsdp_skill.search.anchors import anchor_texts
from fsdp_skill.search.identifiers import body_identifier_parts, identifier_parts, is_identifier
from fsdp_skill.search.snippets import Block, code_block, markdown_blocks
from fsdp_skill.search.vocabulary import vocabulary


@dataclass
class Document:
    kind: str  # section | api | example | pattern | skill | release
    id: str
    title: str
    symbol: str | None
    reference: str | None
    anchor: str | None
    url: str | None
    blocks: list[Block]
    symbol_text: str = ""  # names: qualified, short, aliases (heavily weighted)
    keys: str = ""  # breadcrumb, summary, tags (medium weight)
    body: str = ""  # the full text, code included
    payload: dict = field(default_factory=dict)  # the catalog record, for get_api / get_example / …
    anchors: str = ""  # what other documents say about this API (search/anchors.py), lower weight
    params: str = ""  # an API entry's parameters: names, their parts, descriptions (below the summary)
    messages: str = ""  # the error and warning messages torch raises in it, or that a pitfall quotes
    # An API entry's public parameters, one (name with its parts, description) each: rows of params_fts.
    parameters: tuple[tuple[str, str], ...] = ()
    prior: float = 1.0  # OUTPUT_PRIOR for a section of bare command output, SUPERSEDED_PRIOR (API), else 1

    def fts_row(self) -> tuple[str, ...]:
        """Column values for docs_fts: title, symbol, keys (+ parts of title and names), body, body parts,
        anchors, params (+ their parts), messages (also in messages_fts: index.py)."""
        head = f"{self.title} {self.symbol_text}"
        return (
            self.title,
            self.symbol_text,
            self.keys + " " + body_identifier_parts(head),
            self.body,
            body_identifier_parts(self.body),
            self.anchors,
            self.params + " " + body_identifier_parts(self.params) if self.params else "",
            self.messages,
        )

    def blocks_json(self) -> str:
        return json.dumps([[kind, text] for kind, text in self.blocks], ensure_ascii=False, separators=(",", ":"))

    def payload_json(self) -> str:
        return json.dumps(self.payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def short_name(qualified_name: str) -> str:
    return qualified_name.rsplit(".", 1)[-1]


def api_names(entry: ApiEntry) -> list[str]:
    """Every spelling that should find this entry: qualified, short, aliases, dist.X."""
    names = [entry.qualified_name, short_name(entry.qualified_name), *entry.aliases]
    if entry.qualified_name.startswith("torch.distributed."):
        names.append("dist." + entry.qualified_name[len("torch.distributed.") :])
    return list(dict.fromkeys(n for n in names if n))


def abbreviations_of(qualified_name: str) -> list[str]:
    """The abbreviations users call an entry by (FSDP2 → fully_shard), indexed as its names: the entry's
    own text rarely spells them, so without this "… with FSDP2" cannot find the API it abbreviates.
    Lowercase `zero` is left out: it is the English word far more often than ZeRO."""
    vocab = vocabulary()
    return sorted(
        word
        for word, target in vocab.symbol_aliases.items()
        if target == qualified_name and word not in vocab.case_sensitive
    )


# A section whose only content is what a command printed (a flight-recorder dump, expected output):
# it matches a question's words but does not say what to do, so it ranks below the prose that does.
OUTPUT_PRIOR = 0.5
# An API entry a user should not reach for first: deprecated (nn.functional's collectives), or under a
# private module (`torch.distributed._functional_collectives.all_reduce` next to `dist.all_reduce`).
# It still ranks first when the query names it (the symbol boost); it no longer outranks the current,
# public API on the words they share. Also an entry of a variant module (vocabulary.toml [[variant]]: the
# autograd collectives of torch.distributed.nn.functional), unless the query asks for the variant.
SUPERSEDED_PRIOR = 0.5
_OUTPUT_LANGUAGES = frozenset({"", "text", "console", "output", "log", "none"})
_MIN_PROSE_CHARS = 40  # "Output:" or a one-line caption is not an explanation
_GENERATED_HEADER = "Generated by `fsdp-skill regenerate`"
_CONTENTS_LINE = re.compile(r"^\s*(?:[-*+]\s+)?\[[^\]]*\]\(#[^)]*\)\s*$")


def is_boilerplate(block: Block) -> bool:
    """The reference files' generated header, their sources table and their contents lists: text a
    search result should never spend its snippet on."""
    kind, text = block
    if kind != "text":
        return False
    stripped = text.strip()
    lines = [line for line in stripped.splitlines() if line.strip()]
    return (
        _GENERATED_HEADER in stripped
        or stripped.startswith("| Repository | File")
        or stripped in ("**Contents**", "Contents", "## Contents")
        or bool(lines)
        and all(_CONTENTS_LINE.match(line) for line in lines)
    )


def is_output_only(blocks: list[Block]) -> bool:
    """True when a section's code is all command output and its prose is at most a caption."""
    code = [text for kind, text in blocks if kind == "code"]
    prose = sum(len(text) for kind, text in blocks if kind == "text" and not text.lstrip().startswith("#"))
    return bool(code) and prose < _MIN_PROSE_CHARS and all(_fence_language(text) in _OUTPUT_LANGUAGES for text in code)


def _fence_language(code: str) -> str:
    first = code.split("\n", 1)[0].strip().lstrip("`~").strip().lower()
    return first.split()[0] if first else ""


def _section_document(section: Section) -> Document:
    blocks = [b for b in markdown_blocks(section.markdown, skip_heading=section.title) if not is_boilerplate(b)]
    symbol = section.anchor if is_identifier(section.anchor) and "." in section.anchor else None
    return Document(
        kind="section",
        id=section.id,
        title=section.title,
        symbol=None,
        reference=section.reference,
        anchor=section.anchor,
        url=section.url,
        blocks=blocks,
        symbol_text=symbol or "",
        keys=" ".join(section.breadcrumb),
        body="\n\n".join(text for _, text in blocks),
        payload={"level": section.level, "line": section.line, "breadcrumb": section.breadcrumb},
        prior=OUTPUT_PRIOR if is_output_only(blocks) else 1.0,
    )


def _api_text_blocks(entry: ApiEntry) -> list[Block]:
    blocks: list[Block] = []
    if entry.deprecation:
        blocks.append(("text", f"Deprecated: {entry.deprecation.text(quote='`')}"))
    if entry.signature:
        blocks.append(code_block(entry.signature))
    if entry.summary:
        blocks.append(("text", entry.summary))
    if entry.description:
        described = markdown_blocks(entry.description)
        # Docstring bodies often open with the summary sentence again; don't spend snippet space twice.
        if described and entry.summary and _same_text(described[0][1], entry.summary):
            described = described[1:]
        elif described and entry.summary and _same_text(described[0][1][: len(entry.summary)], entry.summary):
            kind, text = described[0]
            described[0] = (kind, text[len(entry.summary) :].lstrip())
        blocks.extend(block for block in described if block[1].strip())
    if entry.parameters:
        blocks.append(("text", f"{PARAMETERS_LEAD}{parameter_text(entry)}"))
    if entry.returns:
        blocks.append(("text", f"Returns: {entry.returns}"))
    for note in entry.notes:
        blocks.extend(markdown_blocks(note))
    return blocks


PARAMETERS_LEAD = "Parameters: "


def parameter_text(entry: ApiEntry) -> str:
    """`name` (type): description; … for each parameter: the snippet line, and the entry's params field."""
    return "; ".join(
        f"`{p.name}`"
        + (f" ({p.type})" if p.type else "")
        + (f": {p.description.rstrip('.')}" if p.description else "")
        for p in entry.parameters
    )


def parameter_rows(entry: ApiEntry) -> tuple[tuple[str, str], ...]:
    """(name and its parts, description) of each public parameter (a leading `_` is torch's own): a short
    row of its own, so a question about what one parameter does meets it without the length of its entry."""
    return tuple(
        (" ".join([p.name, *identifier_parts(p.name)]), p.description or "")
        for p in entry.parameters
        if not p.name.startswith("_")
    )


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()).strip("`*_ ") == " ".join(b.split()).strip("`*_ ")


def _api_document(entry: ApiEntry, anchors: list[str], history: str | None = None) -> Document:
    blocks = _api_text_blocks(entry)
    # The parameters stay in the body too, and their own field (weight 0.5, index.COLUMN_WEIGHTS) adds a
    # little for a question that names a parameter or says what it does.
    body = "\n\n".join(text for _, text in blocks)
    if history:
        # A block for the snippet, last; matched in the anchors column (weight 0.5), not the body: in the body
        # its words lengthened every entry and moved the dev sets (held-out MRR 0.920 -> 0.899, issue 31).
        blocks.append(("text", history))
        anchors = [*anchors, history]
    return Document(
        kind="api",
        id=entry.qualified_name,
        title=entry.qualified_name,
        symbol=entry.qualified_name,
        reference=entry.reference,
        anchor=entry.anchor,
        url=entry.url,
        blocks=blocks,
        symbol_text=" ".join([*api_names(entry), *abbreviations_of(entry.qualified_name)]),
        keys=entry.summary,
        body=body,
        payload=entry.model_dump(mode="json"),
        anchors="\n".join(anchors),
        params=parameter_text(entry),
        parameters=parameter_rows(entry),
        messages="\n".join(entry.messages),
        prior=SUPERSEDED_PRIOR if is_superseded(entry) else 1.0,
    )


def is_superseded(entry: ApiEntry) -> bool:
    """Deprecated, under a private module, or in a variant module (see SUPERSEDED_PRIOR)."""
    variant_prefixes = tuple(prefix for variant in vocabulary().variants for prefix in variant.prefixes)
    return (
        entry.deprecation is not None
        or "._" in entry.qualified_name
        or entry.qualified_name.startswith(variant_prefixes)
    )


def _example_document(example: Example, api_by_name: dict[str, ApiEntry]) -> Document:
    number = example.id.rsplit("#", 1)[-1]
    entry = api_by_name.get(example.symbol)
    return Document(
        kind="example",
        id=example.id,
        title=f"Example {number} of {example.symbol}",
        symbol=example.symbol,
        reference=example.reference,
        anchor=example.anchor,
        url=entry.url if entry else None,
        blocks=[code_block(example.code)],
        symbol_text=" ".join([example.symbol, short_name(example.symbol)]),
        keys=entry.summary if entry else "",
        body=example.code,
        payload=example.model_dump(mode="json"),
    )


def _pattern_document(pattern: Pattern, root: Path) -> Document:
    source = read_pattern_source(pattern, root) or ""
    prose, code_words = split_pattern_source(source, Path(pattern.file).suffix)
    if " ".join(pattern.summary.split()) not in " ".join(prose.split()):
        prose = f"{pattern.summary}\n{prose}"  # the summary is body text (usually the docstring's opening)
    blocks: list[Block] = [("text", pattern.summary)]
    if pattern.launch:
        blocks.append(code_block(pattern.launch, "bash"))
    return Document(
        kind="pattern",
        id=pattern.name,
        title=pattern.title,
        symbol=None,
        reference=pattern.file,
        anchor=None,
        url=None,
        blocks=blocks,
        symbol_text=pattern.name.replace("-", "_"),
        # Only the tags are keys: the summary is a paragraph, and weighted like an API entry's one-line
        # summary it made every recipe match any question sharing a word with it.
        keys=" ".join(pattern.tags),
        body=prose + "\n\n" + " ".join(code_words),
        payload=pattern.model_dump(mode="json"),
    )


def _skill_document(doc: SkillDoc) -> Document:
    """A pitfall, decision table, recipe or tuning section: its text as the body, the claim checks it
    links (claims and docstrings: the behaviour in other words, the errors they provoke) at the anchors'
    weight, below the page's own words."""
    blocks = markdown_blocks(doc.markdown)
    return Document(
        kind="skill",
        id=doc.id,
        title=doc.title,
        symbol=None,
        reference=doc.file,
        anchor=doc.anchor,
        url=None,
        blocks=blocks,
        keys=doc.section,
        body="\n\n".join(text for _, text in blocks),
        payload=doc.model_dump(mode="json"),
        anchors=doc.check_text,
        messages="\n".join(doc.messages),
    )


def split_pattern_source(source: str, suffix: str) -> tuple[str, list[str]]:
    """(prose, distinct code words) of a pattern file: its docstring and comments in full, and each word
    of its code once, in order of first use.

    Why not the raw source: a pattern is 3-10× longer than the average document, mostly code that
    repeats the same names, and bm25's length normalisation then buries the curated, task-level
    answer under short sections that mention the query words once. The prose is the explanation a
    task question matches; the code still contributes every API it calls (once is enough to match).
    """
    prose: list[str] = []
    code: list[str] = []
    if suffix == ".py":
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        except (tokenize.TokenError, SyntaxError):
            tokens = []
        if tokens:
            docstring_seen = False
            for token in tokens:
                if token.type == tokenize.COMMENT:
                    prose.append(token.string.lstrip("#").strip())
                elif token.type == tokenize.STRING and not docstring_seen and not code:
                    docstring_seen = True  # the module docstring: the first statement
                    prose.append(_string_text(token.string))
                elif token.type in _CODE_TOKENS:
                    code.append(token.string)
        else:
            code.append(source)
    else:
        for line in source.splitlines():
            stripped = line.strip()
            if stripped.startswith("#!"):
                continue
            if stripped.startswith("#"):
                prose.append(stripped.lstrip("#").strip())
            else:
                body, _, comment = line.partition(" # ")
                code.append(body)
                if comment:
                    prose.append(comment.strip())
    words: dict[str, None] = {}
    for chunk in code:
        for match in _CODE_WORD.finditer(chunk):
            words.setdefault(match.group(0), None)
    return "\n".join(line for line in _without_mutant_lines(prose) if line), list(words)


# A mutant line of a pattern file's header (`mutant: name: `old` -> `new``; the format is verify/patterns.py's).
_MUTANT_LINE = re.compile(r"mutant: \S")


def _without_mutant_lines(prose: list[str]) -> list[str]:
    """The prose without the header's mutant lines: they describe the claim made *false* ("seed per rank",
    "one torchrun per GPU"), so as words of the recipe they made it match questions about what it warns
    against. The other header lines stay: measured on dev / held-out / dev2 (issue 21), dropping them too
    (the title and tags are also the document's title and keys) lowered dev semantic MRR 0.896 -> 0.883."""
    kept = []
    for chunk in prose:
        lines = chunk.split("\n")
        kept.append("\n".join(line for line in lines if not _MUTANT_LINE.match(line.strip())))
    return kept


# Names and the text of string literals (f-string text is its own token type from Python 3.12).
_CODE_TOKENS = frozenset({tokenize.NAME, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)})
# Identifiers and dotted paths in code (dist.all_reduce, set_requires_gradient_sync, NCCL_DEBUG).
_CODE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def _string_text(literal: str) -> str:
    """The text of a Python string literal token, without its prefix and quotes."""
    body = literal.lstrip("rRbBuUfF")
    quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
    return body[len(quote) : len(body) - len(quote)] if quote else body


def read_pattern_source(pattern: Pattern, root: Path) -> str | None:
    """The pattern's file text, or None if missing; only files inside the repository are read."""
    path = (root / pattern.file).resolve()
    if not path.is_relative_to(root.resolve()) or not path.is_file():
        return None
    return path.read_text(encoding="utf-8")


def catalog_documents(catalog: Catalog, root: Path, history: dict[str, str] | None = None) -> list[Document]:
    """All documents in a fixed order (catalog order within each kind), for a reproducible index. `history`:
    qualified name → the entry's "History: …" line (search.releases)."""
    history = history or {}
    api_by_name = {entry.qualified_name: entry for entry in catalog.api}
    api_anchors = {(entry.reference, entry.anchor) for entry in catalog.api}
    docs: list[Document] = []
    docs.extend(_section_document(s) for s in catalog.sections if (s.reference, s.anchor) not in api_anchors)
    anchors = anchor_texts(catalog)
    docs.extend(_api_document(entry, anchors.get(entry.qualified_name, []), history.get(entry.qualified_name))
                for entry in catalog.api)
    docs.extend(_example_document(example, api_by_name) for example in catalog.examples)
    docs.extend(_pattern_document(pattern, root) for pattern in catalog.patterns)
    docs.extend(_skill_document(doc) for doc in catalog.skill)
    return docs


def glued_names(name: str) -> list[str]:
    """Glued spellings of a name's identifier parts: all_reduce → allreduce."""
    parts = identifier_parts(short_name(name))
    return [parts[-1]] if len(parts) > 1 else []

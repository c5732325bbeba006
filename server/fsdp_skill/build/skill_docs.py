"""SKILL.md and assets/tuning.md as search documents: each pitfall, each decision table, the core recipe,
each tuning section, cut from whatever the files hold when `regenerate` runs.

The skill's own pages are its best answers ("loss NaN after meta init" is pitfall 3), so they are
documents of kind `skill` beside the generated references. Nothing here knows today's text: the files
are parsed once with markdown-it (front matter skipped) and each document is the source sliced by the
tokens' line map, under these rules, per `##` section:

- a section holding a numbered list is one document per item ("Pitfalls" → `pitfall-1`, `pitfall-2`, …:
  the section's slug, singular, and the item's number as the list counts it);
- a section holding two or more tables is one document per table, with the prose up to the next table
  (`decide-first-situation`, `decide-first-backend`: the section's slug and the table's first header cell);
- any other section is one document (`core-fsdp2-recipe`: GitHub's slug of its heading);
- a section whose tables only list links to other files (the patterns and references tables) is left
  out: each row's target is a document of its own.

A document that links claim checks (`assets/checks/*.py`) carries each check's claim and docstring: the
check explains the behaviour in other words (and quotes the error it provokes), which is what a symptom
or a pasted message matches.
"""

from __future__ import annotations

import re
from pathlib import Path

from markdown_it.token import Token

from fsdp_skill.build.render import github_slug
from fsdp_skill.convert.markdown import plain_text
from fsdp_skill.core.catalog import SkillDoc
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.markdown import markdown_parser
from fsdp_skill.core.vocabulary import SKILL_PAGES
from fsdp_skill.verify.patterns import PatternHeaderError, header_entries

__all__ = ["SKILL_FILES", "skill_documents"]

# The hand-written pages that become documents, relative to the repository root.
SKILL_FILES = SKILL_PAGES
_CHECK_LINK = re.compile(r"\]\(((?:\.\./)*(?:assets/)?checks/[\w.-]+\.py)\)")
_HTML_ID = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)


class SkillDocError(UserError):
    """A skill page cannot be cut into documents (two parts claim one anchor)."""


def skill_documents(root: Path, texts: dict[str, str] | None = None) -> list[SkillDoc]:
    """The documents of every file in SKILL_FILES that exists, in file order. `texts` overrides a file's
    text (regenerate passes SKILL.md with its what-changed block as it will be written)."""
    out: list[SkillDoc] = []
    for name in SKILL_FILES:
        text = (texts or {}).get(name)
        if text is None:
            path = root / name
            if not path.is_file():
                continue
            text = path.read_text(encoding="utf-8")
        out.extend(file_documents(name, text, root))
    return out


def file_documents(name: str, text: str, root: Path) -> list[SkillDoc]:
    """One file's documents (see the module docstring for the rules)."""
    lines = text.splitlines(keepends=True)
    # Front matter is YAML, not markdown: blank it (line numbers kept) so its `---` is no heading rule.
    match = _FRONT_MATTER.match(text)
    body = "\n" * match.group(0).count("\n") + text[match.end() :] if match else text
    tokens = markdown_parser().parse(body)
    docs: list[SkillDoc] = []
    for title, start, end, inner in _sections(tokens, len(lines)):
        docs.extend(_section_documents(name, title, start, end, inner, lines, root))
    seen: dict[str, int] = {}
    for doc in docs:
        if doc.anchor in seen:
            raise SkillDocError(
                f"{name}:{doc.line}: anchor {doc.anchor!r} is also the anchor of line {seen[doc.anchor]}: "
                "give one of the headings another title"
            )
        seen[doc.anchor] = doc.line
    return docs


def _sections(tokens: list[Token], n_lines: int) -> list[tuple[str, int, int, list[Token]]]:
    """(title, first line, end line, tokens of the body) of each `##` section: up to the next heading of
    level 1 or 2 (a `###` inside stays part of it)."""
    heads = [(i, int(t.tag[1])) for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag in ("h1", "h2")]
    out = []
    for position, (i, level) in enumerate(heads):
        if level != 2:
            continue
        stop = heads[position + 1][0] if position + 1 < len(heads) else len(tokens)
        end = _line(tokens[stop]) if stop < len(tokens) else n_lines
        out.append((plain_text(tokens[i + 1]), _line(tokens[i]), end, tokens[i + 3 : stop]))
    return out


def _line(token: Token) -> int:
    """The 0-based first line of a block token (every block opening token has a map)."""
    return token.map[0] if token.map else 0


def _section_documents(
    name: str, title: str, start: int, end: int, body: list[Token], lines: list[str], root: Path
) -> list[SkillDoc]:
    slug = github_slug(title) or "section"
    lists = [t for t in body if t.level == 0 and t.type == "ordered_list_open"]
    tables = [t for t in body if t.level == 0 and t.type == "table_open"]
    if tables and not lists and all(_links_only(_inside(body, table)) for table in tables):
        return []
    if lists:
        return [
            # "Pitfalls" → pitfall-3, "Pitfall 3: Meta init without real init".
            _doc(name, f"{slug.removesuffix('s')}-{number}", f"{title.removesuffix('s')} {number}: {heading}", title,
                 span, lines, root)
            for numbered in lists
            for number, heading, span in _list_items(body, numbered, lines)
        ]
    if len(tables) >= 2:
        cuts = [_line(t) for t in tables] + [end]
        docs = []
        for position, table in enumerate(tables):
            # The prose before the first table introduces them all: it goes with the first.
            first = start + 1 if position == 0 else cuts[position]
            header = _header_cells(_inside(body, table))
            anchor = f"{slug}-{github_slug(header[0]) if header else position + 1}"
            label = f"{title}: {' / '.join(header)}"
            docs.append(_doc(name, anchor, label, title, (first, cuts[position + 1]), lines, root))
        return docs
    return [_doc(name, slug, title, title, (start + 1, end), lines, root)]


def _inside(body: list[Token], opening: Token) -> list[Token]:
    """The tokens of one container, its opening to its closing (markdown-it's stream is flat: the
    closing is the next token at the same level)."""
    first = next(i for i, t in enumerate(body) if t is opening)
    for i in range(first + 1, len(body)):
        if body[i].level == opening.level and body[i].nesting == -1:
            return body[first : i + 1]
    return body[first:]


def _list_items(body: list[Token], opening: Token, lines: list[str]) -> list[tuple[int, str, tuple[int, int]]]:
    """(number, title, line span) of each item of a top-level numbered list. The span runs to the next
    item (or the list's end), so a continuation paragraph stays with its item."""
    first = int(opening.attrs.get("start", 1) or 1)
    items = [t for t in _inside(body, opening) if t.type == "list_item_open" and t.level == opening.level + 1]
    list_end = opening.map[1] if opening.map else len(lines)
    spans = []
    for position, item in enumerate(items):
        stop = _line(items[position + 1]) if position + 1 < len(items) else list_end
        text = "".join(lines[_line(item) : stop])
        spans.append((first + position, _item_title(text), (_line(item), stop)))
    return spans


def _item_title(markdown: str) -> str:
    """An item's bold lead ("**Optimizer built before `fully_shard`**"), else its first words."""
    bold = re.search(r"\*\*(.+?)\*\*", markdown)
    text = bold.group(1) if bold else re.sub(r"^\s*\d+[.)]\s*", "", markdown).split("\n", 1)[0][:80]
    return text.replace("`", "").strip().rstrip(":.")


def _links_only(table: list[Token]) -> bool:
    """True when every body row of a table starts with a link (a catalogue of other files)."""
    rows, linked, in_body, cell_seen = 0, 0, False, False
    for token in table:
        if token.type == "tbody_open":
            in_body = True
        elif in_body and token.type == "tr_open":
            rows, cell_seen = rows + 1, False
        elif in_body and token.type == "inline" and not cell_seen:
            cell_seen = True
            linked += any(child.type == "link_open" for child in token.children or [])
    return rows > 0 and linked == rows


def _header_cells(table: list[Token]) -> list[str]:
    cells: list[str] = []
    for token in table:
        if token.type == "thead_close":
            break
        if token.type == "inline":
            cells.append(plain_text(token))
    return [c for c in cells if c]


def _doc(
    name: str, anchor: str, title: str, section: str, span: tuple[int, int], lines: list[str], root: Path
) -> SkillDoc:
    first = span[0]
    while first < span[1] - 1 and not lines[first].strip():
        first += 1  # the blank line under a heading is not where the part starts
    markdown = "".join(lines[first : span[1]]).strip("\n") + "\n"
    explicit = _HTML_ID.search(markdown)
    anchor = explicit.group(1) if explicit else anchor
    checks = list(dict.fromkeys(_check_path(name, link) for link in _CHECK_LINK.findall(markdown)))
    return SkillDoc(
        id=f"{name}#{anchor}",
        file=name,
        anchor=anchor,
        title=title,
        section=section,
        line=first + 1,
        markdown=markdown,
        checks=checks,
        check_text="\n\n".join(text for text in (_check_text(root / path) for path in checks) if text),
    )


def _check_path(name: str, link: str) -> str:
    """A check link relative to the repository root: `checks/x.py` in assets/tuning.md → assets/checks/x.py."""
    base = Path(name).parent
    parts = (base / link).parts
    resolved: list[str] = []
    for part in parts:
        if part == "..":
            if resolved:
                resolved.pop()
        elif part != ".":
            resolved.append(part)
    return "/".join(resolved)


def _check_text(path: Path) -> str:
    """A claim check's claim and the prose of its header docstring (empty when it is missing)."""
    if not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8")
    try:
        entries, _, prose = header_entries(path, text)
    except PatternHeaderError:
        return ""
    claim = next((value for _, key, value in entries if key == "claim"), "")
    return "\n".join(part for part in (claim, prose.strip()) if part)

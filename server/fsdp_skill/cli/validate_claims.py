"""The claim-check part of `fsdp-skill validate`: every numbered pitfall in SKILL.md links its check.

A pitfall is an item of the ordered list under the `## Pitfalls` heading. Each must link at least one
script under `assets/checks/` whose header parses (`fsdp_skill.verify.claims`); a link to a check that
does not exist is reported by the link check already, a check with a bad header here. Every check file
is read too, linked or not, so a malformed header fails validate before it fails a verify run, and each
must declare at least one mutant that applies (`fsdp_skill.verify.mutants`): a check that could not fail
proves nothing.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

from markdown_it.token import Token

from fsdp_skill.build.render import plain_text
from fsdp_skill.core.markdown import markdown_parser
from fsdp_skill.verify.claims import ClaimCheck, check_files, checks_dir, read_check
from fsdp_skill.verify.mutants import mutant_problems
from fsdp_skill.verify.patterns import PatternHeaderError

PITFALLS_HEADING = "Pitfalls"
SKILL_FILE = "SKILL.md"


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def read_checks(root: Path) -> tuple[dict[Path, ClaimCheck], list[tuple[str, int, str]]]:
    """Every check under assets/checks/ by resolved path, and (file, line, message) for each bad one."""
    checks: dict[Path, ClaimCheck] = {}
    problems: list[tuple[str, int, str]] = []
    names: dict[str, Path] = {}
    for path in check_files(checks_dir(root)):
        try:
            check = read_check(path)
        except PatternHeaderError as exc:
            problems.append((_relative(path, root), exc.line, exc.message))
            continue
        if check.name in names:
            problems.append(
                (
                    _relative(path, root),
                    2,
                    f"check name {check.name!r} is already used by {_relative(names[check.name], root)}",
                )
            )
            continue
        names[check.name] = path
        checks[path.resolve()] = check
        problems.extend((_relative(path, root), line, message) for line, message in mutant_problems(path))
    return checks, problems


def pitfall_items(body: str) -> list[tuple[int, int, list[str]]]:
    """(pitfall number, 0-based body line, link targets) of each item of the list under ## Pitfalls."""
    tokens = markdown_parser().parse(body)
    items: list[tuple[int, int, list[str]]] = []
    in_section = False
    depth = 0
    current: tuple[int, list[str]] | None = None
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            if token.tag == "h2":
                in_section = plain_text(tokens[index + 1]).strip() == PITFALLS_HEADING
            continue
        if not in_section:
            continue
        if token.type == "ordered_list_open":
            depth += 1
        elif token.type == "ordered_list_close":
            depth -= 1
        elif token.type == "list_item_open" and depth == 1:
            current = ((token.map or (0, 0))[0], [])
        elif token.type == "list_item_close" and depth == 1 and current is not None:
            items.append((len(items) + 1, current[0], current[1]))
            current = None
        elif token.type == "inline" and current is not None:
            current[1].extend(_hrefs(token))
    return items


def _hrefs(token: Token) -> list[str]:
    return [
        str(child.attrGet("href"))
        for child in token.children or []
        if child.type == "link_open" and child.attrGet("href")
    ]


def check_pitfall_links(body: str, offset: int, root: Path) -> tuple[list[tuple[str, int, str]], int]:
    """Problems (file, line, message) and the number of claim checks read."""
    checks, problems = read_checks(root)
    folder = checks_dir(root).resolve()
    for number, line, targets in pitfall_items(body):
        linked = []
        for target in targets:
            parts = urlsplit(target)
            if parts.scheme or not parts.path:
                continue
            path = (root / unquote(parts.path)).resolve()
            if path.parent == folder and path in checks:
                linked.append(checks[path])
        if not linked:
            message = (
                f"pitfall {number} links no check: add a script to assets/checks/ that demonstrates it "
                "and link it, e.g. ([check](assets/checks/NAME.py))"
            )
            problems.append((SKILL_FILE, offset + line, message))
    return problems, len(check_files(checks_dir(root)))

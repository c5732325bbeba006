"""`fsdp-skill validate`: check that the skill an agent loads is well-formed.

Checks, each reported as one `file:line: problem` line:
- SKILL.md frontmatter under the Agent Skills specification (agentskills.io/specification): only the
  keys name, description, license, compatibility, metadata, allowed-tools; `name` is the skill's
  folder name, lowercase letters/digits/single hyphens, at most 64 characters; `description` is
  1..1024 characters in the third person; `compatibility` at most 500; `metadata` maps strings to
  strings. The body stays within 500 lines and 5,000 tokens (characters / 4), both printed.
- Every relative link in SKILL.md, references/*.md and assets/*.md resolves to a file inside the skill, and a
  `file.md#anchor` to a heading slug (GitHub's rule) or an `<a id>`/`<a name>` of that file.
- Every ```python block of SKILL.md parses (ast), and so does every pattern; shell templates pass
  `bash -n`; every pattern has a valid metadata header and a unique name.
- Every pattern's `min_torch:` line (right after `name:`) is the first release of the release matrix from which it
  passed on every release run, once the matrix ran it on every declared release; before that, and for a pattern the
  matrix only skipped, the oldest torch the API timeline gives for the
  names, modules and keyword arguments it uses (build.pattern_torch).
- Every pattern and claim check declares at least one mutant (`mutant: NAME: `OLD` -> `NEW``) that applies to
  its file and, for Python, still parses (`fsdp_skill.verify.mutants`).
- SKILL.md lists every pattern, names each by its header name, and names no pattern that is not there.
- Every numbered pitfall links a claim check in assets/checks/ whose header parses (`validate_claims`).
- The pattern table's "Ran on" column is the range the release matrix has each pattern passing on
  (`validate_releases`): never a range nobody ran.

Markdown is parsed once with markdown-it-py; links, fences and headings are read from its tokens, and
line numbers come from the tokens' line maps.
"""

from __future__ import annotations

import argparse
import ast
import math
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml
from markdown_it.token import Token

from fsdp_skill.build.render import github_slug, plain_text
from fsdp_skill.cli.validate_claims import check_pitfall_links
from fsdp_skill.cli.validate_releases import pattern_range_problems
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.markdown import markdown_parser
from fsdp_skill.core.paths import patterns_dir, references_dir, repo_root
from fsdp_skill.core.scratch import LEFTOVER_ADVICE, data_leftovers
from fsdp_skill.verify.mutants import mutant_problems
from fsdp_skill.verify.patterns import (
    PatternHeader,
    PatternHeaderError,
    pattern_files,
    read_header,
)
from fsdp_skill.verify.releases import MatrixError

SKILL_NAME = "pytorch-fsdp"  # the folder the skill is installed as (e.g. ~/.claude/skills/pytorch-fsdp)
ALLOWED_KEYS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_COMPATIBILITY_CHARS = 500
MAX_BODY_LINES = 500
MAX_BODY_TOKENS = 5000
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# First/second person in a description reads as the agent talking; the spec asks for the third person.
PERSON_RE = re.compile(r"\b(I|I'm|me|my|we|our|us|you|your)\b", re.IGNORECASE)
HTML_ID_RE = re.compile(r"""<a\s[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
# A pattern named in prose as a call: get_pattern("fsdp2-training") (quoted: `get_pattern(name)` is a signature).
GET_PATTERN_RE = re.compile(r"""get_pattern\(\s*(?:name\s*=\s*)?["']([\w-]+)["']\s*\)""")
SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)
    body_lines: int = 0
    body_tokens: int = 0
    links: int = 0
    anchors: int = 0
    python_blocks: int = 0
    patterns: int = 0
    claim_checks: int = 0

    def add(self, file: str, line: int, message: str) -> None:
        self.problems.append(Problem(file, line, message))


# ------------------------------------------------------------------------------------ frontmatter


def split_frontmatter(text: str) -> tuple[str, int, str, int] | None:
    """(yaml text, its first line, body, the body's first line), 1-based; None without frontmatter."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return None
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            return "\n".join(lines[1:index]), 2, "\n".join(lines[index + 1 :]), index + 2
    return None


def _key_lines(yaml_text: str, first_line: int) -> dict[str, int]:
    """Top-level key -> 1-based file line (from the YAML node marks)."""
    node = yaml.compose(yaml_text, Loader=yaml.SafeLoader)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(key.value): first_line + key.start_mark.line for key, _ in node.value}


def check_frontmatter(yaml_text: str, first_line: int, report: Report, file: str = SKILL_FILE) -> dict[str, Any]:
    parsed = _parse_frontmatter(yaml_text, first_line, report, file)
    if parsed is None:
        return {}
    data, lines = parsed

    def at(key: str) -> int:
        return lines.get(key, first_line)

    for key in data:
        if key not in ALLOWED_KEYS:
            report.add(
                file, at(str(key)),
                f"frontmatter key {key!r} is not allowed by the Agent Skills spec "
                f"(allowed: {', '.join(ALLOWED_KEYS)}): move it under 'metadata'",
            )
    _check_name(data.get("name"), at("name"), report, file)
    _check_description(data.get("description"), at("description"), report, file)
    _check_optional_fields(data, at, report, file)
    return data


def _parse_frontmatter(
    yaml_text: str, first_line: int, report: Report, file: str
) -> tuple[dict[str, Any], dict[str, int]] | None:
    """The frontmatter mapping and each key's line, or None (reported) when it is not a YAML mapping."""
    try:
        data = yaml.safe_load(yaml_text)
        lines = _key_lines(yaml_text, first_line)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = first_line + (mark.line if mark else 0)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        report.add(file, line, f"frontmatter is not valid YAML ({problem}): quote values that contain ': ' or '#'")
        return None
    if not isinstance(data, dict):
        report.add(file, first_line, "frontmatter must be a YAML mapping of keys to values")
        return None
    return data, lines


def _text_field(value: Any, key: str, what: str, limit: int, line: int, report: Report, file: str) -> str | None:
    """A required string field within its length limit: the string, or None when it is missing (reported)."""
    if not isinstance(value, str) or not value.strip():
        report.add(file, line, f"frontmatter needs '{key}': {what}")
        return None
    if len(value) > limit:
        report.add(file, line, f"{key} is {len(value)} characters, the limit is {limit}")
    return value


def _check_name(value: Any, line: int, report: Report, file: str) -> None:
    name = _text_field(value, "name", "a non-empty string", MAX_NAME_CHARS, line, report, file)
    if name is None:
        return
    if not NAME_RE.match(name):
        report.add(
            file,
            line,
            f"name {name!r} must be lowercase letters and digits joined by single hyphens, "
            "no leading/trailing hyphen",
        )
    elif name != SKILL_NAME:
        report.add(file, line, f"name {name!r} must be the skill's folder name {SKILL_NAME!r}")


def _check_description(value: Any, line: int, report: Report, file: str) -> None:
    what = "what the skill does and when to use it"
    description = _text_field(value, "description", what, MAX_DESCRIPTION_CHARS, line, report, file)
    if description is None:
        return
    person = PERSON_RE.search(description)
    if person:
        report.add(
            file, line,
            f"description uses {person.group(0)!r}: write it in the third person ('Explains ...; use when ...')",
        )


def _check_optional_fields(data: dict[str, Any], at: Callable[[str], int], report: Report, file: str) -> None:
    """compatibility, metadata and allowed-tools: optional, but typed by the spec when present."""
    compatibility = data.get("compatibility")
    if compatibility is not None and (
        not isinstance(compatibility, str) or not 1 <= len(compatibility) <= MAX_COMPATIBILITY_CHARS
    ):
        report.add(
            file, at("compatibility"), f"compatibility must be a string of 1..{MAX_COMPATIBILITY_CHARS} characters"
        )

    metadata = data.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            report.add(file, at("metadata"), "metadata must be a mapping of string keys to string values")
        else:
            for key, value in metadata.items():
                if not isinstance(key, str) or not isinstance(value, str):
                    report.add(
                        file, at("metadata"),
                        f"metadata {key!r}: {value!r} must map a string to a string: quote the value",
                    )

    tools = data.get("allowed-tools")
    if tools is not None and not (
        isinstance(tools, str) or (isinstance(tools, list) and all(isinstance(t, str) for t in tools))
    ):
        report.add(file, at("allowed-tools"), "allowed-tools must be a space-separated string or a list of strings")


# ------------------------------------------------------------------------------ links and anchors


def anchors_of(markdown: str) -> set[str]:
    """Every anchor a link may target in a markdown file: GitHub heading slugs (de-duplicated with
    -1, -2, ... as GitHub does) and the ids/names of HTML anchors anywhere in it."""
    found = set(HTML_ID_RE.findall(markdown))
    seen: dict[str, int] = {}
    tokens = markdown_parser().parse(markdown)
    for index, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        base = github_slug(plain_text(tokens[index + 1])) or "section"
        slug = base
        while slug in seen:
            seen[base] += 1
            slug = f"{base}-{seen[base]}"
        seen[slug] = 0
        found.add(slug)
    return found


def _source_line(lines: list[str], token: Token, needle: str, offset: int) -> int:
    """The 1-based file line of `needle` inside a block token's line range (its first line if absent)."""
    start, end = token.map or (0, 1)
    for index in range(start, min(end, len(lines))):
        if needle in lines[index]:
            return offset + index
    return offset + start


def links_of(markdown: str, offset: int = 1) -> list[tuple[int, str]]:
    """(1-based file line, target) of every link and image in a markdown text."""
    lines = markdown.split("\n")
    found: list[tuple[int, str]] = []
    for token in markdown_parser().parse(markdown):
        if token.type != "inline":
            continue
        for child in token.children or []:
            target = (
                child.attrGet("href")
                if child.type == "link_open"
                else child.attrGet("src")
                if child.type == "image"
                else None
            )
            if target:
                found.append((_source_line(lines, token, str(target), offset), str(target)))
    return found


def check_links(
    path: Path, markdown: str, offset: int, root: Path, report: Report, anchor_cache: dict[Path, set[str]]
) -> None:
    file = _relative(path, root)
    for line, target in links_of(markdown, offset):
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or target.startswith("//"):
            continue  # external: not checked offline
        report.links += 1
        destination = path if not parts.path else (path.parent / unquote(parts.path)).resolve()
        if parts.path:
            try:
                destination.relative_to(root.resolve())
            except ValueError:
                report.add(file, line, f"link {target!r} points outside the skill folder")
                continue
            if not destination.exists():
                report.add(file, line, f"link {target!r}: {_relative(destination, root)} does not exist")
                continue
        if parts.fragment:
            report.anchors += 1
            if destination.suffix != ".md" or not destination.is_file():
                continue  # anchors into code files are line hints on GitHub, not checkable ids
            if destination not in anchor_cache:
                anchor_cache[destination] = anchors_of(destination.read_text(encoding="utf-8"))
            if unquote(parts.fragment) not in anchor_cache[destination]:
                report.add(
                    file,
                    line,
                    f"link {target!r}: no heading or <a id> {parts.fragment!r} in {_relative(destination, root)}",
                )


# ----------------------------------------------------------------------------- code and patterns


def check_python_blocks(markdown: str, offset: int, report: Report, file: str = SKILL_FILE) -> None:
    for token in markdown_parser().parse(markdown):
        if token.type != "fence" or token.info.strip().split(" ")[0].lower() not in ("python", "py"):
            continue
        report.python_blocks += 1
        fence_line = offset + (token.map[0] if token.map else 0)
        try:
            ast.parse(token.content)
        except SyntaxError as exc:
            report.add(file, fence_line + (exc.lineno or 1), f"python block does not parse: {exc.msg}")


def check_pattern_files(root: Path, report: Report) -> tuple[dict[str, PatternHeader], int]:
    """Headers by name, and how many pattern files had no readable header; every problem reported."""
    headers: dict[str, PatternHeader] = {}
    unreadable = 0
    bash = shutil.which("bash")
    for path in pattern_files(patterns_dir(root)):
        report.patterns += 1
        file = _relative(path, root)
        try:
            header = read_header(path)  # a .py pattern is ast-parsed here: a SyntaxError is reported
        except PatternHeaderError as exc:
            report.add(file, exc.line, exc.message)
            unreadable += 1
            continue
        if header.name in headers:
            report.add(
                file,
                header.key_lines["name"],
                f"pattern name {header.name!r} is already used by {_relative(headers[header.name].path, root)}",
            )
            continue
        headers[header.name] = header
        for at, problem in min_torch_problems(root, path, header):
            report.add(file, at, problem)
        for at, problem in mutant_problems(path):  # a pattern that could not fail shows nothing
            report.add(file, at, problem)
        if header.kind == "shell" and bash:
            check = subprocess.run([bash, "-n", str(path)], capture_output=True, text=True, timeout=30)
            if check.returncode != 0:
                message = (check.stderr.strip().splitlines() or ["syntax error"])[-1]
                line = re.search(r"line (\d+)", message)
                report.add(file, int(line.group(1)) if line else 1, f"bash -n: {message}")
    return headers, unreadable


def min_torch_problems(root: Path, path: Path, header: PatternHeader) -> list[tuple[int, str]]:
    """The pattern's `min_torch:` line against the release matrix (the first release from which it passed on
    every release run, references/verification-releases.json) or, for a pattern the matrix never ran (GPU,
    SLURM), the API timeline (references/api-history.json)."""
    from fsdp_skill.build.pattern_torch import header_problems
    from fsdp_skill.cli.releases import matrix_releases
    from fsdp_skill.core.api_history import HISTORY_FILE, load_history
    from fsdp_skill.verify.releases import MatrixError, covers, first_passing, read_matrix

    try:
        history = load_history(references_dir(root) / HISTORY_FILE)
        matrix, ident = read_matrix(root), "pattern:" + header.name
        # Only a pattern run on every release of the matrix has a first release by run; until then, the timeline.
        ran_from = None
        if matrix["rows"] and covers(matrix, ident, matrix_releases(root)):
            ran_from = first_passing(matrix, ident)
    except (UserError, MatrixError) as exc:
        return [(header.key_lines.get("name", 1), f"min_torch cannot be checked: {exc}")]
    return header_problems(path.read_text(encoding="utf-8"), header, history, ran_from)


def check_pattern_mentions(
    body: str, offset: int, root: Path, headers: dict[str, PatternHeader], report: Report, complete: bool = True
) -> None:
    """SKILL.md must link every pattern, by its header name, and mention no pattern that does not exist.

    `complete` is False when some pattern file has no readable header: its name is unknown, so a
    mention of it cannot be told from a typo (that file's own problem is reported already)."""
    by_file = {header.path.resolve(): header for header in headers.values()}
    listed: set[str] = set()
    lines = body.split("\n")
    tokens = markdown_parser().parse(body)
    for token in tokens:
        if token.type != "inline":
            continue
        children = token.children or []
        for index, child in enumerate(children):
            if child.type == "code_inline":
                for name in GET_PATTERN_RE.findall(child.content):
                    if name not in headers and complete:
                        line = _source_line(lines, token, child.content, offset)
                        report.add(
                            SKILL_FILE,
                            line,
                            f"get_pattern names {name!r}, which is not a pattern (have: {', '.join(sorted(headers))})",
                        )
            if child.type != "link_open":
                continue
            target = urlsplit(str(child.attrGet("href") or ""))
            if target.scheme or not target.path:
                continue
            header = by_file.get((root / unquote(target.path)).resolve())
            if header is None:
                continue
            listed.add(header.name)
            text = children[index + 1] if index + 1 < len(children) else None
            if text is not None and text.type == "code_inline" and text.content != header.name:
                line = _source_line(lines, token, str(child.attrGet("href")), offset)
                report.add(
                    SKILL_FILE,
                    line,
                    f"link text `{text.content}` but {_relative(header.path, root)} is pattern {header.name!r}",
                )
    for name in sorted(set(headers) - listed):
        report.add(
            SKILL_FILE, offset, f"pattern {name!r} ({_relative(headers[name].path, root)}) is not linked from SKILL.md"
        )


# ---------------------------------------------------------------------------------------- driver


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def body_size(body: str) -> tuple[int, int]:
    """(lines, tokens) of the SKILL.md body; tokens estimated as characters / 4, rounded up."""
    return len(body.splitlines()), math.ceil(len(body) / 4)


def validate(root: Path) -> Report:
    report = Report()
    skill = root / SKILL_FILE
    anchor_cache: dict[Path, set[str]] = {}
    headers, unreadable = check_pattern_files(root, report)
    if not skill.is_file():
        report.add(SKILL_FILE, 1, f"{skill} does not exist: the skill starts from SKILL.md at the repository root")
    else:
        text = skill.read_text(encoding="utf-8")
        parts = split_frontmatter(text)
        if parts is None:
            report.add(SKILL_FILE, 1, "no frontmatter: start the file with '---', the YAML keys, and '---'")
            body, body_line = text, 1
        else:
            yaml_text, yaml_line, body, body_line = parts
            check_frontmatter(yaml_text, yaml_line, report)
        report.body_lines, report.body_tokens = body_size(body)
        if report.body_lines > MAX_BODY_LINES:
            report.add(
                SKILL_FILE,
                body_line,
                f"body is {report.body_lines} lines, the limit is {MAX_BODY_LINES}: move detail to references/",
            )
        if report.body_tokens > MAX_BODY_TOKENS:
            report.add(
                SKILL_FILE,
                body_line,
                f"body is ~{report.body_tokens} tokens, the limit is {MAX_BODY_TOKENS}: move detail to references/",
            )
        check_links(skill, body, body_line, root, report, anchor_cache)
        check_python_blocks(body, body_line, report)
        check_pattern_mentions(body, body_line, root, headers, report, complete=unreadable == 0)
        try:
            for line, message in pattern_range_problems(text, root):
                report.add(SKILL_FILE, line, message)
        except MatrixError as exc:
            report.add(SKILL_FILE, 1, str(exc))
        claim_problems, report.claim_checks = check_pitfall_links(body, body_line, root)
        for file, line, message in claim_problems:
            report.add(file, line, message)
    # Hand-written guides next to the patterns (assets/*.md) are read by agents too.
    for reference in sorted(references_dir(root).glob("*.md")) + sorted((root / "assets").glob("*.md")):
        check_links(reference, reference.read_text(encoding="utf-8"), 1, root, report, anchor_cache)
    check_leftovers(root, report)
    return report


def check_leftovers(root: Path, report: Report) -> None:
    """Temp folders and files whose run is gone: a killed regenerate or fetch left them."""
    for entry in data_leftovers(root):
        kind = "folder" if entry.is_dir() else "file"
        report.add(_relative(entry, root), 1, f"temporary {kind} left by an interrupted run: {LEFTOVER_ADVICE}")


def cli_validate(args: argparse.Namespace) -> int:
    root = Path(getattr(args, "root", None) or repo_root()).resolve()
    if not root.is_dir():
        from fsdp_skill.core.errors import UserError

        raise UserError(f"{root} is not a directory: pass the skill's root folder (the one holding SKILL.md)")
    report = validate(root)
    for problem in report.problems:
        print(problem)
    print(
        f"SKILL.md body: {report.body_lines} lines (limit {MAX_BODY_LINES}), "
        f"~{report.body_tokens} tokens (limit {MAX_BODY_TOKENS}, characters / 4)"
    )
    print(
        f"checked {report.links} relative links ({report.anchors} with anchors), "
        f"{report.python_blocks} python blocks, {report.patterns} patterns, {report.claim_checks} claim checks: "
        + (f"{len(report.problems)} problem(s)" if report.problems else "no problems")
    )
    return 1 if report.problems else 0

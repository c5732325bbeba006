"""Line helpers shared by the RST converter: indentation, fences, paragraphs, list items, joining.

A Block is the markdown lines of one block-level element; blocks are joined with one blank line.

The indentation helpers (`indent_of`, `dedent`, `indented_end`) are also how `apidoc.docstring_sections`
cuts a docstring into its sections: one rule, here, for where an indented RST block ends, so the
splitter and the converter never disagree about it (apidoc may import convert, not the reverse).
"""

from __future__ import annotations

import ast
import re
import textwrap

from fsdp_skill.core.markdown import fence_marker

Block = list[str]

_LANGUAGES = {
    "py": "python", "python": "python", "python3": "python", "pycon": "python", "ipython": "python",
    "ipython3": "python", "pytb": "text", "sh": "bash", "bash": "bash", "shell": "bash", "console": "bash",
    "shell-session": "bash", "zsh": "bash", "text": "text", "none": "text", "txt": "text", "output": "text",
    "c++": "cpp", "cpp": "cpp", "yml": "yaml",
}
_SHELL_START = re.compile(
    r"^(\$ |#!|(torchrun|python3?|pip3?|export|conda|cd|git|srun|sbatch|salloc|mpirun|mpiexec|bash|sh|ls|"
    r"mkdir|wget|curl|nvidia-smi|uv|apt(-get)?|sudo|cat|echo|rm|cp|mv|source|docker|kubectl|tensorboard)(\s|$)"
    r"|[A-Z_][A-Z0-9_]*=\S*(\s+[A-Z_][A-Z0-9_]*=\S*)*\s+\S)"
)
_PYTHON_START = re.compile(
    r"^\s*(import |from \S+ import |def |class |@\w|async def |with |for |if |while |try:|"
    r"[\w.\[\]'\"]+\s*=[^=]|[\w.]+\()"
)


def indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def dedent(lines: list[str]) -> list[str]:
    """Remove the common indentation of the non-blank lines; blank lines become empty. Trailing
    whitespace is kept: a doctest's expected output is compared as written (the markdown emitters
    strip it where it would show)."""
    indents = [indent_of(ln) for ln in lines if ln.strip()]
    cut = min(indents) if indents else 0
    return [ln[cut:] if ln.strip() else "" for ln in lines]


def indented_end(lines: list[str], start: int) -> int:
    """End of the indented block beginning at start (first unindented non-blank line), with
    trailing blank lines left outside."""
    j = start
    while j < len(lines) and (not lines[j].strip() or indent_of(lines[j]) > 0):
        j += 1
    while j > start and not lines[j - 1].strip():
        j -= 1
    return j


def normalize_language(name: str | None, code: list[str]) -> str:
    if not name or name.lower() in ("default", "guess"):
        return guess_language(code)
    return _LANGUAGES.get(name.lower(), name.lower())


def guess_language(code: list[str]) -> str:
    """python for doctests and code that parses or looks like Python; bash for shell command
    lines; text for output and everything else."""
    body = [ln for ln in code if ln.strip()]
    if not body:
        return "text"
    if body[0].lstrip().startswith(">>>"):
        return "python"
    first = next((ln for ln in body if not ln.lstrip().startswith("#")), body[0]).strip()
    if _SHELL_START.match(first):
        return "bash"
    source = textwrap.dedent("\n".join(code))
    try:
        ast.parse(source)
        parses = True
    except (SyntaxError, ValueError):
        parses = False
    if parses and re.search(r"[=(\[:]|^\s*(import|from|def|class|return)\b", source, re.MULTILINE):
        return "python"
    if _PYTHON_START.match(first):
        return "python"
    return "text"


def looks_like_python(lines: list[str]) -> bool:
    """Indented lines that are Python although no "::" announced a literal block ("Usage:" over
    code): they parse, and the first statement line starts like Python. Prose does not parse."""
    body = [ln for ln in lines if ln.strip()]
    statements = [ln for ln in body if not ln.lstrip().startswith("#")]
    if not statements or body[0].lstrip().startswith(">>>") or not _PYTHON_START.match(statements[0]):
        return False
    try:
        ast.parse(textwrap.dedent("\n".join(lines)))
    except (SyntaxError, ValueError):
        return False
    return True


def fence(code: list[str], language: str) -> Block:
    """A fenced block, longer than any backtick run inside so it always closes."""
    while code and not code[0].strip():
        code = code[1:]
    while code and not code[-1].strip():
        code = code[:-1]
    marker = fence_marker("\n".join(code))
    return [f"{marker}{language}"] + [ln.rstrip() for ln in code] + [marker]


_LINE_START_ESCAPES = [
    (re.compile(r"^(#{1,6})(?=\s|$)"), r"\\\1"),
    (re.compile(r"^([-+*])(?=\s|$)"), r"\\\1"),
    (re.compile(r"^(\d{1,9})([.)])(?=\s|$)"), r"\1\\\2"),
    (re.compile(r"^>"), r"\\>"),
    (re.compile(r"^(=+|-+)\s*$"), r"\\\1"),
    (re.compile(r"^(\*\s*\*\s*\*[\s*]*|_\s*_\s*_[\s_]*)$"), r"\\\1"),
    (re.compile(r"^(`{3,}|~{3,})"), r"\\\1"),
    (re.compile(r"^\|"), r"\\|"),
]


def paragraph_lines(text: str) -> Block:
    """Prose lines made safe: nothing at a line start may open a heading, list, quote, fence or
    setext underline that the RST did not mean."""
    out: Block = []
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        for pattern, repl in _LINE_START_ESCAPES:
            line = pattern.sub(repl, line, count=1)
        out.append(line)
    return out


def list_item(marker: str, body: list[Block]) -> Block:
    """A list item: the marker on the first line, every other line indented to the text."""
    lines = join_blocks(body).split("\n") if body else [""]
    pad = " " * len(marker)
    out = [marker + lines[0]] if lines[0] else [marker.rstrip()]
    out += [pad + ln if ln else "" for ln in lines[1:]]
    return out


def join_blocks(blocks: list[Block]) -> str:
    """Blocks separated by one blank line, each trimmed of blank edge lines."""
    parts: list[str] = []
    for block in blocks:
        lines = [ln.rstrip() for ln in block]
        while lines and not lines[0]:
            lines = lines[1:]
        while lines and not lines[-1]:
            lines = lines[:-1]
        if lines:
            parts.append("\n".join(lines))
    return "\n\n".join(parts)

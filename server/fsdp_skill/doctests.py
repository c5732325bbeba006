"""Doctest text (`>>>` examples from docstrings) → runnable examples with per-rank expected output.

Pure stdlib: the verify runner may reuse it from a plain clone.

Grouping rule: one example is a maximal run of doctest lines; blank lines inside the run do not
split it (upstream writes one scenario in several paragraphs that share variables, e.g. all_reduce's
complex-tensor part reuses `device`), but a prose line between runs does. Within an example, a step
is one `>>>` statement with its `...` continuations, and its expected output is the following lines
up to a blank line or the next prompt. Output lines ending in a `# Rank N` tag belong to rank N.
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from dataclasses import dataclass, field

from .catalog import DoctestStep

_PROMPT = re.compile(r"^(>>>|\.\.\.)(?: |$)")
_RANK_TAG = re.compile(r"\s*#\s*[Rr]ank\s+(\d+)\s*:?\s*$")
_SKIP = re.compile(r"#\s*(?:x?doctest):?\s*\+SKIP(?:\((?P<reason>.*)\))?", re.IGNORECASE)
_REQUIRES = re.compile(r"#\s*xdoctest:?\s*\+REQUIRES\((?P<what>[^)]*)\)", re.IGNORECASE)
_WORLD_SIZE_TEXT = [
    re.compile(r"\b(\d+)\s+ranks\b", re.IGNORECASE),
    re.compile(r"\bworld_size\s*[=:]\s*(\d+)\b"),
    re.compile(r"\bworld size (?:of |is |= ?)?(\d+)\b", re.IGNORECASE),
    re.compile(r"\bnproc[-_]per[-_]node[= ](\d+)\b"),
]
_CUDA = re.compile(r"\bcuda\b|\.cuda\(|\bnccl\b", re.IGNORECASE)
_KNOWN_REQUIREMENTS = {"numpy": "numpy", "np": "numpy", "torchvision": "torchvision", "transformers": "transformers"}


@dataclass
class ParsedExample:
    code: str
    steps: list[DoctestStep]
    world_size: int = 1
    device: str = "cpu"
    requires: list[str] = field(default_factory=list)
    skip: str | None = None
    line: int = 1
    text: str = ""  # the doctest as written (prompts and outputs), for rendering
    caption: str = ""  # prose that introduced it inside an Examples section, if any


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_doctest_line(line: str) -> bool:
    return bool(_PROMPT.match(line.lstrip()))


def split_runs(text: str) -> list[tuple[int, list[str], str]]:
    """(0-based first line, lines, caption) of each doctest run in text; prose between runs
    becomes the caption of the next run."""
    lines = textwrap.dedent(text.expandtabs(8)).split("\n")
    runs: list[tuple[int, list[str], str]] = []
    caption: list[str] = []
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith(">>>"):
            if lines[i].strip():
                caption.append(lines[i].strip())
            elif caption and caption[-1]:
                caption.append("")
            i += 1
            continue
        start, run = i, []
        prompt_indent = _indent(lines[i])
        while i < len(lines):
            line = lines[i]
            if line.strip() and _indent(line) < prompt_indent:
                break  # a dedent ends a doctest nested in a list item or note (doctest's own rule)
            if _is_doctest_line(line):
                run.append(line)
            elif line.strip() and run and run[-1].strip():
                run.append(line)  # output of the statement above
            elif not line.strip():
                nxt = next((ln for ln in lines[i + 1 :] if ln.strip()), "")
                if not _is_doctest_line(nxt):
                    break
                run.append("")
            else:
                break  # prose after a blank line ends the run
            i += 1
        runs.append((start, run, "\n".join(caption).strip()))
        caption = []
    return runs


def _steps(lines: list[str], first_line: int) -> list[DoctestStep]:
    steps: list[DoctestStep] = []
    i = 0
    # The prompts set the indentation (outputs may not be less indented, see split_runs).
    base = min((_indent(ln) for ln in lines if ln.lstrip().startswith(">>>")), default=0)
    lines = [ln[base:] for ln in lines]
    while i < len(lines):
        line = lines[i]
        if not line.startswith(">>>"):
            i += 1
            continue
        source = [line[4:] if line.startswith(">>> ") else line[3:]]
        line_no = first_line + i
        i += 1
        while i < len(lines) and _PROMPT.match(lines[i]) and (
            lines[i].startswith("...") or _incomplete("\n".join(source))
        ):
            # Upstream sometimes continues a statement with ">>>" instead of "...".
            source.append(lines[i][4:] if lines[i][3:4] == " " else lines[i][3:])
            i += 1
        output: list[str] = []
        while i < len(lines) and lines[i].strip() and not lines[i].startswith(">>>"):
            output.append(lines[i])
            i += 1
        shared: list[str] = []
        by_rank: dict[int, list[str]] = {}
        for out in output:
            out = "" if out.strip() == "<BLANKLINE>" else out
            tag = _RANK_TAG.search(out)
            if tag:
                by_rank.setdefault(int(tag.group(1)), []).append(out[: tag.start()].rstrip())
            else:
                shared.append(out.rstrip())
        steps.append(DoctestStep(
            source="\n".join(source).rstrip(),
            expected="\n".join(shared) if shared else None,
            expected_by_rank={rank: "\n".join(v) for rank, v in sorted(by_rank.items())},
            line=line_no,
        ))
    return steps


def _incomplete(source: str) -> bool:
    """True when source is the start of a statement that continues on the next line."""
    try:
        ast.parse(source)
    except SyntaxError as exc:
        message = str(exc.msg)
        return "never closed" in message or "unexpected EOF" in message or "expected an indented block" in message
    return False


def _is_directive_only(source: str) -> bool:
    return bool(re.fullmatch(r"\s*#\s*x?doctest:?.*", source, re.IGNORECASE))


def _world_size(steps: list[DoctestStep], text: str) -> int:
    sizes = [1]
    for step in steps:
        sizes.extend(rank + 1 for rank in step.expected_by_rank)
    for pattern in _WORLD_SIZE_TEXT:
        sizes.extend(int(m.group(1)) for m in pattern.finditer(text) if 0 < int(m.group(1)) <= 64)
    return max(sizes)


def _requires(code: str, text: str, device: str, world_size: int) -> list[str]:
    needs: set[str] = set()
    if device == "cuda":
        needs.add("cuda")
        if world_size > 1 or re.search(r"cuda:[1-9]", code):
            needs.add("multi-gpu")
    for match in re.finditer(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", code, re.M):
        root = match.group(1)
        if root not in sys.stdlib_module_names and root != "torch":
            needs.add(_KNOWN_REQUIREMENTS.get(root, root))
    if re.search(r"\bnp\.", code):
        needs.add("numpy")
    if re.search(r"\brpc\.|torch\.distributed\.rpc|\bRRef\b", code):
        needs.add("rpc")
    for match in _REQUIRES.finditer(text):
        what = match.group("what").strip()
        if what.startswith("module:"):
            needs.add(_KNOWN_REQUIREMENTS.get(what[7:], what[7:]))
        elif "cuda" in what.lower() or "gpu" in what.lower():
            needs.add("cuda")
        else:
            needs.add(what)
    return sorted(needs)


def parse_doctest(text: str) -> list[ParsedExample]:
    """Every doctest run in text as a ParsedExample (see the module docstring for the rules)."""
    examples: list[ParsedExample] = []
    for start, run, caption in split_runs(text):
        run_text = "\n".join(run).rstrip()
        skip_match = _SKIP.search(run_text)
        skip = None
        if skip_match:
            skip = (skip_match.group("reason") or "").strip().strip("\"'") or "skipped upstream"
        # A bare ">>>" line is a visual separator upstream, not a statement.
        steps = [s for s in _steps(run, start + 1)
                 if s.source.strip() and not _is_directive_only(s.source)]
        if not steps:
            continue
        code = "\n".join(s.source for s in steps) + "\n"
        world_size = _world_size(steps, run_text)
        device = "cuda" if _CUDA.search(code) else "cpu"
        examples.append(ParsedExample(
            code=code,
            steps=steps,
            world_size=world_size,
            device=device,
            requires=_requires(code, run_text, device, world_size),
            skip=skip,
            line=start + 1,
            text=textwrap.dedent(run_text),
            caption=caption,
        ))
    return examples


def count_prompts(text: str) -> int:
    """How many `>>>` statements text holds (to check that parsing dropped none)."""
    return sum(1 for ln in text.split("\n") if ln.lstrip().startswith(">>>"))

"""Doctest text (`>>>` examples from docstrings) → runnable examples with per-rank expected output.

Pure stdlib: the verify runner may reuse it from a plain clone.

Grouping rule: one example is a maximal run of doctest lines; blank lines inside the run do not
split it (upstream writes one scenario in several paragraphs that share variables, e.g. all_reduce's
complex-tensor part reuses `device`), but a prose line between runs does. Within an example, a step
is one statement as Python's interactive console would read it (see `_continues`), and its expected
output is the following lines up to a blank line or the next prompt. Output lines ending in a
`# Rank N` tag belong to rank N. What an example needs (world size, device, packages) is inferred
in example_needs.
"""

from __future__ import annotations

import codeop
import io
import re
import textwrap
import tokenize
import warnings
from dataclasses import dataclass, field

from fsdp_skill.apidoc import example_needs
from fsdp_skill.core.catalog import DoctestStep

_PROMPT = re.compile(r"^(>>>|\.\.\.)(?: |$)")
_RANK_TAG = re.compile(r"\s*#\s*[Rr]ank\s+(\d+)\s*:?\s*$")
_SKIP = re.compile(r"#\s*(?:x?doctest):?\s*\+SKIP(?:\((?P<reason>.*)\))?", re.IGNORECASE)
# The first line of a compound statement (one that owns an indented block), and the clauses that
# continue one at its own indentation. Used when upstream's header does not even compile.
_BLOCK_HEADER = re.compile(r"^(?:async\s+)?(?:def|class|if|for|while|with|try)\b|^@|^match\b.*:\s*(?:#.*)?$")
_CLAUSE = re.compile(r"^(?:elif|else|except|finally|case)\b")


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


def _code(line: str) -> str:
    """A prompt line's code: the text after `>>> ` or `... `."""
    return line[4:] if line[3:4] == " " else line[3:]


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
        source = [_code(line)]
        line_no = first_line + i
        i += 1
        while i < len(lines) and (taken := _continues("\n".join(source), lines, i)):
            source += [_code(ln) if _PROMPT.match(ln) else ln.rstrip() for ln in lines[i : i + taken]]
            i += taken
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


def _continues(source: str, lines: list[str], i: int) -> int:
    """How many lines from lines[i] on belong to the statement `source` (0: it ends before them).

    The interactive console's rule, made to fit how upstream writes doctests:
    - a `...` line always continues the statement;
    - inside open brackets (or after a backslash) any next line does, with or without a prompt
      (upstream writes `PowerSGDState(...,` and continues on an unprompted, indented line);
    - after decorators, the next prompt line (the decorated def or class) does;
    - a compound statement (codeop still wants more input, or a header that upstream mistyped) takes
      a later prompt line that is indented or is an else/elif/except/finally clause, together with
      the blank and comment-only lines between (upstream writes block bodies with `>>>`, and
      separates methods with a bare `>>>`).
    """
    line = lines[i]
    if line.startswith("..."):
        return 1
    state = _open_state(source)
    if state == "brackets":
        return 1 if line.strip() else 0
    if not line.startswith(">>>"):
        return 0
    if state == "decorator":
        return 1
    if state != "block":
        return 0
    for j in range(i, len(lines)):
        candidate = lines[j]
        if not candidate.strip():
            continue  # a blank line between block lines
        if not candidate.startswith(">>>"):
            return 0  # output: the statement above is over
        code = _code(candidate)
        if not code.strip() or code.lstrip().startswith("#"):
            continue
        return j - i + 1 if code[:1].isspace() or _CLAUSE.match(code) else 0
    return 0


def _open_state(source: str) -> str | None:
    """'brackets', 'decorator' or 'block' when source is an unfinished statement, else None."""
    try:
        for _ in tokenize.generate_tokens(io.StringIO(source + "\n").readline):
            pass
    except tokenize.TokenError:
        return "brackets"  # EOF inside brackets, after a backslash, or in a triple-quoted string
    except SyntaxError:  # an IndentationError from a mistyped block: let the block rule decide
        pass
    code_lines = [ln for ln in source.split("\n") if ln.strip() and not ln.lstrip().startswith("#")]
    if not code_lines:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            complete = codeop.compile_command(source, "<doctest>", "single") is not None
        except (SyntaxError, ValueError, OverflowError):
            complete = None  # does not compile at all: judge by the header alone
    if complete:
        return None
    if all(ln.startswith("@") for ln in code_lines):
        return "decorator"
    if complete is False or _BLOCK_HEADER.match(code_lines[0]):
        return "block"
    return None


def _is_directive_only(source: str) -> bool:
    return bool(re.fullmatch(r"\s*#\s*x?doctest:?.*", source, re.IGNORECASE))


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
        tagged = [rank for s in steps for rank in s.expected_by_rank]
        trees = example_needs.parse_pieces(s.source for s in steps)
        world_size = example_needs.world_size(tagged, run_text, trees)
        device = example_needs.device(code)
        examples.append(ParsedExample(
            code=code,
            steps=steps,
            world_size=world_size,
            device=device,
            requires=example_needs.requirements(code, run_text, device, world_size),
            skip=skip,
            line=start + 1,
            text=textwrap.dedent(run_text),
            caption=caption,
        ))
    return examples


def count_prompts(text: str) -> int:
    """How many `>>>` statements text holds (to check that parsing dropped none)."""
    return sum(1 for ln in text.split("\n") if ln.lstrip().startswith(">>>"))

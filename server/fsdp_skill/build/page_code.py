"""Every code block of the references as a catalog entry: origin, language and kind (`PageCode`).

A reference's code blocks come from three places: the pages and tutorials themselves, docstring
code blocks inside API entries (`.. code-block::` in a docstring), and the generated parts of API
entries. The generated parts are not documentation code and are left out: the signature block of an
entry, and its `>>>` doctests (already cataloged, and run, as `Example`s).

Each block gets a kind, decided from its language and its Python syntax tree, reading the page's
blocks in order as a tutorial reader does:

- **shell**: a shell-language block (or a Python-labelled block of command lines: `torchrun ...`);
- **output**: a text block (printed output, logs, diagrams); attached as `output` of the Python
  block right before it when the prose between them introduces it as that block's output;
- **program**: a complete program: an `if __name__ == "__main__":` entry point, or a torchrun script
  (top-level process-group / device-mesh set-up with nothing left undefined);
- **rank function**: defines `def NAME(rank, world_size)` (or `size`/`ws`) for the page's own launcher
  template (`launcher`: the block that defines a function calling `mp.spawn` / `mp.Process`);
- **continuation**: uses names only earlier blocks of the same page define (`uses` lists them);
- **fragment**: anything else: a part of a program the page never shows whole.

Pure stdlib + the catalog models: it reads the rendered sections, never torch.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field

from fsdp_skill.core.catalog import ApiEntry, PageCode, Section
from fsdp_skill.core.markdown import markdown_parser
from fsdp_skill.verify.code_shape import (
    defines_launcher,
    free_names,
    has_main_guard,
    is_torchrun_script,
    rank_functions,
    top_level_names,
)

SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console", "zsh", "shell-session"})
PYTHON_LANGUAGES = frozenset({"python", "py", "python3", "pycon", "ipython"})
_COMMAND_LINE = re.compile(
    r"^\s*(?:\$\s*)?(?:torchrun|python3?|pip|export|srun|sbatch|mpirun|CUDA_VISIBLE_DEVICES=|[A-Z_]+=\S+\s+(?:torchrun|python))\b"
)
_INTRODUCES_OUTPUT = re.compile(
    r"\b(output|prints?|printed|should see|will see|logs?|results?|produced|error message|looks like)\b", re.IGNORECASE
)
# Text a page labels Python that is what a program printed: a traceback or error line, a module repr.
_LOOKS_PRINTED = re.compile(
    r"^(Traceback \(most recent call last\)|\w+(Error|Exception): |\s*\(\w+\): \w+\()", re.MULTILINE
)


@dataclass
class _Block:
    section: Section
    position: int
    line: int
    language: str
    code: str
    origin: str
    prose_before: str
    tree: ast.Module | None = None
    defines: set[str] = field(default_factory=set)
    free: set[str] = field(default_factory=set)


def _strip_prompts(code: str) -> str:
    """A `>>>`-style block as plain Python (prompts and output lines dropped)."""
    lines = [ln for ln in code.split("\n") if ln.lstrip().startswith((">>>", "..."))]
    return "\n".join(ln.lstrip()[4:] if ln.lstrip()[3:4] == " " else ln.lstrip()[3:] for ln in lines)


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return None


def _is_command_lines(code: str) -> bool:
    lines = [ln for ln in code.split("\n") if ln.strip() and not ln.lstrip().startswith("#")]
    return (
        bool(lines)
        and all(
            _COMMAND_LINE.match(ln) or ln.rstrip().endswith("\\") or ln.startswith((" ", "\t", "--")) for ln in lines
        )
        and bool(_COMMAND_LINE.match(lines[0]))
    )


def _generated(section: Section, entry: ApiEntry | None, info: str, code: str) -> bool:
    """The signature block or a doctest of an API entry: generated, cataloged elsewhere."""
    if entry is None:
        return False
    if entry.signature is not None and code.strip() == entry.signature.strip():
        return True
    return code.lstrip().startswith(">>>")


def _blocks(sections: Iterable[Section], entries: dict[str, ApiEntry], kinds: dict[str, str]) -> list[_Block]:
    blocks: list[_Block] = []
    parser = markdown_parser()
    for section in sections:
        entry = entries.get(section.anchor)
        tokens = parser.parse(section.markdown)
        position = 0
        prose: list[str] = []
        for token in tokens:
            if token.type == "inline":
                prose.append(token.content)
            if token.type != "fence":
                continue
            info = token.info.strip().split()[0].lower() if token.info.strip() else ""
            code = token.content.rstrip("\n")
            if _generated(section, entry, info, code) or not code.strip():
                prose = []
                continue
            position += 1
            start = (token.map[0] if token.map else 0) + (section.line or 1)
            origin = "docstring" if entry is not None else kinds.get(section.source or "", "page")
            blocks.append(_Block(section, position, start, info, code, origin, " ".join(prose[-2:])))
            prose = []
    return blocks


def _kind(block: _Block, earlier: dict[str, _Block], has_launcher: bool) -> tuple[str, list[str]]:
    """(kind, ids of the earlier blocks it uses) for one block; see the module docstring."""
    language, code = block.language, block.code
    if language in SHELL_LANGUAGES or (language in PYTHON_LANGUAGES | {""} and _is_command_lines(code)):
        return "shell", []
    if language not in PYTHON_LANGUAGES:
        return "output", []
    source = _strip_prompts(code) if code.lstrip().startswith(">>>") else code
    tree = block.tree = _parse(source)
    if tree is None:
        return ("output", []) if _LOOKS_PRINTED.search(source) else ("fragment", [])
    block.defines = top_level_names(tree)
    block.free = free_names(tree)
    uses = sorted({earlier[name].section.id + f":{earlier[name].position}" for name in block.free if name in earlier})
    missing = {name for name in block.free if name not in earlier}
    if has_main_guard(tree) or (is_torchrun_script(tree) and not missing):
        return "program", uses
    if rank_functions(tree) and (has_launcher or defines_launcher(tree)):
        return "rank-function", uses
    if uses and not missing:
        return "continuation", uses
    return "fragment", uses


def page_code(sections: list[Section], api: list[ApiEntry], source_kinds: dict[str, str]) -> list[PageCode]:
    """The catalog's page-code entries, in reference order (see the module docstring)."""
    entries = {entry.anchor: entry for entry in api}
    blocks = _blocks(sections, entries, source_kinds)
    found: list[PageCode] = []
    # Names each page's earlier blocks define: a tutorial's blocks build on one another, in order.
    defined: dict[tuple[str, str | None], dict[str, _Block]] = {}
    launchers: dict[tuple[str, str | None], _Block] = {}
    previous: PageCode | None = None
    for block in blocks:
        page = (block.section.reference, block.section.source if block.origin != "docstring" else block.section.id)
        earlier = defined.setdefault(page, {})
        kind, uses = _kind(block, earlier, page in launchers)
        block_id = f"{block.section.id}:{block.position}"
        if (
            kind == "output"
            and previous is not None
            and previous.reference == block.section.reference
            and (not block.prose_before.strip() or _INTRODUCES_OUTPUT.search(block.prose_before))
            and previous.kind in ("program", "rank-function", "continuation", "fragment")
            and previous.output is None
        ):
            previous.output = block.code
        launcher = None
        if kind == "rank-function":
            template = block if block.tree is not None and defines_launcher(block.tree) else launchers.get(page)
            launcher = f"{template.section.id}:{template.position}" if template is not None else None
        entry = PageCode(
            id=block_id,
            reference=block.section.reference,
            anchor=block.section.anchor,
            section=block.section.title,
            position=block.position,
            source=block.section.source,
            origin=block.origin,  # type: ignore[arg-type]
            line=block.line,
            language=block.language or "text",
            kind=kind,  # type: ignore[arg-type]
            code=block.code,
            uses=uses,
            launcher=launcher,
            defines=sorted(block.defines),
        )
        found.append(entry)
        if block.tree is not None:
            for name in block.defines:
                earlier[name] = block
            if defines_launcher(block.tree) and page not in launchers:
                launchers[page] = block
        previous = entry if kind != "output" else previous
    return found

"""Every torch.distributed name the documented code uses has an API entry, or an api-drift.md row saying why not.

The code of the references (page code, `>>>` examples) and of assets/patterns/ is read with the static
check's name resolution (`verify.static_check`): imports from `torch.distributed...` and
`torch.utils.checkpoint`, and dotted names rooted in them (`dist.ReduceOp.AVG`). A name counts as
covered when it is the same object as an API entry (any spelling: `...fully_sharded_data_parallel.
StateDictType` is `torch.distributed.fsdp.StateDictType`), or a member of an entry's class (an enum
value). The rest become rows of the section "Used by the documented code, no API entry" with the reason.
"""

from __future__ import annotations

import ast
import inspect
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fsdp_skill.core.catalog import ApiEntry, Example, PageCode, Pattern
from fsdp_skill.verify.code_shape import dotted_parts
from fsdp_skill.verify.static_check import CONVENTIONAL, page_imports, resolve_path

SCOPE = ("torch.distributed", "torch.utils.checkpoint")
SECTION_TITLE = "Used by the documented code, no API entry"


def code_texts(page_code: list[PageCode], examples: list[Example], patterns: list[Pattern], root: Path) -> list[str]:
    """The code of the references (page code, `>>>` examples) and of the patterns' Python files."""
    texts = [block.code for block in page_code if block.kind not in ("shell", "output")]
    texts += [example.code for example in examples]
    for pattern in patterns:
        path = root / pattern.file
        if path.suffix == ".py" and path.is_file():
            texts.append(path.read_text(encoding="utf-8"))
    return texts


def _strip_prompts(code: str) -> str:
    if not code.lstrip().startswith(">>>"):
        return code
    return "\n".join(ln.lstrip()[4:] for ln in code.split("\n") if ln.lstrip().startswith((">>>", "...")))



def used_names(texts: Iterable[str]) -> set[str]:
    """torch.distributed / torch.utils.checkpoint paths the code imports or uses as dotted names."""
    found: set[str] = set()
    for text in texts:
        try:
            tree = ast.parse(_strip_prompts(text))
        except SyntaxError:
            continue
        names = {**CONVENTIONAL, **page_imports([tree])}
        inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.update(f"{node.module}.{a.name}" for a in node.names if a.name != "*")
            elif (
                isinstance(node, ast.Attribute)
                and id(node) not in inner
                and (parts := dotted_parts(node))
                and parts[0] in names
            ):
                found.add(".".join([names[parts[0]], *parts[1:]]))
    return {name for name in found if name.startswith(SCOPE)}


def _why(name: str, obj: Any, parent: Any) -> str:
    where, short = name.rsplit(".", 1)
    if any(part.startswith("_") for part in name.split(".")):
        return f"in a private module ({where}); torch documents no public path for it"
    if inspect.isclass(parent):
        return f"a member of {where}, a class with no API entry"
    if not inspect.ismodule(parent):
        return f"an attribute of {where}, an instance of {type(parent).__name__} (no API entry)"
    if not (inspect.isclass(obj) or callable(obj)):
        return f"a module-level object (an instance of {type(obj).__name__}), with no docstring of its own"
    return f"public in {where}, which no upstream page this skill covers documents; `help({short})` in Python"


def uncovered(api: list[ApiEntry], texts: Iterable[str]) -> tuple[int, list[tuple[str, str]]]:
    """(names the code uses that resolve, [(name, reason)] of those without an API entry)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        entry_objects: dict[int, str] = {}
        entry_classes: list[type] = []
        for entry in api:
            obj = resolve_path(entry.qualified_name)
            if obj is not None:
                entry_objects[id(obj)] = entry.qualified_name
                if inspect.isclass(obj):
                    entry_classes.append(obj)
        resolved = 0
        rows: list[tuple[str, str]] = []
        for name in sorted(used_names(texts)):
            obj = resolve_path(name)
            if obj is None or inspect.ismodule(obj):
                continue  # a name that does not resolve is the static check's doc-bug, not a coverage gap
            resolved += 1
            parent = resolve_path(name.rsplit(".", 1)[0])
            if id(obj) in entry_objects or (inspect.isclass(parent) and any(parent is cls for cls in entry_classes)):
                continue
            rows.append((name, _why(name, obj, parent)))
    return resolved, rows


def drift_section(resolved: int, rows: list[tuple[str, str]]) -> str:
    lines = [
        "",
        f"## {SECTION_TITLE} ({len(rows)})",
        "",
        (
            f"The code blocks, `>>>` examples and patterns use {resolved} torch.distributed / "
            "torch.utils.checkpoint names "
            "that resolve in the installed torch; these have no API entry (an enum value or method of a documented "
            "class counts as covered)."
        ),
        "",
        "| name | why no entry |",
        "|---|---|",
    ]
    lines += ["| `{}` | {} |".format(name, reason.replace("|", "\\|")) for name, reason in rows]
    return "\n".join(lines) + "\n"

"""`list_api`: every public name with its one-line summary, grouped by module, a page at a time.

For an agent that does not know a name: it reads the index of names and picks one, where a search
needs words that happen to match the docs.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsdp_skill.core.errors import UserError

PAGE_CHARS = 8000  # about 2,000 tokens
SUMMARY_CHARS = 110


class ApiListError(UserError):
    """A module filter or start index list_api cannot serve."""


@dataclass(frozen=True)
class ApiLine:
    module: str
    name: str  # the name inside its module: all_reduce, DeviceMesh, DeviceMesh.get_group
    summary: str
    deprecated: bool


def module_and_name(qualified: str) -> tuple[str, str]:
    """torch.distributed.DeviceMesh.get_group → (torch.distributed, DeviceMesh.get_group): the module
    is everything before the first CapWords component (a class), or before the last component."""
    parts = qualified.split(".")
    for i, part in enumerate(parts[:-1]):
        if part[:1].isupper():
            return ".".join(parts[:i]), ".".join(parts[i:])
    return ".".join(parts[:-1]), parts[-1]


def one_line(summary: str) -> str:
    flat = " ".join(summary.split())
    sentence = flat.split(". ", 1)[0].rstrip(".")
    return sentence if len(sentence) <= SUMMARY_CHARS else sentence[: SUMMARY_CHARS - 1].rstrip() + "…"


def api_lines(payloads: list[dict]) -> list[ApiLine]:
    lines = []
    for entry in payloads:
        module, name = module_and_name(entry["qualified_name"])
        if entry.get("kind") == "module":
            module, name = entry["qualified_name"], "(module)"
        lines.append(ApiLine(module, name, one_line(entry.get("summary") or ""), bool(entry.get("deprecation"))))
    return sorted(lines, key=lambda line: (line.module, line.name != "(module)", line.name.lower(), line.name))


def render_page(lines: list[ApiLine], module: str | None, start_index: int) -> tuple[str, int, int | None]:
    """(text, end index, next start index or None) of the page of `lines` from start_index."""
    total = len(lines)
    if start_index < 0 or (start_index and start_index >= total):
        raise ApiListError(f"start_index must be between 0 and {max(total - 1, 0)}, got {start_index}")
    out: list[str] = []
    used = 0
    current: str | None = None
    end = start_index
    for line in lines[start_index:]:
        text = ""
        if line.module != current:
            continued = not out and start_index and lines[start_index - 1].module == line.module
            text += f"\n## {line.module}{' (continued)' if continued else ''}\n"
        text += (
            f"- {line.name}"
            + (" (deprecated)" if line.deprecated else "")
            + (f": {line.summary}" if line.summary else "")
            + "\n"
        )
        if out and used + len(text) > PAGE_CHARS:
            break
        out.append(text)
        used += len(text)
        current = line.module
        end += 1
    filters = f"module={module!r}, " if module else ""
    if end < total:
        footer = (
            f"\n[names {start_index + 1}-{end} of {total}. Next page: list_api({filters}start_index={end}). "
            "get_api(name) gives a name's full entry.]"
        )
    else:
        footer = (
            f"\n[names {start_index + 1}-{end} of {total}: the last page. get_api(name) gives a name's full entry.]"
        )
    return "".join(out).lstrip("\n") + footer, end, end if end < total else None


def filter_module(lines: list[ApiLine], module: str) -> list[ApiLine]:
    """Lines of one module and its submodules (`dist`, `dist.checkpoint` and `dcp` work too)."""
    from fsdp_skill.search.identifiers import resolve_prefix
    from fsdp_skill.search.vocabulary import vocabulary

    cleaned = module.strip().rstrip(".")
    alias = vocabulary().symbol_aliases.get(cleaned.lower())  # dcp → torch.distributed.checkpoint
    modules = {line.module for line in lines}
    wanted = alias if alias in modules else resolve_prefix(cleaned + ".x")[:-2]
    if not wanted.startswith("torch"):
        wanted = f"torch.{wanted}" if any(line.module.startswith(f"torch.{wanted}") for line in lines) else wanted
    chosen = [line for line in lines if line.module == wanted or line.module.startswith(wanted + ".")]
    if not chosen:
        raise ApiListError(
            f"no public names in module {module[:200]!r}: pass one of {', '.join(sorted(modules))}, "
            "or omit module to list every name"
        )
    return chosen

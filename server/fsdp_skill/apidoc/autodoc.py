"""The autodoc hook of the build: page directives → API entries rendered from the installed torch.

One `AutodocRegistry` serves every page of a build. Each page gets its own hook (its own
current-module state, as in Sphinx). A hook resolves its directive at once (so the current module
is the one in force at that point of the page) but returns a placeholder line; `expand` replaces
the placeholders once every page has been converted. The delay is what lets the build document
each object once, under its most public spelling: distributed.md autodocs
`torch.distributed.distributed_c10d.irecv` under "Initialization" and `irecv` under
"Point-to-point communication" — the same function — and only after the whole page is seen can
the second, shorter spelling win.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fsdp_skill.apidoc import docstrings
from fsdp_skill.apidoc.api_model import ApiDoc, MissingName, walk
from fsdp_skill.apidoc.api_render import is_bare_module, render_api
from fsdp_skill.convert.myst import PageAutodocHook, Warn

__all__ = ["AutodocRegistry", "Documented"]

_PLACEHOLDER = "\u27e6autodoc {}\u27e7"
_PLACEHOLDER_RE = re.compile(r"^(?P<prefix>.*?)\u27e6autodoc (?P<index>\d+)\u27e7\s*$")
# Exceptions a docstring the converters cannot handle may raise; anything else is a real bug.
_DOCSTRING_FAILURES = (RecursionError, ValueError, TypeError, AttributeError, KeyError, IndexError)


@dataclass(frozen=True)
class Documented:
    doc: ApiDoc
    source: str | None  # source id of the page that documented it, None for a docstring-only part
    page_url: str | None


@dataclass
class _Call:
    docs: list[ApiDoc]
    level: int
    source: str | None
    page_url: str | None


def _spellings(doc: ApiDoc) -> set[str]:
    return {doc.qualified_name} | {alias for alias in doc.aliases if "." in alias}


class AutodocRegistry:
    def __init__(self, warn: Warn) -> None:
        self.warn = warn
        self.calls: list[_Call] = []
        self.entries: dict[str, Documented] = {}
        self.missing: list[MissingName] = []  # directives naming what the installed torch lacks (drift)
        self.repeats = 0  # spellings dropped because the same object is documented elsewhere
        self._rendered: dict[int, str] | None = None

    def hook(self, *, origin: str, source: str | None, page_url: str | None) -> PageAutodocHook:
        """A hook for one page: tracks that page's current module across its directives."""
        current_module: list[str | None] = [None]

        def resolve(directive: str, argument: str, options: dict[str, str], line: int, level: int) -> str:
            if directive == "currentmodule":
                module = argument.strip()
                current_module[0] = None if module in ("", "None") else module
                return ""
            if directive == "automodule":
                current_module[0] = argument.strip() or current_module[0]
            try:
                docs = docstrings.document(
                    directive,
                    argument,
                    options=options,
                    current_module=current_module[0],
                    origin=origin,
                    line=line,
                    warn=self.warn,
                    missing=self.missing.append,
                )
            except _DOCSTRING_FAILURES as exc:
                # One docstring the converter cannot handle must not sink the build: the directive
                # is dropped with a warning naming the page and line (so --strict fails).
                name = argument.strip().splitlines()[0] if argument.strip() else ""
                self.warn(
                    origin,
                    line,
                    f"{directive} {name}: docstring could not be converted ({type(exc).__name__}: {str(exc)[:120]})",
                )
                return ""
            if not docs:
                return ""
            self.calls.append(_Call(docs, level, source, page_url))
            return _PLACEHOLDER.format(len(self.calls) - 1) + "\n"

        return resolve

    def _winners(self) -> set[tuple[int, int]]:
        """(call, doc) positions to render: per object, the one documented under the spelling with the
        fewest dots, first met on ties."""
        group_of: dict[str, int] = {}
        groups: list[list[tuple[int, int, str]]] = []
        for call_index, call in enumerate(self.calls):
            for doc_index, doc in enumerate(call.docs):
                names = _spellings(doc)
                found = sorted({group_of[n] for n in names if n in group_of})
                if found:
                    target = found[0]
                    for other in found[1:]:  # this doc links groups seen apart: merge them
                        groups[target].extend(groups[other])
                        for _, _, name in groups[other]:
                            group_of[name] = target
                        groups[other] = []
                else:
                    target = len(groups)
                    groups.append([])
                # Ranked by the spelling the page used (every spelling now shares one canonical name).
                groups[target].append((call_index, doc_index, doc.documented_name))
                for name in names:
                    group_of[name] = target
        winners: set[tuple[int, int]] = set()
        for members in groups:
            if members:
                best = min(members, key=lambda m: (m[2].count("."), m[0], m[1]))
                winners.add((best[0], best[1]))
                self.repeats += len(members) - 1
        return winners

    def _render_all(self) -> dict[int, str]:
        winners = self._winners()
        rendered: dict[int, str] = {}
        for call_index, call in enumerate(self.calls):
            parts: list[str] = []
            for doc_index, doc in enumerate(call.docs):
                if (call_index, doc_index) not in winners:
                    continue
                # render_api renders members under their class; each is its own catalog entry.
                for entry in walk(doc):
                    if not is_bare_module(entry):  # rendered as nothing: no entry to place
                        self.entries.setdefault(entry.qualified_name, Documented(entry, call.source, call.page_url))
                parts.append(render_api(doc, level=call.level).strip("\n"))
            rendered[call_index] = "\n\n".join(part for part in parts if part)
        return rendered

    def expand(self, markdown: str) -> str:
        """Replace the placeholders in a converted page with the rendered entries (or nothing)."""
        if self._rendered is None:
            self._rendered = self._render_all()
        lines = markdown.split("\n")
        out: list[str] = []
        skip_blank = False
        for line in lines:
            if skip_blank and not line.strip():
                skip_blank = False
                continue
            skip_blank = False
            match = _PLACEHOLDER_RE.match(line)
            if not match:
                out.append(line)
                continue
            prefix = match.group("prefix")  # a quote marker or list indentation the entry sits in
            text = self._rendered[int(match.group("index"))]
            if text:
                out.extend(prefix + row if row else prefix.rstrip() for row in text.split("\n"))
            elif out and not out[-1].strip():
                skip_blank = True  # nothing rendered here: do not leave two blank lines behind
        return "\n".join(out)

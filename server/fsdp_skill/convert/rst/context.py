"""What a directive handler may use of the RST converter: a small Protocol, so `directives` needs no
import of `converter` (the converter imports the directive table and passes it in; no cycle).

Also the two callback types every converter entry point takes: `Warn` (page, line, message) and
`AutodocHook` (directive, argument, options, line → markdown).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from fsdp_skill.convert.rst.blocks import Block

Warn = Callable[[str, int, str], None]
AutodocHook = Callable[[str, str, dict[str, str], int], str]

__all__ = ["AutodocHook", "ExplicitMarkup", "RstContext", "Warn"]


class RstContext(Protocol):
    """The converter as a directive sees it: where it is, how to report, and how to convert nested RST."""

    origin: str
    warn: Warn
    autodoc: AutodocHook | None
    resolve_uri: Callable[[str], str] | None

    def blocks(self, lines: list[str], line0: int) -> list[Block]:
        """Convert body lines (block indentation 0) whose first line is source line `line0`."""
        ...

    def inline(self, text: str) -> str:
        """Convert the inline markup of one paragraph."""
        ...

    def cell(self, lines: list[str]) -> str:
        """Convert a table cell's RST to one markdown line."""
        ...


# The explicit-markup handler (`.. name::` blocks, targets, comments) the converter is given.
ExplicitMarkup = Callable[[RstContext, list[str], int], list[Block]]

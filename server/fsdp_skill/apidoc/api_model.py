"""The structured API doc of one documented object: what `docstrings` builds and `api_render` renders.

Its own module so the builder and the renderer share the model (and the heading level docstring
prose is converted at) without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fsdp_skill.apidoc.doctests import ParsedExample
from fsdp_skill.core.catalog import Deprecation, Parameter

__all__ = ["DESCRIPTION_HEADING_BASE", "ApiDoc", "walk"]

# Docstring prose is converted with its top heading at this level; the renderer shifts it below the entry's heading.
DESCRIPTION_HEADING_BASE = 4


@dataclass
class ApiDoc:
    qualified_name: str
    kind: str
    module: str
    signature: str | None = None
    summary: str = ""
    # The docstring's first paragraph as converted markdown when it is the summary (rendered above
    # `description`, which then holds the rest: the catalog keeps summary and description apart).
    lead: str = ""
    description: str = ""
    parameters: list[Parameter] = field(default_factory=list)
    returns: str | None = None
    raises: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    deprecation: Deprecation | None = None
    examples: list[ParsedExample] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    members: list[ApiDoc] = field(default_factory=list)
    # Examples already shown inside `description` (a `>>>` block in the prose), by index into
    # `examples`: the renderer must not print them twice.
    inline_examples: set[int] = field(default_factory=set)
    # The spelling the page documented it under (qualified_name is the canonical public path):
    # Sphinx's anchor upstream, and what the build compares to pick one of several spellings.
    documented_name: str = ""

    def __post_init__(self) -> None:
        self.documented_name = self.documented_name or self.qualified_name


def walk(doc: ApiDoc) -> list[ApiDoc]:
    """doc and all its members, depth first (each member is its own catalog entry)."""
    out = [doc]
    for member in doc.members:
        out.extend(walk(member))
    return out

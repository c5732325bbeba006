"""The structured API doc of one documented object: what `docstrings` builds and `api_render` renders.

Its own module so the builder and the renderer share the model (and the heading level docstring
prose is converted at) without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fsdp_skill.apidoc.doctests import ParsedExample
from fsdp_skill.core.catalog import Deprecation, Parameter

__all__ = ["DESCRIPTION_HEADING_BASE", "ApiDoc", "MissingName", "walk"]

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


@dataclass(frozen=True)
class MissingName:
    """An autodoc directive names something the installed torch does not have.

    Not a conversion problem but API drift: the build lists it in api-drift.md instead of warning,
    so it travels as this event rather than as warning text someone would have to parse back.
    """

    directive: str
    name: str  # as the page wrote it
    current_module: str | None  # the page's current module when the directive ran
    origin: str  # the page (or topics.toml) naming it
    line: int
    why: str | None = None  # a module on its path fails to import (introspect.import_failure), if so

    @property
    def qualified_name(self) -> str:
        """The name with the page's current module in front unless it is already absolute."""
        if self.name.startswith("torch.") or not self.current_module:
            return self.name
        return f"{self.current_module}.{self.name}"

    @property
    def where(self) -> str:
        return f"{self.origin}:{self.line}"

    def message(self) -> str:
        """The warning a caller with no use for the event prints instead."""
        module = f" (current module {self.current_module})" if self.current_module else ""
        why = f": {self.why}" if self.why else ""
        return f"{self.directive} {self.name}: cannot import it from the installed torch{module}{why}"


def walk(doc: ApiDoc) -> list[ApiDoc]:
    """doc and all its members, depth first (each member is its own catalog entry)."""
    out = [doc]
    for member in doc.members:
        out.extend(walk(member))
    return out

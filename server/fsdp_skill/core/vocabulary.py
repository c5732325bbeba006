"""Words several stages must spell the same way: the kinds of searchable document and the example statuses.

Stdlib only (the example runner in `fsdp_skill.verify` imports it and must run with nothing but torch).
The `Literal` types are what the MCP tool schemas and pydantic models show; the tuples are the same
words for validation, CLI choices and report order.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "SKILL_PAGES",
    "DOCUMENT_KINDS",
    "EXAMPLE_STATUSES",
    "MUTANT_STATUSES",
    "NOT_VERIFIED",
    "PATTERN_STATUSES",
    "STATUS_FILTERS",
    "DocumentKind",
    "ExampleStatus",
    "MutantStatus",
    "NotVerified",
    "StatusFilter",
]

# What the search index holds and search_docs returns: a reference section, an API entry, a doctest
# example, a runnable pattern, a part of the skill's own pages (a SKILL.md pitfall, decision table or
# recipe, an assets/tuning.md section), what one torch release changed (references/versions.md's sections).
DocumentKind = Literal["section", "api", "example", "pattern", "skill", "release"]
DOCUMENT_KINDS: tuple[DocumentKind, ...] = get_args(DocumentKind)

# A verification result, in the order reports list them: matched, matched only with declared stand-ins
# (page code, never plain "passed"), the docs are wrong, statically checked only (nothing ran), not run, broke.
ExampleStatus = Literal["passed", "passed-with-stand-ins", "doc-bug", "checked", "skipped", "failed"]
EXAMPLE_STATUSES: tuple[ExampleStatus, ...] = get_args(ExampleStatus)
# A pattern is a script, not documented output: it passes, fails or is skipped, never a doc-bug.
PATTERN_STATUSES: tuple[ExampleStatus, ...] = ("passed", "skipped", "failed")
# A mutant (a check or pattern with its claim made false) must make its run fail: killed. Survived: the run
# passed, so the check does not test its claim; failed: the mutant could not be applied or broke the script.
MutantStatus = Literal["killed", "survived", "skipped", "failed"]
MUTANT_STATUSES: tuple[MutantStatus, ...] = get_args(MutantStatus)
# What the server says of an example the report has no row for.
NotVerified = Literal["not verified"]
NOT_VERIFIED: NotVerified = "not verified"
# What a caller may filter examples by (nested Literals flatten: the four statuses, then "not verified").
StatusFilter = Literal[ExampleStatus, NotVerified]
STATUS_FILTERS: tuple[StatusFilter, ...] = get_args(StatusFilter)

# The skill's own hand-written pages: cut into search documents of kind "skill" at regenerate, and served by
# read_reference (a skill result must open), relative to the repository root.
SKILL_PAGES: tuple[str, ...] = ("SKILL.md", "assets/tuning.md", "assets/traps.md")

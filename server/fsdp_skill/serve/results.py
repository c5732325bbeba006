"""Pydantic models of what the tools return: the MCP structured output and the CLI's --json.

Field descriptions end up in each tool's output schema, so they are written for the model reading it.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from fsdp_skill.core.vocabulary import EXAMPLE_STATUSES, NOT_VERIFIED, STATUS_FILTERS, DocumentKind

__all__ = [
    "Parameter",
    "Deprecation",
    "SearchResult",
    "SearchResponse",
    "VerificationStatus",
    "ExampleBrief",
    "ApiEntryResult",
    "ReferenceInfo",
    "ReferenceList",
    "ReferencePage",
    "ExampleInfo",
    "ExampleList",
    "DoctestStepResult",
    "ExampleDetail",
    "PatternInfo",
    "PatternList",
    "VerifyResult",
]

_STATUSES = " | ".join(EXAMPLE_STATUSES)


class Parameter(BaseModel):
    # Mirrors catalog.Parameter; kept separate so serving does not import the catalog's models.
    name: str
    type: str | None = None
    default: str | None = None
    description: str = ""


class Deprecation(BaseModel):
    message: str
    replacement: str | None = Field(default=None, description="What to use instead.")


class SearchResult(BaseModel):
    id: str = Field(
        description="Section id 'file.md#anchor', API qualified name, example id 'symbol#N', pattern name, "
        "a part of the skill's own pages 'SKILL.md#pitfall-3' / 'assets/traps.md#anchor', or a release "
        "'versions.md#torch-2141-against-2130'."
    )
    kind: DocumentKind
    title: str
    symbol: str | None = Field(description="Qualified API name this result documents, if any.")
    reference: str | None = Field(
        description="File under references/ holding it (a pattern's or skill page's file: relative to the skill root)."
    )
    anchor: str | None = Field(
        description="Anchor in that file; pass it as read_reference(section=...) (a skill page: the part's id, "
        "e.g. pitfall-3)."
    )
    url: str | None = Field(description="The upstream docs page for it.")
    snippet: str = Field(
        description="At most ~400 characters of whole markdown blocks; code blocks are never left open."
    )
    score: float
    code: str | None = Field(
        default=None,
        description="For a section: how its code blocks fared in verification.md, "
        "e.g. '2 code blocks: 1 passed, 1 checked'; get_example('<file.md#anchor:N>') serves each.",
    )


class SearchResponse(BaseModel):
    query: str
    torch_version: str
    mode: str  # "semantic" (lexical fused with multilingual embeddings) or "lexical"
    results: list[SearchResult]
    note: str | None = Field(
        None, description="In lexical mode, for a query with words in another script: they were not matched, "
        "and how to enable the semantic side."
    )


class ApiListPage(BaseModel):
    module: str | None
    start_index: int
    end_index: int
    total: int
    next_start_index: int | None
    text: str  # "## module" headings, one "- name: summary" line per public name, then how to get the next page
    torch_version: str


class VerificationStatus(BaseModel):
    backend: str
    world_size: int
    status: str = Field(description=f"{_STATUSES}, or '{NOT_VERIFIED}'.")
    reason: str | None = None
    seconds: float | None = None
    warnings: list[str] = Field(default_factory=list)
    torch_version: str | None = Field(
        None, description="The torch the row ran on (the NCCL report comes from a GPU machine's own torch)."
    )


class ExampleBrief(BaseModel):
    id: str
    code: str
    world_size: int
    status: str = Field(description="Latest verification status, e.g. 'passed (gloo, 2 ranks)' or 'not verified'.")


class ApiEntryResult(BaseModel):
    qualified_name: str
    kind: str
    module: str
    signature: str | None
    summary: str
    description: str
    parameters: list[Parameter]
    returns: str | None
    raises: list[str]
    notes: list[str]
    deprecation: Deprecation | None
    examples: list[ExampleBrief]
    reference: str
    anchor: str
    url: str | None
    aliases: list[str]
    torch_version: str
    other_matches: list[str] = Field(
        default_factory=list, description="Other API entries the same short name could mean; call get_api with one."
    )
    since: str | None = Field(default=None, description="From which torch release it exists (and its parameters, "
                              "deprecation, earlier names) across the releases read; api_history has the detail.")


class ReferenceInfo(BaseModel):
    name: str
    title: str
    description: str
    tokens: int = Field(description="Approximate size in tokens (characters / 4).")


class ReferenceList(BaseModel):
    torch_version: str
    references: list[ReferenceInfo]


class ReferencePage(BaseModel):
    name: str
    section: str | None
    start_index: int
    end_index: int = Field(description="Character offset where this page ends; the next page starts here.")
    total_chars: int
    next_start_index: int | None = Field(description="start_index for the next page, or null on the last page.")
    text: str


class ExampleInfo(BaseModel):
    id: str = Field(description="Pass it to get_example for the code, expected output and full verification results.")
    status: str = Field(description=f"{' | '.join(STATUS_FILTERS)} (several joined by '/' when backends disagree).")
    line: str = Field(description="Ranks and device it runs on; for a non-passing example, why.")


class ExampleList(BaseModel):
    total: int = Field(description="Examples matching the filters, over all pages.")
    start_index: int
    next_start_index: int | None = Field(description="start_index for the next page, or null on the last page.")
    examples: list[ExampleInfo]
    note: str = Field(description="Which page this is and how to get the next one.")


class DoctestStepResult(BaseModel):
    source: str
    expected: str | None = None
    expected_by_rank: dict[int, str] = Field(default_factory=dict)


class ExampleDetail(BaseModel):
    id: str
    symbol: str
    reference: str
    anchor: str
    url: str | None
    code: str
    steps: list[DoctestStepResult]
    world_size: int
    device: str
    requires: list[str]
    skip: str | None
    status: str
    verification: list[VerificationStatus]
    torch_version: str
    kind: str | None = Field(
        default=None, description="Page code only: program, rank-function, continuation, fragment, shell or output."
    )
    language: str | None = Field(default=None, description="Page code only: the block's language.")
    origin: str | None = Field(default=None, description="Page code only: page, tutorial or docstring.")


class PatternInfo(BaseModel):
    name: str
    title: str
    summary: str
    file: str
    world_size: int
    requires: list[str]
    tags: list[str]
    launch: str
    min_torch: str | None = Field(default=None, description="The oldest torch (major.minor) it runs on, computed "
                                  "from the names and arguments it uses across the releases read.")


class PatternList(BaseModel):
    patterns: list[PatternInfo]


class PatternDetail(PatternInfo):
    source: str = Field(description="The script's full text.")
    status: str
    verification: list[VerificationStatus]


class VerifyResult(BaseModel):
    name: str
    backend: str
    world_size: int
    results: list[VerificationStatus]
    log_tail: str = Field(default="", description="Last lines of the runner's output, when it printed any.")

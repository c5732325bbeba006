"""The catalog: pydantic models of everything the build produces, and their load/save.

`references/catalog.json` is the one contract between the build (upstream → references) and every
consumer (index, server, verify runner, SKILL.md checks). Consumers downstream of the catalog never
read upstream pages or torch again. The verify runner reads the JSON with the stdlib alone (it must
run from a plain clone with only torch), so keep field names stable and bump SCHEMA_VERSION when a
field changes meaning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fsdp_skill.core.atomic import write_atomic
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.files import read_regular_text

__all__ = [
    "PAGE_CODE_KINDS",
    "SCHEMA_VERSION",
    "ApiEntry",
    "Catalog",
    "CatalogError",
    "Deprecation",
    "DoctestStep",
    "Example",
    "PageCode",
    "Parameter",
    "Pattern",
    "Reference",
    "Section",
    "SkillDoc",
    "Source",
    "dump_catalog",
    "load_catalog",
    "save_catalog",
]

SCHEMA_VERSION = 2

ApiKind = Literal["function", "class", "method", "attribute", "property", "module", "data"]


class _Model(BaseModel):
    # Unknown keys are an error: a catalog written by another schema should fail loudly, not half-load.
    model_config = ConfigDict(extra="forbid")


class Source(_Model):
    """One upstream file the references were built from."""

    id: str = Field(description="Stable id, '<repo>:<path>', e.g. 'pytorch/pytorch:docs/source/fsdp.md'.")
    repo: str
    path: str
    ref: str = Field(description="Git ref requested (tag such as v2.13.0, or a branch).")
    commit: str | None = Field(default=None, description="Resolved commit, when known.")
    url: str = Field(description="Raw download URL.")
    sha256: str
    licence: str = "BSD-3-Clause"


class Reference(_Model):
    """One generated topic file under references/."""

    name: str = Field(description="File name, e.g. 'fsdp2.md'.")
    title: str
    description: str = Field(description="One line: what the file covers and when to read it.")
    sources: list[str] = Field(default_factory=list, description="Source ids it was built from.")
    lines: int = 0
    tokens: int = Field(default=0, description="Approximate size in tokens (characters / 4).")


class Section(_Model):
    """A heading and the markdown under it (up to the next heading of any level)."""

    id: str = Field(description="'<reference>#<anchor>'.")
    reference: str
    anchor: str
    title: str
    level: int
    breadcrumb: list[str] = Field(default_factory=list, description="Titles of the enclosing headings.")
    markdown: str
    source: str | None = Field(default=None, description="Source id the text came from.")
    line: int | None = Field(default=None, description="1-based line in the reference file.")
    url: str | None = Field(default=None, description="Upstream rendered-docs URL.")


class Parameter(_Model):
    name: str
    type: str | None = None
    default: str | None = None
    description: str = ""


class Deprecation(_Model):
    message: str
    replacement: str | None = None

    def text(self, quote: str = "") -> str:
        """The message, plus "Use <replacement> instead." unless the message already names it."""
        if self.replacement and self.replacement not in self.message:
            return f"{self.message} Use {quote}{self.replacement}{quote} instead."
        return self.message


class ApiEntry(_Model):
    """One documented public name, resolved from the installed torch's docstring."""

    qualified_name: str
    kind: ApiKind
    module: str = Field(description="Module it is documented under (its public import path).")
    signature: str | None = None
    summary: str = ""
    description: str = Field(default="", description="Docstring body as CommonMark (without params/returns/examples).")
    parameters: list[Parameter] = Field(default_factory=list)
    returns: str | None = None
    raises: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="Notes and warnings, markdown.")
    deprecation: Deprecation | None = None
    examples: list[str] = Field(default_factory=list, description="Example ids.")
    reference: str
    anchor: str
    url: str | None = None
    aliases: list[str] = Field(
        default_factory=list, description="Other spellings: short name, dist.X, re-export paths."
    )
    messages: list[str] = Field(
        default_factory=list,
        description="Error and warning messages its own source raises (a static scan of the installed torch).",
    )


class DoctestStep(_Model):
    """One `>>>` statement (with its `...` continuation lines) and the output documented under it."""

    source: str
    expected: str | None = Field(default=None, description="Output shared by all ranks, if not per rank.")
    expected_by_rank: dict[int, str] = Field(default_factory=dict, description="Output lines tagged '# Rank N'.")
    line: int | None = None


class Example(_Model):
    """A runnable `>>>` example from a docstring, or a fenced example from a page."""

    id: str = Field(description="'<qualified_name>#<N>' (N from 1), unique.")
    symbol: str
    reference: str
    anchor: str
    code: str = Field(description="The statements as plain Python (prompts stripped).")
    steps: list[DoctestStep] = Field(default_factory=list)
    world_size: int = Field(default=1, description="World size the example assumes (from its text, else 1).")
    device: Literal["cpu", "cuda"] = "cpu"
    requires: list[str] = Field(default_factory=list, description="e.g. cuda, numpy, rpc, multi-gpu.")
    skip: str | None = Field(default=None, description="Upstream xdoctest SKIP reason, if any.")
    source: str | None = None
    line: int | None = None


PageCodeKind = Literal["program", "rank-function", "continuation", "fragment", "shell", "output"]
PAGE_CODE_KINDS: tuple[str, ...] = ("program", "rank-function", "continuation", "fragment", "shell", "output")


class PageCode(_Model):
    """A code block of a reference (not a generated signature or a `>>>` doctest: those are `Example`s)."""

    id: str = Field(description="'<reference>#<anchor>:<N>', N = the block's position in its section, from 1.")
    reference: str
    anchor: str
    section: str = Field(description="Title of the section holding the block.")
    position: int
    source: str | None = Field(default=None, description="Source id of the page or tutorial it came from.")
    origin: Literal["page", "tutorial", "docstring"] = "page"
    line: int = Field(description="1-based line of the opening fence in the reference file.")
    language: str
    kind: PageCodeKind
    code: str
    uses: list[str] = Field(default_factory=list, description="Ids of earlier blocks of the page it builds on.")
    launcher: str | None = Field(
        default=None, description="Rank function: id of the block with the page's launcher template."
    )
    defines: list[str] = Field(default_factory=list, description="Top-level names it leaves defined for later blocks.")
    output: str | None = Field(default=None, description="Output the page shows for it (the text block right after).")


class Pattern(_Model):
    """A commented, runnable script under assets/patterns/."""

    name: str
    title: str
    summary: str
    file: str = Field(description="Path relative to the repository root.")
    world_size: int = 2
    requires: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    launch: str = Field(default="", description="The torchrun command line that runs it.")
    min_torch: str | None = Field(default=None, description="The oldest torch (major.minor) it runs on, from the "
                                  "API timeline (its header's min_torch line).")


class SkillDoc(_Model):
    """A part of the skill's own pages (SKILL.md, assets/tuning.md): a pitfall, a decision table, the core
    recipe, a tuning section; cut by `build.skill_docs` when regenerating."""

    id: str = Field(description="'<file>#<anchor>', e.g. 'SKILL.md#pitfall-3'.")
    file: str = Field(description="Path relative to the repository root.")
    anchor: str
    title: str
    section: str = Field(description="Title of the `##` section it is in.")
    line: int = Field(description="1-based line of its first line in the file.")
    markdown: str = Field(description="Its text, sliced from the file.")
    checks: list[str] = Field(default_factory=list, description="Claim checks it links, relative to the root.")
    check_text: str = Field(default="", description="Those checks' claims and header docstrings.")
    messages: list[str] = Field(
        default_factory=list, description="torch.distributed messages it quotes part of (build.torch_messages)."
    )


class Catalog(_Model):
    schema_version: int = SCHEMA_VERSION
    torch_version: str = Field(description="Version of the torch whose docstrings were read, e.g. '2.13.0'.")
    ref: str = Field(description="Upstream git ref of the doc pages, e.g. 'v2.13.0'.")
    sources: list[Source] = Field(default_factory=list)
    references: list[Reference] = Field(default_factory=list)
    sections: list[Section] = Field(default_factory=list)
    api: list[ApiEntry] = Field(default_factory=list)
    examples: list[Example] = Field(default_factory=list)
    patterns: list[Pattern] = Field(default_factory=list)
    page_code: list[PageCode] = Field(default_factory=list)
    skill: list[SkillDoc] = Field(default_factory=list, description="SKILL.md and assets/tuning.md, cut up.")


class CatalogError(UserError):
    """The catalog file is missing, unreadable or of another schema; the message says what to do."""


def load_catalog(path: Path) -> Catalog:
    try:
        raw = read_regular_text(path)
    except FileNotFoundError:
        raise CatalogError(f"{path} does not exist: run `fsdp-skill regenerate` to build it") from None
    except UnicodeDecodeError as exc:  # was a traceback
        raise CatalogError(f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}): "
                           "regenerate it with `fsdp-skill regenerate`, or reinstall the skill") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{path} is not valid JSON ({exc}): regenerate it with `fsdp-skill regenerate`") from None
    except RecursionError:
        raise CatalogError(f"{path} is not a catalog (JSON nested too deeply): regenerate it with "
                           "`fsdp-skill regenerate`") from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise CatalogError(
            f"{path} has schema_version {version!r}, this code reads {SCHEMA_VERSION}: "
            "run `fsdp-skill regenerate`, or update the package"
        )
    return Catalog.model_validate(data)


def dump_catalog(catalog: Catalog) -> str:
    """Deterministic JSON text (sorted keys, fixed indent, trailing newline)."""
    return json.dumps(catalog.model_dump(mode="json"), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def save_catalog(catalog: Catalog, path: Path) -> None:
    write_atomic(path, dump_catalog(catalog))

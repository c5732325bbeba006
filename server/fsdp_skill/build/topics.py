"""The topic map (assets/topics.toml): which pages, sections and APIs make up each reference file.

Loading checks what can be checked without converting a page: the TOML shape, unique topic names,
that every part names a declared source, and that every declared page is used or excused. The
checks that need the converted page (section titles exist, nothing claimed twice, a split page
fully claimed) live in `assemble`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import repo_root
from fsdp_skill.upstream.sources import DeclaredSource

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML through the tomli backport.
    import tomli as tomllib

TOPICS_FILE = "assets/topics.toml"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Part(_Strict):
    """One piece of a topic: a page, some of its sections or APIs, or one docstring."""

    source: str | None = Field(default=None, description="Source id '<repo>:<path>'.")
    sections: tuple[str, ...] = ()
    preamble: bool = False
    apis: tuple[str, ...] = ()
    autodoc: str | None = Field(default=None, description="Directive for an API no page documents.")
    argument: str | None = None
    arguments: tuple[str, ...] = Field(default=(), description="Several names for the same directive.")
    options: dict[str, str] = Field(default_factory=dict)
    url: str | None = Field(default=None, description="Docs URL for an autodoc part; {version} allowed.")
    title: str | None = Field(default=None, description="A level-2 heading placed above the part.")

    @model_validator(mode="after")
    def _one_kind(self) -> Part:
        if (self.source is None) == (self.autodoc is None):
            raise ValueError("set exactly one of `source` or `autodoc`")
        if self.autodoc is not None and bool(self.argument) == bool(self.arguments):
            raise ValueError("an `autodoc` part needs `argument` (a qualified name) or `arguments` (a list of them)")
        if self.source is not None and (self.argument or self.arguments or self.options or self.url):
            raise ValueError("`argument`, `arguments`, `options` and `url` belong to `autodoc` parts")
        if self.apis and (self.sections or self.preamble):
            raise ValueError("a part takes either `apis` or `sections`/`preamble`, not both")
        return self

    @property
    def names(self) -> tuple[str, ...]:
        """The qualified names an autodoc part documents."""
        return (self.argument,) if self.argument else self.arguments

    @property
    def whole_page(self) -> bool:
        return self.source is not None and not (self.sections or self.preamble or self.apis)


class Topic(_Strict):
    name: str
    title: str
    description: str
    parts: tuple[Part, ...]

    @property
    def file_name(self) -> str:
        return f"{self.name}.md"


class Unused(_Strict):
    source: str
    reason: str


class TopicMap(_Strict):
    topics: tuple[Topic, ...]
    unused: tuple[Unused, ...] = ()

    def split_sources(self) -> set[str]:
        """Pages that are divided between topics (by sections or APIs) rather than used whole."""
        return {p.source for t in self.topics for p in t.parts if p.source and not p.whole_page}


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else err["msg"]


def parse_topics(text: str, *, where: str, pages: list[DeclaredSource]) -> TopicMap:
    """Parse and check a topic map against the declared pages (UserError naming the problem)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: invalid TOML: {exc}") from None
    try:
        topic_map = TopicMap.model_validate(raw)
    except ValidationError as exc:
        raise UserError(f"{where}: {_first_error(exc)}") from None
    declared = {page.id for page in pages}
    names: set[str] = set()
    used: set[str] = set()
    for topic in topic_map.topics:
        if not _NAME_RE.match(topic.name) or topic.name == "api-drift":
            raise UserError(
                f"{where}: topic name {topic.name!r} must be lower-case letters, digits and '-' (and not 'api-drift')"
            )
        if topic.name in names:
            raise UserError(f"{where}: topic {topic.name!r} is declared twice")
        names.add(topic.name)
        if not topic.parts:
            raise UserError(f"{where}: topic {topic.name!r} has no [[topics.parts]]")
        for part in topic.parts:
            if part.source is not None:
                if part.source not in declared:
                    raise UserError(
                        f"{where}: topic {topic.name!r} uses {part.source!r}, which assets/sources.toml does not "
                        "declare as a page"
                    )
                used.add(part.source)
    for unused in topic_map.unused:
        if unused.source not in declared:
            raise UserError(f"{where}: [[unused]] {unused.source!r} is not a declared page")
        if unused.source in used:
            raise UserError(f"{where}: {unused.source!r} is listed under [[unused]] but topic parts use it")
    missing = sorted(declared - used - {u.source for u in topic_map.unused})
    if missing:
        raise UserError(
            f"{where}: {', '.join(missing)} declared in assets/sources.toml but used by no topic: "
            "add it to a topic or to [[unused]] with a reason"
        )
    return topic_map


def load_topics(pages: list[DeclaredSource], root: Path | None = None) -> TopicMap:
    file = (root or repo_root()) / TOPICS_FILE
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(
            f"{file} not found: the topic map (which pages go into which reference file) is declared there"
        ) from None
    return parse_topics(text, where=str(file), pages=pages)

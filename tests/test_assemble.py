"""The topic map against converted pages: cutting by sections and APIs, and every misfit reported."""

from __future__ import annotations

import pytest

from fsdp_skill.build.assemble import ConvertedPage, TopicMapError, assemble, topic_body
from fsdp_skill.build.topics import parse_topics
from fsdp_skill.core.errors import UserError
from fsdp_skill.upstream.sources import DeclaredSource

PAGE_ID = "pytorch/pytorch:docs/source/distributed.md"
NOTE_ID = "pytorch/pytorch:docs/source/notes/ddp.md"
PAGE = """# Distributed

Intro text.

## Backends

Backend text.

### Which backend?

Use NCCL.

## Collective functions

<a id="torch.distributed.all_reduce"></a>

### all_reduce

All-reduce doc.

<a id="torch.distributed.all_gather_object"></a>

### all_gather_object

Object doc.

## Logging

Log text.
"""


def declared(path: str) -> DeclaredSource:
    return DeclaredSource(
        repo="pytorch/pytorch", path=path, kind="page", dir="pytorch", licence="BSD-3-Clause",
        docs_root="docs/source", docs_url_template="https://docs.pytorch.org/docs/{version}/{page}.html",
    )


PAGES = [declared("docs/source/distributed.md"), declared("docs/source/notes/ddp.md")]


def topic_map(toml: str):
    return parse_topics(toml, where="topics.toml", pages=PAGES)


def converted() -> dict[str, ConvertedPage]:
    return {
        PAGE_ID: ConvertedPage(PAGE_ID, PAGE, "https://docs/distributed.html"),
        NOTE_ID: ConvertedPage(NOTE_ID, "# DDP notes\n\n## Example\n\nText.\n", "https://docs/notes/ddp.html"),
    }


GOOD = f"""
[[topics]]
name = "setup"
title = "Setup"
description = "d"
[[topics.parts]]
source = "{PAGE_ID}"
preamble = true
sections = ["Backends", "Logging"]

[[topics]]
name = "collectives"
title = "Collectives"
description = "d"
[[topics.parts]]
source = "{PAGE_ID}"
sections = ["Collective functions"]

[[topics]]
name = "objects"
title = "Objects"
description = "d"
[[topics.parts]]
source = "{PAGE_ID}"
title = "Object functions"
apis = ["torch.distributed.all_gather_object"]

[[topics]]
name = "ddp"
title = "DDP"
description = "d"
[[topics.parts]]
source = "{NOTE_ID}"
"""


def test_sections_preamble_and_moved_apis_land_in_their_topics() -> None:
    chunks = assemble(topic_map(GOOD), converted(), {})
    setup = topic_body(chunks["setup"])[0]
    assert setup.startswith("Intro text.\n\n## Backends\n\nBackend text.\n\n### Which backend?")
    assert "## Logging\n\nLog text." in setup
    assert "# Distributed" not in setup  # the page title is not part of any topic
    collectives = topic_body(chunks["collectives"])[0]
    assert "### all_reduce" in collectives and "all_gather_object" not in collectives
    objects = topic_body(chunks["objects"])[0]
    assert objects.startswith("## Object functions\n\n")
    assert '<a id="torch.distributed.all_gather_object"></a>\n\n### all_gather_object' in objects
    ddp = topic_body(chunks["ddp"])[0]
    assert ddp.startswith("## DDP notes\n\n### Example")  # a whole page: its title becomes level 2


def test_chunks_remember_their_source_for_provenance() -> None:
    chunks = assemble(topic_map(GOOD), converted(), {})
    assert {c.source for c in chunks["objects"]} == {None, PAGE_ID}
    assert chunks["ddp"][0].page_url == "https://docs/notes/ddp.html"


def test_a_section_title_not_on_the_page_is_an_error_naming_it() -> None:
    bad = GOOD.replace('"Logging"', '"Logs"')
    with pytest.raises(TopicMapError, match="section 'Logs'.*no such heading"):
        assemble(topic_map(bad), converted(), {})


def test_an_unclaimed_section_of_a_split_page_is_an_error() -> None:
    bad = GOOD.replace(', "Logging"', "")
    with pytest.raises(TopicMapError, match="section 'Logging'.*is in no topic"):
        assemble(topic_map(bad), converted(), {})


def test_a_section_claimed_by_two_topics_is_an_error() -> None:
    bad = GOOD.replace('sections = ["Collective functions"]', 'sections = ["Collective functions", "Which backend?"]')
    with pytest.raises(TopicMapError, match="claimed by both"):
        assemble(topic_map(bad), converted(), {})


def test_an_api_that_was_not_rendered_on_the_page_is_an_error() -> None:
    bad = GOOD.replace("torch.distributed.all_gather_object", "torch.distributed.nope")
    with pytest.raises(TopicMapError, match="API 'torch.distributed.nope'"):
        assemble(topic_map(bad), converted(), {})


def test_api_headings_are_not_matched_as_section_titles() -> None:
    bad = GOOD.replace('sections = ["Collective functions"]', 'sections = ["Collective functions", "all_reduce"]')
    with pytest.raises(TopicMapError, match="section 'all_reduce'"):
        assemble(topic_map(bad), converted(), {})


def test_a_declared_page_used_by_no_topic_and_not_excused_is_an_error() -> None:
    without_ddp = GOOD.split("[[topics]]\nname = \"ddp\"")[0]
    with pytest.raises(UserError, match="notes/ddp.md declared in assets/sources.toml but used by no topic"):
        topic_map(without_ddp)
    excused = without_ddp + f'\n[[unused]]\nsource = "{NOTE_ID}"\nreason = "duplicate"\n'
    assert [t.name for t in topic_map(excused).topics] == ["setup", "collectives", "objects"]


def test_a_part_naming_an_undeclared_source_is_an_error() -> None:
    with pytest.raises(UserError, match="does not declare"):
        topic_map(GOOD.replace(NOTE_ID, "pytorch/pytorch:docs/source/nope.md"))


def test_a_part_mixing_source_and_autodoc_is_rejected() -> None:
    bad = GOOD + '\n[[topics.parts]]\nsource = "x"\nautodoc = "autoclass"\nargument = "A"\n'
    with pytest.raises(UserError, match="exactly one of `source` or `autodoc`"):
        topic_map(bad)


def test_autodoc_parts_are_placed_with_their_markdown() -> None:
    toml = GOOD + '\n[[topics.parts]]\nautodoc = "autoclass"\nargument = "torch.nn.parallel.DistributedDataParallel"\n'
    entry = '<a id="torch.nn.parallel.DistributedDataParallel"></a>\n\n### DistributedDataParallel\n\nDoc.\n'
    chunks = assemble(topic_map(toml), converted(), {("ddp", 1): (entry, "https://gen/ddp.html")})
    body = topic_body(chunks["ddp"])[0]
    assert body.endswith("## DistributedDataParallel\n\nDoc.\n")

"""The declared sources (assets/sources.toml), URLs, the manifest, and reading the verified cache."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fsdp_skill.core.catalog import Source
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import repo_root
from fsdp_skill.upstream.sources import (
    ManifestEntry,
    cached_path,
    docs_url,
    dump_manifest,
    load_declaration,
    load_pages,
    load_sources,
    raw_url,
    read_cached,
    read_manifest,
    source_record,
    verify_cache,
)
from sources_fixture import REPOS_TOML

MINI_TOML = REPOS_TOML + """
[[sources]]
repo = "pytorch/pytorch"
path = "docs/source/notes/fsdp.rst"
kind = "page"

[[sources]]
repo = "pytorch/tutorials"
path = "intermediate_source/FSDP_tutorial.rst"
kind = "tutorial"
"""


def write_root(tmp_path: Path, toml: str = MINI_TOML) -> Path:
    (tmp_path / "assets").mkdir(parents=True, exist_ok=True)
    (tmp_path / "assets" / "sources.toml").write_text(toml, encoding="utf-8")
    return tmp_path


def write_cache(root: Path, files: dict[str, bytes]) -> None:
    """A cache holding `files` ('<dir>/<path>' -> bytes) with matching manifests."""
    by_dir: dict[str, list[ManifestEntry]] = {}
    for source in load_sources(root):
        data = files[f"{source.dir}/{source.path}"]
        cached_path(root, source).parent.mkdir(parents=True, exist_ok=True)
        cached_path(root, source).write_bytes(data)
        by_dir.setdefault(source.dir, []).append(
            ManifestEntry(
                path=source.path, repo=source.repo, ref="v2.13.0", commit="a" * 40,
                url=raw_url(source.repo, "v2.13.0", source.path), chars=len(data.decode()),
                sha256=hashlib.sha256(data).hexdigest(), licence="BSD-3-Clause",
            )
        )  # fmt: skip
    for repo_dir, entries in by_dir.items():
        (root / "upstream" / repo_dir / "MANIFEST.json").write_text(dump_manifest(entries), encoding="utf-8")


MINI_FILES = {
    "pytorch/docs/source/notes/fsdp.rst": b"FSDP Notes\n==========\n",
    "pytorch-tutorials/intermediate_source/FSDP_tutorial.rst": "Getting Started with FSDP2 \u2014 caf\u00e9\n".encode(),
}


def test_the_declaration_lists_every_page_tutorial_and_licence_the_issue_names() -> None:
    sources = load_sources(repo_root())
    pages = {s.path for s in sources if s.kind == "page"}
    assert {"docs/source/notes/fsdp.rst", "docs/source/elastic/run.md", "docs/source/ddp_comm_hooks.md"} <= pages
    assert {"docs/source/torch_nccl_environment_variables.rst", "docs/source/checkpoint.md",
            "docs/source/distributed.pipelining.md", "docs/source/elastic/rendezvous.md"} <= pages
    assert len(pages) == 20
    assert len([s for s in sources if s.kind == "tutorial"]) == 12
    assert {(s.repo, s.path) for s in sources if s.kind == "licence"} == {
        ("pytorch/pytorch", "LICENSE"),
        ("pytorch/tutorials", "LICENSE"),
    }
    assert all(s.kind != "licence" for s in load_pages(repo_root()))


def test_the_committed_cache_matches_its_manifests_file_for_file() -> None:
    entries = verify_cache(repo_root())
    assert len(entries) == len(load_sources(repo_root()))
    assert all(entry.url and entry.ref and entry.licence for entry in entries)


def test_docs_urls_are_versioned_for_torch_pages_and_drop_the_source_suffix_for_tutorials(tmp_path: Path) -> None:
    page, tutorial = load_sources(write_root(tmp_path))
    assert docs_url(page, "2.13.0+cpu") == "https://docs.pytorch.org/docs/2.13/notes/fsdp.html"
    assert docs_url(page, None) == "https://docs.pytorch.org/docs/stable/notes/fsdp.html"
    assert docs_url(tutorial, "2.13.0") == "https://docs.pytorch.org/tutorials/intermediate/FSDP_tutorial.html"
    assert page.format == "rst" and page.id == "pytorch/pytorch:docs/source/notes/fsdp.rst"


def test_raw_url_is_githubs_raw_file_address() -> None:
    assert (
        raw_url("pytorch/pytorch", "v2.13.0", "docs/source/fsdp.md")
        == "https://raw.githubusercontent.com/pytorch/pytorch/v2.13.0/docs/source/fsdp.md"
    )


@pytest.mark.parametrize(
    ("toml_tail", "message"),
    [
        ('[[sources]]\nrepo = "pytorch/pytorch"\npath = "../escape.md"\nkind = "page"\n', "relative POSIX path"),
        ('[[sources]]\nrepo = "nobody/nothing"\npath = "a.md"\nkind = "page"\n', "has no [repos"),
        ('[[sources]]\nrepo = "pytorch/pytorch"\npath = "docs/source/notes/fsdp.rst"\nkind = "page"\n', "twice"),
        ('[[sources]]\nrepo = "pytorch/pytorch"\npath = "a.md"\nkind = "chapter"\n', "kind"),
        ("[[sources]\n", "invalid TOML"),
    ],
)
def test_a_bad_declaration_is_one_error_naming_the_file_and_the_problem(
    tmp_path: Path, toml_tail: str, message: str
) -> None:
    root = write_root(tmp_path, MINI_TOML + toml_tail)
    with pytest.raises(UserError, match="sources.toml") as info:
        load_declaration(root)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_repository_must_say_whether_it_follows_torch_or_a_default_ref(tmp_path: Path) -> None:
    root = write_root(tmp_path, MINI_TOML.replace('default_ref = "main"\n', ""))
    with pytest.raises(UserError, match="exactly one of pinned_to_torch"):
        load_declaration(root)


def test_read_cached_returns_the_text_and_source_record_the_manifest_provenance(tmp_path: Path) -> None:
    root = write_root(tmp_path)
    write_cache(root, MINI_FILES)
    page, tutorial = load_sources(root)
    assert read_cached(root, tutorial) == "Getting Started with FSDP2 \u2014 caf\u00e9\n"
    record = source_record(root, page)
    assert isinstance(record, Source)
    assert record.id == page.id and record.ref == "v2.13.0" and record.commit == "a" * 40
    assert record.url == "https://raw.githubusercontent.com/pytorch/pytorch/v2.13.0/docs/source/notes/fsdp.rst"
    assert record.sha256 == hashlib.sha256(MINI_FILES["pytorch/docs/source/notes/fsdp.rst"]).hexdigest()


def test_an_edited_cache_file_is_reported_by_name_with_the_command_that_restores_it(tmp_path: Path) -> None:
    root = write_root(tmp_path)
    write_cache(root, MINI_FILES)
    page, _ = load_sources(root)
    cached_path(root, page).write_text("FSDP Notes, edited\n", encoding="utf-8")
    with pytest.raises(UserError) as info:
        read_cached(root, page)
    assert "notes/fsdp.rst does not match" in str(info.value)
    assert "fsdp-skill fetch" in str(info.value)


def test_a_missing_cache_says_to_run_fetch(tmp_path: Path) -> None:
    root = write_root(tmp_path)
    page, _ = load_sources(root)
    with pytest.raises(UserError, match=r"MANIFEST\.json not found; run `fsdp-skill fetch`"):
        read_cached(root, page)


def test_a_corrupt_manifest_is_reported_not_raised_as_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "MANIFEST.json"
    path.write_text('[{"path": "a.md"}]', encoding="utf-8")
    with pytest.raises(UserError, match="is not a valid manifest"):
        read_manifest(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(UserError, match="is not a valid manifest"):
        read_manifest(path)


def test_manifests_are_dumped_sorted_with_every_field_so_rewrites_do_not_diff() -> None:
    b = ManifestEntry(path="b.md", repo="r/r", chars=1, sha256="1")
    a = ManifestEntry(path="a.md", repo="r/r", chars=2, sha256="2", note="kept")
    text = dump_manifest([b, a])
    assert text == dump_manifest([a, b]) and text.endswith("]\n")
    rows = json.loads(text)
    assert [row["path"] for row in rows] == ["a.md", "b.md"]
    assert list(rows[0]) == sorted(rows[0]) and "etag" in rows[0] and rows[1]["note"] is None

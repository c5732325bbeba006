"""`regenerate --check` after a fetch of byte-identical files: only provenance moved, and it says so."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fsdp_skill.build import pipeline as build
from fsdp_skill.core.catalog import Catalog, Reference, Source, dump_catalog
from test_build import no_index

OLD_COMMIT, NEW_COMMIT = "a" * 40, "b" * 40
SHA256 = "c" * 64


def output_at(ref: str, commit: str, body: str = "Text.\n") -> build.Output:
    url = f"https://raw.githubusercontent.com/pytorch/pytorch/{commit}/docs/source/fsdp.md"
    source = Source(id="pytorch/pytorch:docs/source/fsdp.md", repo="pytorch/pytorch", path="docs/source/fsdp.md",
                    ref=ref, commit=commit, url=url, sha256=SHA256)
    catalog = Catalog(torch_version="2.13.0", ref=ref, sources=[source],
                      references=[Reference(name=n, title=n, description="d") for n in ("a.md", "b.md")])
    header = f"| pytorch/pytorch | [`docs/source/fsdp.md`]({url}) | `{commit[:10]}` | BSD-3-Clause |\n\n"
    files = {"a.md": f"# a\n\n{header}{body}", "b.md": f"# b\n\nFrom the pages at `{ref}`.\n",
             "catalog.json": dump_catalog(catalog)}
    return build.Output(files=files, catalog=catalog)


def check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: build.Output) -> int:
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tmp_path))
    monkeypatch.setattr(build, "build_references", lambda root, ref=None: output)
    return build.cli_regenerate(argparse.Namespace(strict=False, check=True, ref=None))


def test_check_after_a_provenance_only_change_says_so_with_a_short_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_index(monkeypatch)
    build.write_output(output_at("snapshot", OLD_COMMIT), tmp_path / "references", tmp_path)
    assert check(tmp_path, monkeypatch, output_at("v2.13.0", NEW_COMMIT)) == 1
    out = capsys.readouterr().out
    assert "provenance: references/a.md" in out and "provenance: references/catalog.json" in out
    assert "differs:" not in out
    assert "3 files differ only in provenance (the upstream ref, commit or URL the cache records" in out
    assert (
        f"-| pytorch/pytorch | [`docs/source/fsdp.md`](https://raw.githubusercontent.com/pytorch/pytorch/{OLD_COMMIT}"
        in out
        and "--- references/a.md" in out
    )
    assert len(out.splitlines()) < 30


def test_check_still_calls_a_content_change_a_difference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_index(monkeypatch)
    build.write_output(output_at("snapshot", OLD_COMMIT), tmp_path / "references", tmp_path)
    assert check(tmp_path, monkeypatch, output_at("v2.13.0", NEW_COMMIT, body="Other text.\n")) == 1
    out = capsys.readouterr().out
    assert "differs: references/a.md" in out and "provenance: references/b.md" in out
    assert "3 files differ from the committed references/ (2 of them only in provenance)" in out

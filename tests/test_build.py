"""`fsdp-skill regenerate`: the golden test, the issue's coverage checks, and the write/check/strict rules."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import warnings
from pathlib import Path

import pytest

from fsdp_skill.build import pipeline as build
from fsdp_skill.build.lint import problems
from fsdp_skill.core.catalog import Catalog, Reference, dump_catalog, load_catalog
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import references_dir, repo_root

REFS = references_dir(repo_root())
# verification.md and verification-nccl.md are written by `verify` (and the NCCL pass), not by the build.
GENERATED = sorted([p.name for p in REFS.glob("*.md") if not p.name.startswith("verification")]
                   + ["catalog.json", "api-history.json"])


@pytest.fixture(scope="module")
def fresh() -> build.Output:
    """One build from the committed cache, shared by the tests that need torch."""
    return build.build_references(repo_root())


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(REFS / "catalog.json")


# --- golden ---------------------------------------------------------------------------------------


@pytest.mark.torch
def test_regenerating_from_the_committed_cache_reproduces_committed_references_byte_for_byte(
    fresh: build.Output,
) -> None:
    assert sorted(fresh.files) == GENERATED
    for name, text in sorted(fresh.files.items()):
        assert (REFS / name).read_text(encoding="utf-8") == text, (
            f"references/{name} differs: run `fsdp-skill regenerate`"
        )


@pytest.mark.torch
def test_the_build_has_no_validation_problems(fresh: build.Output) -> None:
    assert fresh.problems == []


# --- the done-when checks, on the committed output -----------------------------------------


@pytest.mark.torch
def test_every_covered_public_name_is_an_api_entry_or_listed_in_api_drift(catalog: Catalog) -> None:
    from fsdp_skill.apidoc.drift import coverage

    documented = {entry.qualified_name for entry in catalog.api} | {a for entry in catalog.api for a in entry.aliases}
    total, as_entries, drift_only, uncovered = coverage(documented, (REFS / "api-drift.md").read_text(encoding="utf-8"))
    assert uncovered == []
    assert total == as_entries + drift_only > 150


def _doctest_statements(docstring: str) -> list[str]:
    """The `>>>` lines of a docstring, without xdoctest/doctest directive comments (kept as `skip`)."""
    statements = [line.strip()[4:].strip() for line in docstring.splitlines() if line.strip().startswith(">>> ")]
    return [s for s in statements if not re.match(r"#\s*(xdoctest|doctest)\s*:", s)]


@pytest.mark.torch
def test_every_doctest_statement_of_a_covered_public_name_is_in_the_catalog_examples(catalog: Catalog) -> None:
    from fsdp_skill.apidoc import drift, introspect

    by_name = {entry.qualified_name: entry for entry in catalog.api}
    for entry in catalog.api:
        for alias in entry.aliases:
            by_name.setdefault(alias, entry)
    code_by_symbol: dict[str, str] = {}
    for example in catalog.examples:
        code_by_symbol[example.symbol] = code_by_symbol.get(example.symbol, "") + "\n" + example.code
    lost: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in drift.covered_public_names():
            statements = _doctest_statements(introspect.raw_docstring(drift._resolve(name)) or "")
            if not statements:
                continue
            entry = by_name.get(name)
            if entry is None:
                lost.append(f"{name}: has >>> examples but no API entry")
                continue
            code = {line.strip() for line in code_by_symbol.get(entry.qualified_name, "").splitlines()}
            lost += [f"{name}: {s}" for s in statements if s not in code]
    assert lost == []


def test_every_catalog_example_belongs_to_an_api_entry_and_has_a_unique_id(catalog: Catalog) -> None:
    names = {entry.qualified_name for entry in catalog.api}
    ids = [example.id for example in catalog.examples]
    assert len(ids) == len(set(ids))
    assert all(example.symbol in names for example in catalog.examples)
    assert all(example.steps for example in catalog.examples)


@pytest.mark.torch
def test_example_ids_are_the_canonical_public_name_of_their_entry_numbered_from_one(catalog: Catalog) -> None:
    import inspect

    from fsdp_skill.apidoc import introspect

    def canonical(name: str) -> str:
        resolved = introspect.resolve(name, None)
        assert resolved is not None, name
        if inspect.ismodule(resolved.parent):
            return introspect.public_path(name, resolved.obj, resolved.parent)
        owner, _, member = name.rpartition(".")  # a method or attribute: its class's public path
        return f"{canonical(owner)}.{member}"

    by_symbol: dict[str, list[str]] = {}
    for example in catalog.examples:
        by_symbol.setdefault(example.symbol, []).append(example.id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for entry in catalog.api:
            expected = [f"{entry.qualified_name}#{n}" for n in range(1, len(entry.examples) + 1)]
            assert entry.examples == expected == by_symbol.get(entry.qualified_name, [])
            if entry.examples:
                assert canonical(entry.qualified_name) == entry.qualified_name


def test_catalog_world_sizes_follow_stated_sizes_meshes_and_rank_lists(catalog: Catalog) -> None:
    sizes = {example.id: example.world_size for example in catalog.examples}
    assert {
        name: sizes[f"torch.distributed.{name}#1"]
        for name in (
            "broadcast_object_list",
            "all_gather_object",
            "gather_object",
            "scatter_object_list",
            "send_object_list",
            "recv_object_list",
            "new_subgroups_by_enumeration",
            "DeviceMesh",
            "DeviceMesh.get_local_rank",
            "init_device_mesh",
            "tensor.parallel.ColwiseParallel",
            "tensor.parallel.loss_parallel",
        )
    } == {
        "broadcast_object_list": 3,
        "all_gather_object": 3,
        "gather_object": 3,
        "scatter_object_list": 3,
        "send_object_list": 2,
        "recv_object_list": 2,
        "new_subgroups_by_enumeration": 4,
        "DeviceMesh": 8,
        "DeviceMesh.get_local_rank": 8,
        "init_device_mesh": 16,
        "tensor.parallel.ColwiseParallel": 8,
        "tensor.parallel.loss_parallel": 8,
    }


def test_every_catalog_step_compiles_unless_its_whole_example_does_not(catalog: Catalog) -> None:
    # A step that fails alone but compiles as part of the whole example was cut in the wrong place;
    # only an upstream syntax error (Work.get_future's `): -> Future`) may stay broken.
    wrongly_cut: list[str] = []
    for example in catalog.examples:
        try:
            compile(example.code, example.id, "exec")
        except SyntaxError:
            continue
        for step in example.steps:
            try:
                compile(step.source, example.id, "exec")
            except SyntaxError as exc:
                wrongly_cut.append(f"{example.id} line {step.line}: {exc.msg}")
    assert wrongly_cut == []


def test_committed_references_have_no_artefacts_and_parse_cleanly() -> None:
    found: list[str] = []
    for path in sorted(REFS.glob("*.md")):
        if path.name != "verification.md":
            found += problems(path.name, path.read_text(encoding="utf-8"))
    assert found == []


def test_generated_files_hold_no_local_paths_memory_addresses_or_timestamps() -> None:
    # A path ends where a name cannot go on: the home /root is no match in "checks/root_only_shard.py".
    paths = [str(repo_root()), sys.prefix, str(Path.home())]
    local = [re.escape(path) + r"(?![\w.-])" for path in paths] + ["site-packages"]
    pattern = re.compile("|".join(local + [r" at 0x[0-9a-fA-F]{6,}", r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d"]))
    for name in GENERATED:
        text = (REFS / name).read_text(encoding="utf-8")
        assert not pattern.search(text), f"{name}: {pattern.search(text).group(0)!r}"


def test_every_reference_file_is_in_the_catalog_with_sections_pointing_at_real_lines(catalog: Catalog) -> None:
    names = {reference.name for reference in catalog.references}
    # versions.md (the API timeline per release) is no catalog reference: it is kept out of the search index.
    assert names == {n for n in GENERATED if n.endswith(".md") and n != "versions.md"}
    assert 10 <= len(names) - 1 <= 16  # topic files, plus api-drift.md
    for section in catalog.sections[:: max(1, len(catalog.sections) // 60)]:
        lines = (REFS / section.reference).read_text(encoding="utf-8").splitlines()
        assert lines[section.line - 1] == section.markdown.splitlines()[0]
    for entry in catalog.api:
        assert f"{entry.reference}#{entry.anchor}" in {s.id for s in catalog.sections}
        assert entry.summary or entry.description or entry.signature, f"{entry.qualified_name} says nothing"


def test_long_reference_files_have_a_table_of_contents(catalog: Catalog) -> None:
    for reference in catalog.references:
        if reference.lines > 300 and reference.name != "api-drift.md":
            assert "**Contents**" in (REFS / reference.name).read_text(encoding="utf-8"), reference.name


# --- writing, --check, --strict (no torch needed) ----------------------------------------------------


def small_output(files: dict[str, str], warnings_: list[str] | None = None) -> build.Output:
    catalog = Catalog(
        torch_version="2.13.0",
        ref="v2.13.0",
        references=[Reference(name=n, title=n, description="d") for n in files if n.endswith(".md")],
    )
    all_files = dict(files)
    all_files["catalog.json"] = dump_catalog(catalog)
    return build.Output(files=all_files, catalog=catalog, warnings=warnings_ or [])


def no_index(monkeypatch) -> None:
    """These tests are about the markdown files: the index stub writes an empty file and is never stale."""
    monkeypatch.setattr(build, "build_index", lambda catalog, path, root, **_: path.write_bytes(b""))
    monkeypatch.setattr(build, "stale_reason", lambda *paths: None)


def test_write_replaces_generated_files_removes_dropped_topics_and_keeps_unrelated_files(
    tmp_path: Path, monkeypatch
) -> None:
    no_index(monkeypatch)
    refs = tmp_path / "references"
    build.write_output(
        small_output({"old.md": "# old\n", "keep.md": "# keep v1\n", "api-drift.md": "# d\n"}), refs, tmp_path
    )
    (refs / "verification.md").write_text("# runner report\n")
    build.write_output(
        small_output({"keep.md": "# keep v2\n", "new.md": "# new\n", "api-drift.md": "# d\n"}), refs, tmp_path
    )
    assert sorted(p.name for p in refs.iterdir()) == [
        "api-drift.md",
        "catalog.json",
        "index.sqlite",
        "keep.md",
        "new.md",
        "verification.md",
    ]
    assert (refs / "keep.md").read_text() == "# keep v2\n"
    assert (refs / "verification.md").read_text() == "# runner report\n"
    assert json.loads((refs / "catalog.json").read_text())["ref"] == "v2.13.0"


def test_differences_names_changed_new_and_removed_files(tmp_path: Path, monkeypatch) -> None:
    no_index(monkeypatch)
    refs = tmp_path / "references"
    build.write_output(small_output({"a.md": "# a\n", "b.md": "# b\n"}), refs, tmp_path)
    assert build.differences(small_output({"a.md": "# a\n", "b.md": "# b\n"}), refs) == []
    changed = build.differences(small_output({"a.md": "# a changed\n", "c.md": "# c\n"}), refs)
    assert "differs: references/a.md" in changed
    assert "new:     references/c.md" in changed
    assert "removed: references/b.md" in changed


def regenerate(tmp_path: Path, monkeypatch, output: build.Output, **flags: bool) -> int:
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tmp_path))
    monkeypatch.setattr(build, "build_references", lambda root, ref=None: output)
    no_index(monkeypatch)
    args = argparse.Namespace(strict=flags.get("strict", False), check=flags.get("check", False), ref=None)
    return build.cli_regenerate(args)


def test_strict_fails_on_a_warning_and_writes_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    output = small_output({"a.md": "# a\n"}, ["upstream/p.md:7: unknown MyST directive {x}"])
    assert regenerate(tmp_path, monkeypatch, output, strict=True) == 1
    assert not (tmp_path / "references").exists()
    err = capsys.readouterr().err
    assert "warning: upstream/p.md:7: unknown MyST directive {x}" in err and "--strict" in err


def test_without_strict_a_warning_is_printed_and_the_files_are_written(tmp_path: Path, monkeypatch, capsys) -> None:
    output = small_output({"a.md": "# a\n"}, ["upstream/p.md:7: unknown MyST directive {x}"])
    assert regenerate(tmp_path, monkeypatch, output) == 0
    assert (tmp_path / "references" / "a.md").read_text() == "# a\n"
    out = capsys.readouterr().out
    assert re.search(
        r"1 reference files, 0 sections, 0 API entries, 0 examples, 0 drift names, 1 warnings, \d+\.\d\d s", out
    )
    # a.md, the index and catalog.json
    assert re.search(r"regenerated 3 files in \d+\.\d\d s", out)


def test_check_reports_a_difference_with_exit_1_and_changes_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    refs = tmp_path / "references"
    refs.mkdir()
    (refs / "a.md").write_text("# committed\n")
    assert regenerate(tmp_path, monkeypatch, small_output({"a.md": "# a\n"}), check=True) == 1
    assert (refs / "a.md").read_text() == "# committed\n"
    assert "differs: references/a.md" in capsys.readouterr().out


def test_validation_problems_stop_the_run_before_anything_is_written(tmp_path: Path, monkeypatch, capsys) -> None:
    output = small_output({"a.md": "# a\n"})
    output.problems = ["a.md:3: unclosed code fence"]
    assert regenerate(tmp_path, monkeypatch, output) == 1
    assert not (tmp_path / "references").exists()
    assert "a.md:3: unclosed code fence" in capsys.readouterr().err


def test_missing_torch_is_a_clear_user_error(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    with pytest.raises(UserError, match="torch is not installed"):
        build.torch_release()


def test_regenerate_rewrites_skill_md_what_changed_block_and_check_reports_it_stale(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    from fsdp_skill.build.what_changed import END, START

    drift = "# d\n\n## Deprecated in torch 2.13.0 (1)\n\n| name | replacement | message |\n|---|---|---|\n" \
            "| `torch.distributed.old_op` | `torch.distributed.new_op` | use new_op |\n"
    skill = tmp_path / "SKILL.md"
    skill.write_text(f"# Skill\n{START}\nstale\n{END}\n")
    output = small_output({"a.md": "# a\n", "api-drift.md": drift})
    assert regenerate(tmp_path, monkeypatch, output) == 0
    assert "- `dist`: `old_op` → `new_op`" in skill.read_text() and "stale" not in skill.read_text()
    assert regenerate(tmp_path, monkeypatch, output, check=True) == 0
    skill.write_text(f"# Skill\n{START}\nstale\n{END}\n")
    capsys.readouterr()
    assert regenerate(tmp_path, monkeypatch, output, check=True) == 1
    assert "differs: SKILL.md (its what-changed block)" in capsys.readouterr().out
    assert "stale" in skill.read_text()  # --check writes nothing

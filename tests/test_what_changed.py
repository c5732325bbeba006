"""SKILL.md's "torch 2.13 is not what you remember" block: generated from api-drift.md by regenerate, so a
test fails when the two disagree (and `regenerate --check` reports SKILL.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fsdp_skill.build.what_changed import (
    ABSENT,
    END,
    LEGACY_STARTS,
    START,
    Group,
    WhatChangedError,
    _section,
    apply_block,
    deprecated,
    deprecated_groups,
    new_names,
    render_block,
    replacement_since,
    sync_skill,
)
from fsdp_skill.core.api_history import load_history
from fsdp_skill.core.catalog import Catalog, load_catalog

ROOT = Path(__file__).resolve().parents[1]
DRIFT = (ROOT / "references" / "api-drift.md").read_text(encoding="utf-8")
SKILL = (ROOT / "SKILL.md").read_text(encoding="utf-8")


def _block(text: str) -> str:
    return text[text.index(START) : text.index(END) + len(END)]


HISTORY = ROOT / "references" / "api-history.json"


def test_the_skill_md_block_is_what_regenerate_makes_from_the_committed_api_drift() -> None:
    catalog = load_catalog(ROOT / "references" / "catalog.json")
    assert _block(SKILL) == render_block(DRIFT, catalog, load_history(HISTORY)), "run `fsdp-skill regenerate`"


def test_each_replacement_newer_than_the_oldest_release_read_says_from_which_torch_it_works() -> None:
    history = load_history(HISTORY)
    assert history.releases[0].startswith("2.4")
    rows = {name: (replacement.strip("`"), message) for name, replacement, message in _section(DRIFT, "Deprecated in")}

    def since(name: str) -> str | None:
        return replacement_since(name, *rows[name], history)

    # all_gather_single: AttributeError before 2.13
    assert since("torch.distributed._functional_collectives.all_gather_into_tensor_coalesced") == "2.13"
    assert since("torch.distributed.fsdp.FSDPModule.set_reduce_scatter_divide_factor") == "2.8"
    # "use staging_future from AsyncSaveResponse": no release has it (the class has staging_completion),
    # so no "2.9+" is claimed for it.
    assert since("torch.distributed.checkpoint.staging.AsyncStager.synchronize_staging") == ABSENT
    assert since("torch.distributed.checkpoint.load_state_dict") is None  # dcp.load: in 2.4 already
    assert since("torch.distributed.launch.main") is None  # torchrun: not a name the timeline reads
    block = _block(SKILL)
    assert "`all_gather_into_tensor_coalesced` → `all_gather_single_coalesced` (2.13+)" in block
    # Plain aliases again in 2.15: no longer on the first screen as deprecated.
    assert "`all_gather_into_tensor` → `all_gather_single`" not in block
    assert "(`tensor` → `single`, 2.13+)" in block and "`load_state_dict` → `load`;" in block
    assert "(first torch, if after 2.4)" in block


def _spelled(name: str) -> str:
    name = name.replace("torch.distributed.fsdp.FullyShardedDataParallel", "FSDP")
    return "dist" + name[len("torch.distributed") :] if name.startswith("torch.distributed") else name


def _says_replacement(item: str, short: str, replacement: str) -> bool:
    """Whether a block item ("`a`, `b` → `r`", "(same name)", "(`x` → `y`)", "(+ `_y`)") gives replacement."""
    last = replacement.rsplit(".", 1)[-1]
    if f"→ `{last}`" in item or f"`{last}`" in item.split("→")[-1] or "(same name)" in item:
        return True
    rule = re.search(r"\(`(\w+)` → `(\w+)`(?:, [\d.]+\+)?\)", item)
    if rule and short.replace(rule.group(1), rule.group(2)) == last:
        return True
    suffix = re.search(r"\(\+ `(_\w+)`(?:, [\d.]+\+)?\)", item)
    return bool(suffix and short + suffix.group(1) == last)


def test_every_deprecated_name_of_api_drift_is_on_the_first_screen_with_its_replacement() -> None:
    table = DRIFT.split("## Deprecated in", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(torch\.[\w.]+)` \| `?([\w.]*)`? \|", table, re.MULTILINE)
    assert (
        len(rows) >= 25
        and ("torch.distributed.fsdp.FSDPModule.set_reduce_scatter_divide_factor", "set_gradient_divide_factor") in rows
    )
    lines = [ln for ln in _block(SKILL).splitlines() if ln.startswith("- `")]
    for name, replacement in rows:
        found = []
        for line in lines:
            owner = re.match(r"- `([\w.]+)`", line).group(1)  # type: ignore[union-attr]
            for item in line.split(": ", 1)[1].split("; "):
                for spelled in re.findall(r"`([\w.]+)`", item.split(" → ")[0].split(" (")[0]):
                    if f"{owner}.{spelled}" == _spelled(name):
                        found.append(item)
        assert len(found) == 1, (name, found)
        if replacement:
            assert _says_replacement(found[0], name.rsplit(".", 1)[-1], replacement), (name, found[0])
        else:
            assert "(none named)" in found[0], name


def test_deprecations_are_grouped_by_module_or_class_with_shared_replacements_once() -> None:
    rows = [
        ("torch.distributed.nn.functional.all_reduce", "torch.distributed._functional_collectives.all_reduce"),
        ("torch.distributed.nn.functional.broadcast", "torch.distributed._functional_collectives.broadcast"),
        ("torch.distributed.nn.functional.all_gather", "torch.distributed._functional_collectives.all_gather_single"),
        ("torch.distributed.fsdp.FSDP.full_osd", "FSDP.optim_state_dict"),
        ("torch.distributed.fsdp.FSDP.sharded_osd", "FSDP.optim_state_dict"),
        ("torch.distributed.fsdp.FSDP.old", ""),
        ("torch.distributed.fsdp.FSDPModule.set_old", "set_new"),
        ("torch.distributed.fc.gather_tensor", "torch.distributed.fc.gather_single"),
        ("torch.distributed.fc.scatter_tensor_autograd", "torch.distributed.fc.scatter_single_autograd"),
    ]
    assert deprecated_groups(rows) == [
        Group("torch.distributed.nn.functional", "torch.distributed._functional_collectives", [
            (["all_reduce", "broadcast"], "(same name)"),
            (["all_gather"], "`all_gather_single`"),
        ]),
        Group("torch.distributed.fsdp.FSDP", "", [(["full_osd", "sharded_osd"], "`optim_state_dict`"), (["old"], "")]),
        Group("torch.distributed.fsdp", "", [(["FSDPModule.set_old"], "`set_new`")]),  # a lone member joins its module
        Group("torch.distributed.fc", "", [(["gather_tensor", "scatter_tensor_autograd"], "(`tensor` → `single`)")]),
    ]


def test_fully_shards_new_dp_mesh_dims_and_its_class_are_listed() -> None:
    block = _block(SKILL)
    assert "`dist.fsdp`: `DataParallelMeshDims`, `share_comm_ctx`" in block
    assert "`fully_shard(dp_mesh_dims=...)`" in block
    assert "torch.distributed.fsdp.DataParallelMeshDims" in new_names(DRIFT)


SMALL_DRIFT = """# API drift

## Public names no page documents (2)

| name | reason | summary |
|---|---|---|
| `torch.distributed.fsdp.NewThing` | public in the installed torch, but no autodoc directive on the pinned pages covers it | A new thing. |
| `torch.distributed.Logger` | no page documents it, and it has no docstring |  |

## Deprecated in torch 2.13.0 (2)

| name | replacement | message |
|---|---|---|
| `torch.distributed.old_op` | `torch.distributed.new_op` | use new_op |
| `torch.distributed.gone` |  | going |
"""  # noqa: E501 (verbatim api-drift.md rows)


def test_render_lists_replacements_bare_deprecations_and_documented_new_names_only() -> None:
    block = render_block(SMALL_DRIFT, Catalog(torch_version="2.13.0", ref="v2.13.0"))
    assert deprecated(SMALL_DRIFT) == [
        ("torch.distributed.old_op", "torch.distributed.new_op"),
        ("torch.distributed.gone", ""),
    ]
    assert "- `dist`: `old_op` → `new_op`; `gone` (none named)" in block
    assert new_names(SMALL_DRIFT) == ["torch.distributed.fsdp.NewThing"]  # Logger: no docstring, not a listed module
    assert "NewThing" not in block and "no upstream doc page" not in block  # no API entry: api-drift.md only


def test_sync_rewrites_only_between_the_markers_and_check_mode_leaves_the_file(tmp_path: Path) -> None:
    skill = tmp_path / "SKILL.md"
    skill.write_text(f"# Skill\n\nbefore\n{START}\nstale line\n{END}\nafter\n")
    catalog = Catalog(torch_version="2.13.0", ref="v2.13.0")
    assert sync_skill(tmp_path, SMALL_DRIFT, catalog, write=False) is True
    assert "stale line" in skill.read_text()
    assert sync_skill(tmp_path, SMALL_DRIFT, catalog, write=True) is True
    text = skill.read_text()
    assert "stale line" not in text and text.startswith("# Skill\n\nbefore\n") and text.endswith("\nafter\n")
    assert sync_skill(tmp_path, SMALL_DRIFT, catalog, write=False) is False


def test_a_skill_md_with_an_earlier_start_marker_is_rewritten_with_the_current_one() -> None:
    old = f"# Skill\n{LEGACY_STARTS[0]}\nstale\n{END}\nafter\n"
    assert apply_block(old, f"{START}\nnew\n{END}") == f"# Skill\n{START}\nnew\n{END}\nafter\n"


def test_a_skill_md_without_markers_is_a_clear_error() -> None:
    with pytest.raises(WhatChangedError, match="no what-changed markers"):
        apply_block("# Skill\n", "block")

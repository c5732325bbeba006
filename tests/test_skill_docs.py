"""SKILL.md and assets/tuning.md as search documents: cut from whatever the files hold, found by symptom."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp_skill.build.skill_docs import SkillDocError, file_documents, skill_documents
from fsdp_skill.search.index import DocsIndex, open_index
from fsdp_skill.search.ranking import search

ROOT = Path(__file__).resolve().parents[1]

PAGE = """\
---
name: demo
description: a front matter block, not markdown
---

# Demo skill

Intro prose is no document.

## Decide first

Each row links its check.

| Situation | Use |
|---|---|
| it fits | **DDP** ([check](assets/checks/fits.py)) |

Prose about the first table.

| Backend | When |
|---|---|
| `gloo` | CPU |

## Core recipe

```python
fully_shard(model)
```

## Pitfalls

1. **Optimizer built before `fully_shard`**: build it after ([check](assets/checks/fits.py)).
2. **Second one**: with a continuation

   paragraph that stays with its item.
19. **A pitfall another author appended**: numbered as the list counts.

## Patterns

| Pattern | What |
|---|---|
| [`a`](assets/patterns/a.py) | a |
| [`b`](assets/patterns/b.py) | b |
"""

CHECK = '''"""
name: fits
claim: A model that fits runs under DDP.
backs: decide-first
world_size: 2
mutant: wrong: `1` -> `2`

The check explains it in other words and quotes "Cannot access accelerator device".
"""
x = 1
'''


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "assets" / "checks").mkdir(parents=True)
    (tmp_path / "assets" / "checks" / "fits.py").write_text(CHECK, encoding="utf-8")
    (tmp_path / "SKILL.md").write_text(PAGE, encoding="utf-8")
    return tmp_path


def test_each_pitfall_each_decision_table_and_the_recipe_is_a_document(tree: Path) -> None:
    docs = {doc.anchor: doc for doc in skill_documents(tree)}
    assert list(docs) == [
        "decide-first-situation",
        "decide-first-backend",
        "core-recipe",
        "pitfall-1",
        "pitfall-2",
        "pitfall-3",
    ]
    assert docs["pitfall-1"].title == "Pitfall 1: Optimizer built before fully_shard"
    assert docs["pitfall-1"].id == "SKILL.md#pitfall-1"
    assert "paragraph that stays with its item" in docs["pitfall-2"].markdown
    assert docs["decide-first-situation"].markdown.startswith("Each row links its check.")
    assert "Prose about the first table." in docs["decide-first-situation"].markdown
    assert "fully_shard(model)" in docs["core-recipe"].markdown


def test_a_document_is_the_source_text_sliced_by_line(tree: Path) -> None:
    lines = PAGE.splitlines(keepends=True)
    for doc in skill_documents(tree):
        assert doc.markdown.strip("\n") in PAGE
        assert lines[doc.line - 1].strip() and lines[doc.line - 1] in doc.markdown


def test_a_list_numbered_from_elsewhere_keeps_its_numbers(tree: Path) -> None:
    text = PAGE.replace("1. **Optimizer", "19. **Optimizer").replace("2. **Second", "20. **Second")
    text = text.replace("   paragraph", "    paragraph")  # the item's content now starts one column later
    anchors = [doc.anchor for doc in file_documents("SKILL.md", text, tree) if doc.section == "Pitfalls"]
    assert anchors == ["pitfall-19", "pitfall-20", "pitfall-21"]


def test_a_table_that_only_lists_other_files_is_left_out(tree: Path) -> None:
    assert not [doc for doc in skill_documents(tree) if doc.section == "Patterns"]


def test_the_claim_checks_a_part_links_join_it(tree: Path) -> None:
    docs = {doc.anchor: doc for doc in skill_documents(tree)}
    assert docs["pitfall-1"].checks == ["assets/checks/fits.py"]
    assert "A model that fits runs under DDP." in docs["pitfall-1"].check_text
    assert "Cannot access accelerator device" in docs["pitfall-1"].check_text
    assert "mutant:" not in docs["pitfall-1"].check_text
    assert docs["core-recipe"].check_text == ""


def test_two_parts_with_one_anchor_are_an_error_naming_the_lines(tree: Path) -> None:
    with pytest.raises(SkillDocError, match=r"SKILL.md:\d+: anchor 'core-recipe'"):
        file_documents("SKILL.md", PAGE + "\n## Core recipe\n\nagain\n", tree)


def test_the_committed_catalog_holds_the_parts_of_the_committed_pages() -> None:
    from fsdp_skill.core.catalog import load_catalog

    catalog = load_catalog(ROOT / "references" / "catalog.json")
    files = {doc.file for doc in catalog.skill}
    assert files == {"SKILL.md", "assets/tuning.md", "assets/traps.md"}
    assert any(doc.anchor.startswith("pitfall-") for doc in catalog.skill)


@pytest.fixture(scope="module")
def committed_index():
    if not (ROOT / "references" / "index.sqlite").is_file():
        pytest.skip("references/ has not been generated in this checkout")
    idx = open_index(ROOT, warn=lambda message: None)
    yield idx
    idx.close()


def _ids(index: DocsIndex, query: str, dense: bool) -> list[str]:
    return [hit.doc.id for hit in search(index, query, limit=5, use_dense=dense)]


# A question phrased as the symptom finds the part of the skill that answers it, in both modes.
@pytest.mark.parametrize(
    "query, expected",
    [
        # the recipe (its init_weights) answers it as well as the pitfall that points to it
        ("garbage weights after to_empty on a meta model", ("SKILL.md#pitfall-3", "SKILL.md#core-fsdp2-recipe")),
        ("optimizer step does nothing after fully_shard", "SKILL.md#pitfall-1"),
        # lexically the skill's table is 6th since issue 31 (init_process_group's `backend` parameter is lifted);
        # the upstream section that answers it is first in both modes
        ("which backend gloo or nccl", ("SKILL.md#decide-first-backend", "process-groups.md#which-backend-to-use")),
        ("save an all-gather per step for the last block", "assets/tuning.md#"),
        ("job aborts at exit after a clean run on gloo", "SKILL.md#pitfall-18"),
    ],
)
@pytest.mark.parametrize("dense", [False, True], ids=["lexical", "semantic"])
def test_a_symptom_finds_the_skill_part_that_answers_it(
    committed_index: DocsIndex, query: str, expected: str | tuple[str, ...], dense: bool
) -> None:
    if dense and committed_index.dense is None:
        pytest.skip(committed_index.search_mode)
    assert any(found.startswith(expected) for found in _ids(committed_index, query, dense))


def test_loss_nan_after_meta_init_finds_the_pitfall_in_semantic_mode(committed_index: DocsIndex) -> None:
    # The example: the pitfall never says "loss" or "NaN", so only the embeddings connect them.
    if committed_index.dense is None:
        pytest.skip(committed_index.search_mode)
    found = _ids(committed_index, "loss NaN after meta init", True)
    # pitfall 3 in SKILL.md, or its details in assets/traps.md
    assert {"SKILL.md#pitfall-3", "assets/traps.md#3-meta-init-without-real-init"} & set(found), found


# The messages the claim checks provoke, pasted as they are printed.
@pytest.mark.parametrize(
    "message, expected",
    [
        ("Cannot access accelerator device", ("SKILL.md#pitfall-13", "assets/traps.md#13-")),
        ("All operands in aten.stack.default must have the same mesh", "SKILL.md#pitfall-12"),
        ("must have the same mesh", "SKILL.md#pitfall-12"),
        ("terminate called without an active exception", "SKILL.md#pitfall-18"),
    ],
)
@pytest.mark.parametrize("dense", [False, True], ids=["lexical", "semantic"])
def test_a_pasted_error_message_finds_its_pitfall(
    committed_index: DocsIndex, message: str, expected: str | tuple[str, ...], dense: bool
) -> None:
    if dense and committed_index.dense is None:
        pytest.skip(committed_index.search_mode)
    assert any(found.startswith(expected) for found in _ids(committed_index, message, dense))


# assets/traps.md: each trap found in the top 5 by its symptom or by the message torch prints.
@pytest.mark.parametrize(
    "query, expected",
    [
        ("set_requires_gradient_sync(True) after the last backward: grads are None, loss does not change",
         "assets/traps.md#22-"),
        ("gradient accumulation trains nothing, every .grad is None, no error", "assets/traps.md#22-"),
        ("FSDP does not support deepcopy. Please use state dict for serialization.", "assets/traps.md#23-"),
        ("deepcopy the sharded model for an EMA copy", "assets/traps.md#23-"),
        ("fully_shard doesn't support scalar parameters. Change scale to a 1D tensor with numel equal to 1.",
         "assets/traps.md#24-"),
        ("scalar temperature parameter fails in fully_shard", "assets/traps.md#24-"),
        ("Slicing a flattened dim from root mesh will be deprecated in PT 2.11", "assets/traps.md#25-"),
        ("A CPU backend must be enabled for async save; try initializing process group with 'cpu:gloo,cuda:nccl'",
         "assets/traps.md#doc-bug"),
        ("BatchNorm eval outputs differ between ranks", "assets/traps.md#20-"),
        ("ChildFailedError exitcode -9 SIGKILL no traceback", "assets/traps.md#26-"),
        ("FSDP2-wrapped module returned a view tensor. An in-place op on this view", "assets/traps.md#27-"),
        ("root parameters stay unsharded after a no_grad forward", "assets/traps.md#21-"),
        ("AttributeError: 'Stream' object has no attribute 'record_event' in fully_shard forward on torch 2.6",
         "assets/traps.md#28-"),
        ("RuntimeError: Cannot use ReduceOp.AVG with Gloo", "assets/traps.md#28-"),
        ("NotImplementedError: Operator aten.select.int does not have a sharding strategy registered",
         "assets/traps.md#28-"),
    ],
)
@pytest.mark.parametrize("dense", [False, True], ids=["lexical", "semantic"])
def test_a_trap_is_found_by_its_symptom_or_message(
    committed_index: DocsIndex, query: str, expected: str, dense: bool
) -> None:
    if dense and committed_index.dense is None:
        pytest.skip(committed_index.search_mode)
    found = _ids(committed_index, query, dense)
    assert any(hit.startswith(expected) for hit in found), found


def test_api_parameters_are_a_field_of_their_entry() -> None:
    from fsdp_skill.core.catalog import load_catalog
    from fsdp_skill.search.documents import catalog_documents

    catalog = load_catalog(ROOT / "references" / "catalog.json")
    catalog.api = [e for e in catalog.api if e.qualified_name == "torch.distributed.init_process_group"]
    catalog.sections, catalog.examples, catalog.patterns, catalog.skill = [], [], [], []
    (doc,) = catalog_documents(catalog, ROOT)
    assert "`timeout`" in doc.params and "Timeout for operations" in doc.params
    assert any(text.startswith("Parameters: ") for _, text in doc.blocks)  # the snippet still shows them


def test_a_question_about_a_parameter_finds_the_function_that_takes_it(committed_index: DocsIndex) -> None:
    ids = _ids(committed_index, "timeout for operations executed against the process group", False)
    assert "torch.distributed.init_process_group" in ids

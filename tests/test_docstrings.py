"""Docstrings of the installed torch → ApiDocs, markdown entries and catalog models."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fsdp_skill.apidoc import introspect
from fsdp_skill.apidoc.api_model import ApiDoc, walk
from fsdp_skill.apidoc.api_render import render_api, to_api_entry, to_examples
from fsdp_skill.apidoc.docstring_sections import split_docstring
from fsdp_skill.apidoc.docstrings import document
from fsdp_skill.apidoc.doctests import count_prompts
from fsdp_skill.build.markdown_checks import artefacts, tables

DOCS = Path("/work/shared/upstream/pytorch/docs/source")
if not DOCS.is_dir():
    DOCS = Path(__file__).resolve().parents[2] / "shared" / "upstream" / "pytorch" / "docs" / "source"


def doc_of(
    directive: str, argument: str, current_module: str | None = "torch.distributed", **options: str
) -> tuple[list[ApiDoc], list[str]]:
    warnings: list[str] = []
    docs = document(
        directive,
        argument,
        options=options,
        current_module=current_module,
        origin="page.md",
        line=7,
        warn=lambda o, ln, m: warnings.append(f"{o}:{ln}: {m}"),
    )
    return docs, warnings


def test_google_sections_and_sphinx_fields_and_numpy_sections_are_split() -> None:
    google = split_docstring(
        "Summary.\n\nArgs:\n    x (int, optional): The x.\n        More.\n\nReturns:\n    A thing.\n\n"
        "Raises:\n    ValueError: if bad.\n\n.. warning::\n    Careful.\n"
    )
    assert [(p.name, p.type, p.description) for p in google.params] == [("x", "int, optional", "The x.\nMore.")]
    assert google.returns == ["A thing."] and google.raises[0].name == "ValueError"
    assert google.notes == [("Warning", "Careful.")] and google.body == ["Summary."]
    sphinx = split_docstring("Do it.\n\n:param int x: the x\n:type y: str\n:rtype: bool\n:returns: yes\n")
    assert [(p.name, p.type) for p in sphinx.params] == [("x", "int"), ("y", "str")]
    assert sphinx.return_type == "bool" and sphinx.returns == ["yes"]
    numpy = split_docstring("Do it.\n\nParameters\n----------\nx : int\n    The x.\n\nReturns\n-------\nbool\n")
    assert [(p.name, p.type, p.description) for p in numpy.params] == [("x", "int", "The x.")]


def test_warning_written_with_a_space_before_the_colons_or_without_dots_is_a_note_not_prose() -> None:
    spaced = split_docstring("Wait.\n\n.. warning ::\n    In normal cases, do not set it.\n")
    assert spaced.notes == [("Warning", "In normal cases, do not set it.")] and spaced.body == ["Wait."]
    bare = split_docstring("Split.\n\nwarning:: This is an experimental API.\nOnly NCCL.\n\nAfter.\n")
    assert bare.notes == [("Warning", "This is an experimental API.\nOnly NCCL.")]
    assert [ln for ln in bare.body if ln] == ["Split.", "After."]


@pytest.mark.torch
def test_a_tuple_default_holding_a_class_shows_the_class_name_not_its_repr() -> None:
    import torch

    assert introspect.format_default((torch.nn.modules.batchnorm._BatchNorm,)) == "(_BatchNorm,)"
    assert introspect.format_default([1, "a"]) == "[1, 'a']" and introspect.format_default(()) == "()"


@pytest.mark.torch
def test_annotations_show_typevars_and_builtin_callables_as_written_in_the_source() -> None:
    from typing import Any, TypeVar, Union

    stateful = TypeVar("StatefulT")
    assert introspect.format_annotation(dict[str, Union[stateful, Any]]) == "dict[str, Union[StatefulT, Any]]"
    assert introspect.format_annotation(callable) == "callable"
    [doc], _ = doc_of(
        "automethod", "FullyShardedDataParallel.register_comm_hook", current_module="torch.distributed.fsdp"
    )
    assert "hook: callable" in (doc.signature or "") and "<built-in" not in (doc.signature or "")


def test_google_item_with_its_type_after_a_colon_keeps_type_and_description_apart() -> None:
    # set_state_dict writes "model_state_dict: (Union[...]):" and "optim_state_dict: OptimizerStateType:".
    doc = split_docstring(
        "Load.\n\nArgs:\n    sd: (Union[Dict[str, V], Dict[int, V]]):\n        the state to load.\n"
        "    osd: OptimizerStateType:\n        the optimizer state.\n    x: The x: a value.\n"
    )
    assert [(p.name, p.type, p.description) for p in doc.params] == [
        ("sd", "Union[Dict[str, V], Dict[int, V]]", "the state to load."),
        ("osd", "OptimizerStateType", "the optimizer state."),
        ("x", None, "The x: a value."),
    ]


@pytest.mark.torch
def test_autofunction_resolves_against_the_current_module_with_signature_params_and_examples() -> None:
    [doc], warnings = doc_of("autofunction", "all_reduce")
    assert not warnings and doc.qualified_name == "torch.distributed.all_reduce" and doc.kind == "function"
    assert "= ReduceOp.SUM" in (doc.signature or "")
    assert [p.name for p in doc.parameters] == ["tensor", "op", "group", "async_op"]
    assert next(p for p in doc.parameters if p.name == "group").default == "None"
    assert doc.summary.startswith("Reduces the tensor data across all machines")
    assert doc.examples and doc.examples[0].world_size == 2
    assert doc.examples[0].steps[-1].expected_by_rank == {
        0: "tensor([4.+4.j, 6.+6.j], device='cuda:0')",
        1: "tensor([4.+4.j, 6.+6.j], device='cuda:1')",
    }
    assert {"dist.all_reduce", "all_reduce", "torch.distributed.distributed_c10d.all_reduce"} <= set(doc.aliases)


@pytest.mark.torch
def test_pybind_class_takes_its_signature_from_the_docstring_and_documents_special_members() -> None:
    [doc], _ = doc_of("autoclass", "TCPStore", members="", **{"special-members": "__init__"})
    assert (doc.signature or "").startswith("torch.distributed.TCPStore(\n    host_name: str,")
    names = [m.qualified_name.rsplit(".", 1)[-1] for m in doc.members]
    assert "__init__" in names and "host" in names and "port" in names
    assert "self" not in (doc.members[names.index("__init__")].signature or "")


@pytest.mark.torch
def test_an_enum_class_lists_its_members_instead_of_the_enum_metaclass_call_signature() -> None:
    [doc], _ = doc_of("autoclass", "ShardingStrategy", current_module="torch.distributed.fsdp")
    assert doc.signature == "torch.distributed.fsdp.ShardingStrategy(value)" and doc.parameters == []
    assert "**Members:**\n\n- `FULL_SHARD` = `1`\n- `SHARD_GRAD_OP` = `2`" in doc.description
    assert "names=None" not in render_api(doc, level=3)


@pytest.mark.torch
def test_a_name_that_does_not_import_warns_with_page_and_line_and_yields_nothing() -> None:
    docs, warnings = doc_of("autoclass", "MaskPartial", current_module="torch.distributed.tensor.placement_types")
    assert docs == [] and len(warnings) == 1 and warnings[0].startswith("page.md:7: autoclass MaskPartial")


@pytest.mark.torch
def test_deprecated_function_carries_its_message_and_replacement() -> None:
    [doc], _ = doc_of("autofunction", "all_reduce_coalesced")
    assert doc.deprecation is not None and "all_reduce_coalesced" in doc.deprecation.message
    assert "**Deprecated:**" in render_api(doc, level=3)


@pytest.mark.torch
def test_automodule_with_an_explicit_members_list_documents_those_classes_with_their_members() -> None:
    docs, _ = doc_of(
        "automodule",
        "torch.distributed.optim",
        current_module=None,
        members="DistributedOptimizer, PostLocalSGDOptimizer, ZeroRedundancyOptimizer",
    )
    [module] = docs
    assert [m.qualified_name for m in module.members] == [
        "torch.distributed.optim.DistributedOptimizer",
        "torch.distributed.optim.PostLocalSGDOptimizer",
        "torch.distributed.optim.ZeroRedundancyOptimizer",
    ]
    assert any(m.kind == "method" for m in module.members[2].members)


@pytest.mark.torch
def test_an_object_documented_under_an_internal_module_is_named_by_its_shortest_public_path() -> None:
    [doc], _ = doc_of("autofunction", "torch.distributed.distributed_c10d.destroy_process_group")
    assert doc.qualified_name == "torch.distributed.destroy_process_group" and doc.module == "torch.distributed"
    assert doc.documented_name == "torch.distributed.distributed_c10d.destroy_process_group"
    assert "torch.distributed.distributed_c10d.destroy_process_group" in doc.aliases
    assert (doc.signature or "").startswith("torch.distributed.destroy_process_group(")
    assert render_api(doc, level=3).startswith('<a id="torch.distributed.destroy_process_group"></a>')
    [saver], _ = doc_of("autofunction", "torch.distributed.checkpoint.state_dict_saver.save", current_module=None)
    assert saver.qualified_name == "torch.distributed.checkpoint.save"


@pytest.mark.torch
def test_an_absolute_name_under_a_current_module_is_not_doubled_through_its_torch_attribute() -> None:
    [doc], _ = doc_of("autofunction", "torch.distributed.device_mesh.init_device_mesh")
    assert not doc.qualified_name.startswith("torch.distributed.torch.")
    assert doc.documented_name == "torch.distributed.device_mesh.init_device_mesh"
    # torch.distributed re-exports it: that shorter spelling is the canonical one.
    assert doc.qualified_name == "torch.distributed.init_device_mesh"


@pytest.mark.torch
def test_members_of_a_renamed_class_follow_its_public_path_and_keep_the_documented_one_as_alias() -> None:
    [doc], _ = doc_of("autoclass", "Shard", current_module="torch.distributed.tensor.placement_types", members="")
    assert doc.qualified_name == "torch.distributed.tensor.Shard"
    member = next(m for m in doc.members if m.qualified_name.endswith(".local_shard_size_and_offset"))
    assert member.qualified_name == "torch.distributed.tensor.Shard.local_shard_size_and_offset"
    assert member.documented_name == "torch.distributed.tensor.placement_types.Shard.local_shard_size_and_offset"
    assert member.documented_name in member.aliases


@pytest.mark.torch
def test_an_object_no_covered_module_exports_keeps_the_name_it_was_documented_under() -> None:
    [doc], _ = doc_of(
        "autofunction", "torch.distributed.checkpoint.format_utils.dcp_to_torch_save", current_module=None
    )
    assert doc.qualified_name == doc.documented_name == "torch.distributed.checkpoint.format_utils.dcp_to_torch_save"
    # torch.distributed.algorithms is not a covered module; .algorithms.join is (its __all__ lists Join).
    [join], _ = doc_of("autoclass", "torch.distributed.algorithms.Join", current_module=None)
    assert join.qualified_name == "torch.distributed.algorithms.join.Join"
    assert "torch.distributed.algorithms.Join" in join.aliases


@pytest.mark.torch
def test_rendered_entry_starts_with_its_anchor_and_heading_and_parses_cleanly() -> None:
    [doc], _ = doc_of("autofunction", "all_reduce")
    markdown = render_api(doc, level=3)
    assert markdown.split("\n")[:3] == [
        '<a id="torch.distributed.all_reduce"></a>',
        "",
        "### torch.distributed.all_reduce",
    ]
    assert tables(markdown) == 1 and artefacts(markdown) == []
    assert ">>> dist.all_reduce(tensor, op=ReduceOp.SUM)" in markdown


@pytest.mark.torch
def test_catalog_models_carry_anchor_reference_and_numbered_example_ids() -> None:
    [doc], _ = doc_of("autofunction", "all_reduce")
    examples = to_examples(doc, reference="collectives.md", anchor=doc.qualified_name, source="pytorch/pytorch:x")
    assert [e.id for e in examples] == [f"torch.distributed.all_reduce#{n}" for n in range(1, len(examples) + 1)]
    entry = to_api_entry(
        doc, reference="collectives.md", anchor=doc.qualified_name, url=None, example_ids=[e.id for e in examples]
    )
    assert entry.examples == [e.id for e in examples] and entry.kind == "function"


def _autodoc_directives() -> list[tuple[str, int, str, str, dict[str, str], str | None]]:
    """(page, line, directive, argument, options, current module) of every autodoc directive upstream."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        lines = page.read_text(encoding="utf-8").split("\n")
        current: str | None = None
        for i, line in enumerate(lines):
            match = re.match(r"^(\s*)\.\. (currentmodule|py:module|auto\w+)::\s*(.*)$", line)
            if not match:
                continue
            indent, directive, argument = len(match.group(1)), match.group(2), match.group(3).strip()
            options: dict[str, str] = {}
            content: list[str] = []
            for nxt in lines[i + 1 :]:
                if nxt.strip() and (len(nxt) - len(nxt.lstrip()) <= indent or nxt.startswith("```")):
                    break
                option = re.match(r"^\s*:([\w-]+):\s*(.*)$", nxt)
                if option:
                    options[option.group(1)] = option.group(2)
                elif nxt.strip():
                    content.append(nxt.strip())
            if directive in ("currentmodule", "py:module", "automodule"):
                current = argument  # Sphinx's automodule sets the current module too
                if directive != "automodule":
                    continue
            elif indent and directive.startswith("auto"):
                continue  # nested in an autoclass body: documented as that class's member
            if directive == "autosummary":
                argument = "\n".join(content)
            found.append((page.name, i + 1, directive, argument, options, current))
    return found


@pytest.mark.torch
@pytest.mark.skipif(not DOCS.is_dir(), reason="upstream snapshot not present")
def test_every_upstream_autodoc_directive_renders_clean_and_keeps_every_doctest_prompt() -> None:
    directives = _autodoc_directives()
    entries = examples = 0
    unresolved: list[str] = []
    for page, line, directive, argument, options, current in directives:
        warnings: list[str] = []
        docs = document(
            directive,
            argument,
            options=options,
            current_module=current,
            origin=page,
            line=line,
            warn=lambda o, ln, m: warnings.append(m),
        )
        unresolved += [w for w in warnings if "cannot import" in w]
        for doc in docs:
            assert artefacts(render_api(doc, level=3)) == [], doc.qualified_name
            for entry in walk(doc):
                entries += 1
                examples += len(entry.examples)
                obj = introspect.resolve(entry.qualified_name, None)
                assert obj is not None, entry.qualified_name
                raw = introspect.raw_docstring(obj.obj)
                assert sum(count_prompts(e.text) for e in entry.examples) == count_prompts(raw), entry.qualified_name
                for example in entry.examples:
                    assert example.steps and all(s.source.strip() for s in example.steps)
    print(f"\n{len(directives)} directives -> {entries} entries, {examples} examples; unresolved: {unresolved}")
    assert entries > 400 and examples > 90
    # MaskPartial was removed from torch 2.13; the etcd rendezvous backend's module imports urllib3, which
    # torch does not install: both become api-drift rows, each warning saying why.
    assert len(unresolved) == 3, unresolved
    assert "MaskPartial" in unresolved[0] and unresolved[0].endswith(
        "cannot import it from the installed torch (current module torch.distributed.tensor.placement_types)"
    )
    for etcd in unresolved[1:]:
        assert "etcd_rendezvous_backend" in etcd and "No module named 'urllib3'" in etcd


@pytest.mark.torch
def test_an_object_autodocumented_under_two_spellings_renders_once_where_the_shorter_spelling_stood() -> None:
    from fsdp_skill.apidoc.autodoc import AutodocRegistry

    registry = AutodocRegistry(lambda o, ln, m: None)
    hook = registry.hook(origin="distributed.md", source=None, page_url="https://docs/distributed.html")
    hook("currentmodule", "torch.distributed", {}, 1, 3)
    page = (
        "## Initialization\n\n"
        + hook("autofunction", "torch.distributed.distributed_c10d.irecv", {}, 2, 3)
        + "\n## Point-to-point\n\n"
        + hook("autofunction", "irecv", {}, 9, 3)
    )
    expanded = registry.expand(page)
    assert expanded.count('<a id="torch.distributed.irecv"></a>') == 1
    assert expanded.index("## Point-to-point") < expanded.index('<a id="torch.distributed.irecv"></a>')
    assert registry.repeats == 1 and list(registry.entries) == ["torch.distributed.irecv"]
    assert registry.entries["torch.distributed.irecv"].doc.documented_name == "torch.distributed.irecv"


@pytest.mark.torch
def test_the_catalog_description_does_not_repeat_the_summary_but_the_rendered_entry_shows_it_once() -> None:
    for name in ("monitored_barrier", "get_world_size"):
        [doc], _ = doc_of("autofunction", name)
        entry = to_api_entry(doc, reference="collectives.md", anchor=doc.qualified_name, url=None, example_ids=[])
        assert entry.summary and not " ".join(entry.description.split()).startswith(" ".join(entry.summary.split()))
        markdown = render_api(doc, level=3)
        first_words = " ".join(entry.summary.split()[:6])
        assert " ".join(markdown.split()).count(first_words) == 1, name
    [join], _ = doc_of("autoclass", "torch.distributed.algorithms.join.Join", current_module=None)
    assert join.summary.startswith("This class defines the generic join context manager")
    assert join.description.startswith("These hooks should shadow")


def test_a_description_whose_first_paragraph_is_not_the_summary_is_kept_whole() -> None:
    from fsdp_skill.apidoc.docstrings import split_lead

    assert split_lead("Intro text.\n\nMore.", "Other summary.") == ("", "Intro text.\n\nMore.")
    assert split_lead("```python\ncode\n```\n\nText.", "Text.") == ("", "```python\ncode\n```\n\nText.")
    assert split_lead("Wraps `x` and\n**y**.\n\n- item", "Wraps `x` and **y**.") == ("Wraps `x` and\n**y**.", "- item")


@pytest.mark.torch
def test_a_module_without_a_docstring_renders_no_heading_and_its_members_take_its_place() -> None:
    from fsdp_skill.apidoc.api_render import is_bare_module

    [module], _ = doc_of("automodule", "torch.distributed.debug", current_module=None, members="")
    assert is_bare_module(module) and module.members
    markdown = render_api(module, level=4)
    assert "#### torch.distributed.debug\n" not in markdown and '<a id="torch.distributed.debug"></a>' not in markdown
    assert markdown.startswith('<a id="torch.distributed.debug.')
    assert re.search(r"^#### torch\.distributed\.debug\.\w+$", markdown, re.M)  # members moved up a level
    [documented], _ = doc_of("automodule", "torch.distributed.run", current_module=None)
    assert not is_bare_module(documented) and "# torch.distributed.run\n" in render_api(documented, level=2)


@pytest.mark.torch
def test_a_registry_places_no_entry_for_a_module_without_a_docstring() -> None:
    from fsdp_skill.apidoc.autodoc import AutodocRegistry

    registry = AutodocRegistry(lambda o, ln, m: None)
    hook = registry.hook(origin="checkpoint.md", source=None, page_url="https://docs/checkpoint.html")
    page = "## DCP\n\n" + hook("automodule", "torch.distributed.checkpoint", {}, 1, 4) + "\nText.\n"
    expanded = registry.expand(page)
    assert "torch.distributed.checkpoint" not in expanded and "torch.distributed.checkpoint" not in registry.entries
    assert expanded.startswith("## DCP\n\nText.")


@pytest.mark.torch
def test_a_directive_that_spells_the_signature_documents_the_name_before_it_and_a_failed_import_says_why() -> None:
    [doc], warnings = doc_of(
        "autoclass",
        "DynamicRendezvousHandler()",
        current_module="torch.distributed.elastic.rendezvous.dynamic_rendezvous",
    )
    assert doc.qualified_name.endswith("DynamicRendezvousHandler") and warnings == []
    docs, warnings = doc_of(
        "autofunction", "create_backend", current_module="torch.distributed.elastic.rendezvous.etcd_rendezvous_backend"
    )
    if not docs:  # urllib3 absent (as in the pinned environment): the warning names the failing import
        assert "importing torch.distributed.elastic.rendezvous.etcd_rendezvous_backend fails" in warnings[0]


def test_an_automethod_nested_in_an_autoclass_body_documents_that_member() -> None:
    from fsdp_skill.convert.rst.converter import rst_to_markdown

    calls: list[tuple[str, str, dict[str, str]]] = []

    def hook(directive: str, argument: str, options: dict[str, str], line: int) -> str:
        calls.append((directive, argument, options))
        return ""

    rst_to_markdown(
        ".. autoclass:: RendezvousStoreInfo\n\n   .. automethod:: build(rank, store)\n",
        origin="x.rst",
        warn=lambda o, ln, m: None,
        autodoc=hook,
    )
    assert calls == [("autoclass", "RendezvousStoreInfo", {"members": "build"})]


@pytest.mark.torch
def test_a_member_a_siblings_deprecation_message_names_is_marked_deprecated_saying_where_it_is_stated() -> None:
    [doc], _ = doc_of(
        "autoclass",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        current_module=None,
        members="state_dict_type, set_state_dict_type, summon_full_params",
    )
    by_name = {m.qualified_name.rsplit(".", 1)[-1]: m for m in doc.members}
    assert by_name["set_state_dict_type"].deprecation is not None
    stated = by_name["state_dict_type"].deprecation
    assert stated is not None and stated.message.startswith(
        "Stated in the deprecation warning of FullyShardedDataParallel.set_state_dict_type"
    )
    assert by_name["summon_full_params"].deprecation is None  # not named by any sibling's message


@pytest.mark.torch
def test_a_registry_reports_a_name_torch_lacks_as_a_missing_name_event_not_as_a_warning() -> None:
    from fsdp_skill.apidoc.autodoc import AutodocRegistry

    warnings: list[str] = []
    registry = AutodocRegistry(lambda o, ln, m: warnings.append(m))
    hook = registry.hook(origin="tensor.md", source=None, page_url=None)
    hook("currentmodule", "torch.distributed.tensor.placement_types", {}, 3, 3)
    assert hook("autoclass", "MaskPartial", {}, 7, 3) == ""
    assert hook("autofunction", "torch.distributed.no_such_function", {}, 9, 3) == ""
    assert warnings == []
    assert [(m.qualified_name, m.where) for m in registry.missing] == [
        ("torch.distributed.tensor.placement_types.MaskPartial", "tensor.md:7"),
        ("torch.distributed.no_such_function", "tensor.md:9"),
    ]

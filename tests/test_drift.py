"""api-drift.md: undocumented public names, deprecations, names missing from the installed torch."""

from __future__ import annotations

import pytest

from fsdp_skill.apidoc import deprecation
from fsdp_skill.apidoc.drift import build_drift, covered_public_names, public_names
from fsdp_skill.build.markdown_checks import artefacts, tables
from fsdp_skill.core.catalog import Deprecation


def _section(markdown: str, title_start: str) -> str:
    return markdown.split(f"## {title_start}", 1)[1].split("\n## ", 1)[0]


@pytest.mark.torch
def test_modules_with_all_use_it_and_torch_distributed_uses_the_package_rule() -> None:
    import torch.distributed.fsdp

    assert public_names("torch.distributed.fsdp") == sorted(torch.distributed.fsdp.__all__)
    names = public_names("torch.distributed")
    assert {"all_reduce", "all_gather_single", "reduce_scatter_single", "ProcessGroup", "TCPStore"} <= set(names)
    assert not {"timedelta", "log", "fsdp", "RankType", "default_pg_timeout"} & set(names)
    assert "torch.nn.parallel.DistributedDataParallel" in covered_public_names()


@pytest.mark.torch
def test_drift_lists_new_names_as_undocumented_with_reason_and_summary() -> None:
    import torch

    markdown = build_drift({"torch.distributed.all_reduce", "dist.all_reduce"}, torch_version=torch.__version__)
    undocumented = _section(markdown, "Public names no page documents")
    row = next(ln for ln in undocumented.split("\n") if ln.startswith("| `torch.distributed.all_gather_single`"))
    assert "Gather tensors from all ranks" in row
    assert "`torch.distributed.reduce_scatter_single`" in undocumented
    assert "`torch.distributed.all_reduce`" not in undocumented
    assert artefacts(markdown) == [] and tables(markdown) == 4


def test_a_re_export_of_a_documented_object_counts_as_documented() -> None:
    markdown = build_drift({"torch.distributed.checkpoint.state_dict_saver.save"}, torch_version="2.13.0")
    assert "`torch.distributed.checkpoint.save`" not in _section(markdown, "Public names no page documents")


@pytest.mark.torch
def test_documented_deprecated_names_are_listed_with_their_replacement() -> None:
    markdown = build_drift(
        {
            "torch.distributed.checkpoint.load_state_dict",
            "torch.distributed.checkpoint.state_dict_loader.load_state_dict",
        },
        torch_version="2.15.0",
    )
    rows = [ln for ln in _section(markdown, "Deprecated").split("\n") if "load_state_dict" in ln]
    assert len(rows) == 1 and rows[0].startswith("| `torch.distributed.checkpoint.load_state_dict` | `load` |"), rows


def test_documented_names_that_do_not_import_are_listed_as_missing() -> None:
    markdown = build_drift(
        {"torch.distributed.no_such_function"},
        torch_version="2.13.0",
        missing=[("torch.distributed.tensor.placement_types.MaskPartial", "distributed.tensor.md:103")],
    )
    missing = _section(markdown, "Documented but missing")
    assert "`torch.distributed.no_such_function`" in missing
    assert "| `torch.distributed.tensor.placement_types.MaskPartial` | distributed.tensor.md:103 |" in missing


def test_deprecation_is_read_from_source_warnings_without_calling_the_function() -> None:
    def old_api(x: int) -> int:
        import warnings

        warnings.warn("`old_api` is deprecated, please use `new_api` instead", FutureWarning, stacklevel=2)
        return x

    def conditional(x: int | None = None) -> None:
        import warnings

        if x is not None:
            warnings.warn("`x` is deprecated", FutureWarning, stacklevel=2)

    found = deprecation.detect(old_api)
    assert found is not None and found.replacement == "new_api"
    assert deprecation.detect(conditional) is None


def test_drift_output_is_deterministic() -> None:
    documented = {"torch.distributed.all_reduce", "torch.distributed.fsdp.fully_shard"}
    assert build_drift(documented, torch_version="2.13.0") == build_drift(set(documented), torch_version="2.13.0")


def test_a_missing_name_says_whether_torch_lacks_it_or_its_module_needs_an_absent_dependency() -> None:
    etcd = "torch.distributed.elastic.rendezvous.etcd_rendezvous_backend.create_backend"
    failure = (
        "importing torch.distributed.elastic.rendezvous.etcd_rendezvous_backend fails: "
        "ModuleNotFoundError: No module named 'urllib3'"
    )
    markdown = build_drift(
        set(),
        torch_version="2.13.0",
        missing=[(etcd, "rendezvous.md:93"), ("torch.distributed.tensor.placement_types.MaskPartial", "t.md:1")],
        import_failures={etcd: failure},
    )
    rows = {
        ln.split("|")[1].strip(): ln
        for ln in _section(markdown, "Documented but missing").split("\n")
        if ln.startswith("| `")
    }
    assert failure in rows[f"`{etcd}`"] and "optional dependency" in rows[f"`{etcd}`"]
    assert "not in torch 2.13.0" in rows["`torch.distributed.tensor.placement_types.MaskPartial`"]


@pytest.mark.torch
def test_the_installed_sources_decide_and_a_replacement_or_an_override_is_never_deprecated() -> None:
    from fsdp_skill.apidoc.drift import _resolve, deprecation_of

    def dep(name: str) -> Deprecation | None:
        return deprecation_of(_resolve(name), name)

    assert dep("torch.distributed.fsdp.FSDPModule.set_gradient_divide_factor") is None  # the replacement
    assert dep("torch.distributed.fsdp.FSDPModule.set_reduce_scatter_divide_factor") is not None
    # DefaultStager overrides the deprecated AsyncStager.synchronize_staging without the marker
    assert dep("torch.distributed.checkpoint.staging.AsyncStager.synchronize_staging") is not None
    assert dep("torch.distributed.checkpoint.staging.DefaultStager.synchronize_staging") is None
    no_shard = dep("torch.distributed.fsdp.ShardingStrategy.NO_SHARD")  # warned about in fsdp._init_utils
    assert no_shard is not None and no_shard.replacement == "DistributedDataParallel"
    assert dep("torch.distributed.fsdp.ShardingStrategy.FULL_SHARD") is None
    legacy = dep("torch.distributed.fsdp.FullyShardedDataParallel.full_optim_state_dict")  # via a warning helper
    assert legacy is not None and legacy.replacement == "FullyShardedDataParallel.optim_state_dict"
    assert dep("torch.distributed.fsdp.FullyShardedDataParallel.optim_state_dict") is None
    assert dep("torch.nn.parallel.DistributedDataParallel") is None  # only its broadcast_buffers argument is

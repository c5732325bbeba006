"""A pattern's oldest torch (build.pattern_torch): computed from the names, modules and keyword arguments its code
uses against the API timeline, and its `min_torch:` header line checked against that."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp_skill.build.pattern_torch import header_problems, min_torch
from fsdp_skill.core.api_history import ApiHistory, NameHistory, SignatureChange
from fsdp_skill.verify.patterns import PatternHeaderError, parse_header

RELEASES = ["2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0"]


def name(qualified: str, first: str, kind: str = "function", changes: list[SignatureChange] | None = None,
         last: str = "2.8.0") -> NameHistory:
    versions = RELEASES[RELEASES.index(first): RELEASES.index(last) + 1]
    return NameHistory(name=qualified, kind=kind, versions=versions, signature_changes=changes or [])


HISTORY = ApiHistory(releases=RELEASES, pinned="2.7.1", names={n.name: n for n in [
    name("torch.distributed", "2.4.1", "module"),
    name("torch.distributed.all_reduce", "2.4.1"),
    name("torch.distributed.ReduceOp", "2.4.1", "class"),
    name("torch.distributed.fsdp", "2.4.1", "module"),
    name("torch.distributed.fsdp.fully_shard", "2.6.0",
         changes=[SignatureChange(version="2.7.1", added=["shard_placement_fn"]),
                  SignatureChange(version="2.8.0", added=["newer_than_pinned"])]),
    name("torch.distributed.tensor", "2.5.1", "module"),
    name("torch.distributed.tensor.DTensor", "2.5.1", "class"),
    name("torch.distributed.fsdp.FSDPModule", "2.6.0", "class"),
    name("torch.distributed.fsdp.FSDPModule.unshard", "2.6.0", "method"),
    name("torch.distributed.fsdp.FSDPModule.set_gradient_divide_factor", "2.7.1", "method"),
]})

PLAIN = '''
import torch.distributed as dist
dist.all_reduce(t, op=dist.ReduceOp.SUM)
'''


def test_names_in_the_oldest_release_give_the_oldest_release() -> None:
    result = min_torch(PLAIN, HISTORY)
    assert result.minor == "2.4" and result.because == []


def test_the_newest_name_the_code_uses_sets_the_oldest_torch() -> None:
    result = min_torch("from torch.distributed.tensor import DTensor\n" + PLAIN, HISTORY)
    assert result.minor == "2.5"
    assert ("torch.distributed.tensor.DTensor", "2.5.1") in result.because


def test_a_method_called_on_an_instance_of_an_imported_class_counts() -> None:
    # fsdp1_to_fsdp2_migration.py said min_torch: 2.6 but calls two 2.8 methods on its FSDPModule instances
    code = ("from torch.distributed.fsdp import FSDPModule, fully_shard\nfully_shard(m)\nm.unshard()\n"
            "for module in m.modules():\n    if isinstance(module, FSDPModule):\n"
            "        module.set_gradient_divide_factor(1.0)\n")
    result = min_torch(code, HISTORY)
    assert result.minor == "2.7"
    assert result.because == [("torch.distributed.fsdp.FSDPModule.set_gradient_divide_factor", "2.7.1")]
    assert min_torch(code.replace("set_gradient_divide_factor", "no_such_method"), HISTORY).minor == "2.6"


def test_a_keyword_argument_added_later_than_its_function_counts() -> None:
    code = "from torch.distributed.fsdp import fully_shard\nfully_shard(m)\n"
    assert min_torch(code, HISTORY).minor == "2.6"
    code = "from torch.distributed.fsdp import fully_shard\nfully_shard(m, shard_placement_fn=None)\n"
    result = min_torch(code, HISTORY)
    assert result.minor == "2.7"
    assert result.because == [("torch.distributed.fsdp.fully_shard(shard_placement_fn=...)", "2.7.1")]
    # a parameter of a release after the pinned one is not what the pattern runs on here
    code = "from torch.distributed.fsdp import fully_shard\nfully_shard(m, newer_than_pinned=1)\n"
    assert min_torch(code, HISTORY).minor == "2.6"


HEADER = '''"""
name: demo
{min_torch}title: Demo
world_size: 2

A demo.
"""
from torch.distributed.fsdp import fully_shard
fully_shard(m, shard_placement_fn=None)
'''


def problems(min_torch_line: str) -> list[tuple[int, str]]:
    text = HEADER.format(min_torch=min_torch_line)
    return header_problems(text, parse_header(Path("demo.py"), text), HISTORY)


def test_a_header_with_the_computed_min_torch_right_after_name_passes() -> None:
    assert problems("min_torch: 2.7\n") == []


def test_a_missing_wrong_or_misplaced_min_torch_is_reported_with_the_fix() -> None:
    [(line, missing)] = problems("")
    assert line == 2 and "no min_torch: add the line 'min_torch: 2.7' right after the name: line" == missing
    [(_, wrong)] = problems("min_torch: 2.6\n")
    assert "min_torch: 2.6 but the API timeline gives 2.7" in wrong and "shard_placement_fn" in wrong
    text = HEADER.format(min_torch="").replace("world_size: 2\n", "world_size: 2\nmin_torch: 2.7\n")
    [(_, misplaced)] = header_problems(text, parse_header(Path("demo.py"), text), HISTORY)
    assert "right after name:" in misplaced


def test_a_min_torch_that_is_not_major_minor_is_a_header_error() -> None:
    with pytest.raises(PatternHeaderError, match="major.minor"):
        parse_header(Path("demo.py"), HEADER.format(min_torch="min_torch: 2.7.1\n"))


def test_rewriting_the_min_torch_line_does_not_make_the_mutant_report_stale(tmp_path: Path) -> None:
    from fsdp_skill.verify.mutants import source_sha256

    text = HEADER.format(min_torch="min_torch: 2.7\n")
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_text(text)
    second.write_text(text.replace("min_torch: 2.7", "min_torch: 2.6"))
    assert source_sha256(first) == source_sha256(second)
    second.write_text(text.replace("shard_placement_fn=None", "shard_placement_fn=0"))
    assert source_sha256(first) != source_sha256(second)

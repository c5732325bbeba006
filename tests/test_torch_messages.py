"""The messages torch.distributed raises, scanned statically, joined to their API entry or pitfall."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsdp_skill.build.torch_messages import attach_messages, scan_messages
from fsdp_skill.core.catalog import SkillDoc

ROOT = Path(__file__).resolve().parents[1]

SOURCE = '''
import warnings

def public(x):
    if x:
        raise ValueError(f"All operands in {x} must have the same mesh, but got {x} and {x}.")
    def helper():
        raise RuntimeError("raised in a nested helper of public")
    warnings.warn("public is deprecated, use something else", FutureWarning)
    raise TypeError("expected a tensor but got %s" % type(x))

class Thing:
    def __init__(self):
        raise ValueError("Thing needs a process group " + "to be initialized")

    def method(self, msg):
        raise ValueError(msg)  # no literal text: not kept
        raise ValueError("short")  # too short to be evidence
'''


@pytest.fixture
def torch_dir(tmp_path: Path) -> Path:
    package = tmp_path / "torch"
    (package / "distributed" / "sub").mkdir(parents=True)
    (package / "distributed" / "sub" / "mod.py").write_text(SOURCE, encoding="utf-8")
    (package / "distributed" / "broken.py").write_text("def (:\n", encoding="utf-8")
    (package / "nn").mkdir()
    (package / "nn" / "other.py").write_text('def f():\n    raise ValueError("outside torch.distributed")\n')
    return package


def test_the_scan_keeps_literal_messages_with_their_enclosing_function(torch_dir: Path) -> None:
    found = [(m.definition, m.text) for m in scan_messages(torch_dir)]
    assert found == [
        ("torch.distributed.sub.mod.public", "All operands in … must have the same mesh, but got … and ….",),
        ("torch.distributed.sub.mod.public", "raised in a nested helper of public"),
        ("torch.distributed.sub.mod.public", "public is deprecated, use something else"),
        ("torch.distributed.sub.mod.public", "expected a tensor but got …"),
        ("torch.distributed.sub.mod.Thing.__init__", "Thing needs a process group to be initialized"),
    ]


def test_a_message_joins_the_skill_part_that_quotes_a_phrase_of_it(torch_dir: Path) -> None:
    def part(anchor: str, markdown: str) -> SkillDoc:
        return SkillDoc(id=f"SKILL.md#{anchor}", file="SKILL.md", anchor=anchor, title=anchor, section="Pitfalls",
                        line=1, markdown=markdown)

    quoting = part("pitfall-12", 'clipping raises "must have the same mesh" with TP + FSDP2')
    code_only = part("pitfall-3", 'a `hasattr(m, "nested_helper_of")` loop')
    attach_messages([], [quoting, code_only], scan_messages(torch_dir))
    assert quoting.messages == ["All operands in … must have the same mesh, but got … and …."]
    assert code_only.messages == []


def test_the_committed_catalog_joins_messages_to_entries_and_pitfalls() -> None:
    catalog = json.loads((ROOT / "references" / "catalog.json").read_text(encoding="utf-8"))
    entries = {entry["qualified_name"]: entry for entry in catalog["api"]}
    assert "trying to initialize the default process group twice!" in entries[
        "torch.distributed.init_process_group"]["messages"]
    # Raised in the private helper FullyShardedDataParallel.__init__ calls (_init_device_handle): one hop.
    assert any("FSDP needs a non-CPU accelerator device" in text
               for text in entries["torch.distributed.fsdp.FullyShardedDataParallel"]["messages"])
    parts = {doc["id"]: doc for doc in catalog.get("skill", [])}
    assert any("must have the same mesh" in text for text in parts["SKILL.md#pitfall-12"]["messages"])

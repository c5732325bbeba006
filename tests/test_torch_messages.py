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


def test_the_scan_records_private_helpers_and_functions_called_by_their_bare_name(tmp_path: Path) -> None:
    from fsdp_skill.build.torch_messages import scan_torch

    (tmp_path / "torch" / "distributed").mkdir(parents=True)
    (tmp_path / "torch" / "distributed" / "planner.py").write_text(
        "def create_plan(x):\n    raise RuntimeError(f'Missing key in checkpoint state_dict: {x}.')\n\n"
        "class Planner:\n    def create_local_plan(self):\n        self._check()\n        create_plan(1)\n"
        "        self.other.method()\n        len([])\n", encoding="utf-8")
    calls = scan_torch(tmp_path / "torch").calls
    # `len` is recorded too: attach_messages keeps only names defined once in torch.distributed.
    assert calls["torch.distributed.planner.Planner.create_local_plan"] == {"_check", "create_plan", "len"}


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
    # Raised in a public module-level function create_local_plan calls by its bare name, which is no API entry.
    assert any("Missing key in checkpoint state_dict" in text for text in entries[
        "torch.distributed.checkpoint.DefaultLoadPlanner.create_local_plan"]["messages"])
    parts = {doc["id"]: doc for doc in catalog.get("skill", [])}
    assert any("must have the same mesh" in text for text in parts["SKILL.md#pitfall-12"]["messages"])


def test_message_weight_lifts_documents_whose_messages_share_runs_of_words_with_the_query(monkeypatch) -> None:
    from fsdp_skill.search import ranking
    from fsdp_skill.search.index import open_index
    from fsdp_skill.search.query import parse_query

    if not (ROOT / "references" / "index.sqlite").is_file():
        pytest.skip("references/ has not been generated in this checkout")
    assert ranking.MESSAGE_WEIGHT == 0.5
    index = open_index(ROOT, warn=lambda message: None)
    try:
        pasted = "All operands in aten.stack.default must have the same mesh, but got DeviceMesh"
        parsed = parse_query(pasted, index)
        monkeypatch.setattr(ranking, "PROXIMITY_WEIGHT", 0.0)
        lifted = dict(ranking.lexical_ranking(index, parsed, None, proximity=False)[0])
        monkeypatch.setattr(ranking, "MESSAGE_WEIGHT", 0.0)
        flat = dict(ranking.lexical_ranking(index, parsed, None, proximity=False)[0])
        found = index.message_matches(parsed.message_expression())
        scale = 0.5 * max(flat.values()) / max(found.values())
        pitfall = next(r for r, d in index.docs(list(found)).items() if d.id == "SKILL.md#pitfall-12")
        assert lifted[pitfall] == pytest.approx(flat.get(pitfall, 0.0) + scale * found[pitfall])
        # A question is not matched against messages at all; a request in words shares no run of four words
        # with any message: nothing moves.
        assert not parse_query("how do I clip gradients when TP and FSDP2 are combined", index).phrases
        request = parse_query("clip gradients when TP and FSDP2 are combined", index)
        assert not index.message_matches(request.message_expression())
    finally:
        index.close()

"""Page code: every code block of the references cataloged with a kind, planned, run on gloo or checked statically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsdp_skill.build.page_code import page_code
from fsdp_skill.core.catalog import PAGE_CODE_KINDS, ApiEntry, Section
from fsdp_skill.verify.launcher import LauncherShim, page_rewrites
from fsdp_skill.verify.page_plan import PageContext, blocks_from_catalog, plan_block
from fsdp_skill.verify.page_run import finish_run_rows, static_verdict
from fsdp_skill.verify.static_check import check

ROOT = Path(__file__).resolve().parents[1]
CATALOG = json.loads((ROOT / "references" / "catalog.json").read_text(encoding="utf-8"))

TEMPLATE = '''"""run.py"""
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def run(rank, size):
    pass

def init_process(rank, size, fn, backend='gloo'):
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)

if __name__ == "__main__":
    size = 2
    for rank in range(size):
        p = mp.Process(target=init_process, args=(rank, size, run))
        p.start()
'''
RANK_FN = """def run(rank, size):
    t = torch.ones(1)
    dist.all_reduce(t)
    print(helper(t))
"""
HELPER = """def helper(t):
    return t * 2
"""


def _section(anchor: str, markdown: str, line: int = 10, source: str = "pytorch/tutorials:t.rst") -> Section:
    return Section(
        id=f"t.md#{anchor}",
        reference="t.md",
        anchor=anchor,
        title=anchor,
        level=2,
        markdown=markdown,
        source=source,
        line=line,
    )


def _fence(code: str, language: str = "python") -> str:
    return f"```{language}\n{code}```\n"


def _tutorial() -> list[Section]:
    return [
        _section("setup", "Template:\n\n" + _fence(TEMPLATE)),
        _section("p2p", _fence(RANK_FN) + "\nThe output:\n\n" + _fence("tensor([4.])\n", "text")),
        _section(
            "helpers",
            _fence(HELPER)
            + "\n"
            + _fence("torchrun --nproc-per-node 2 run.py\n", "bash")
            + "\n"
            + _fence("model = FSDP(model)\n"),
        ),
    ]


def test_each_block_gets_a_kind_an_id_by_anchor_and_position_and_the_rank_function_its_launcher() -> None:
    found = {b.id: b for b in page_code(_tutorial(), [], {"pytorch/tutorials:t.rst": "tutorial"})}
    assert {i: b.kind for i, b in found.items()} == {
        "t.md#setup:1": "program",
        "t.md#p2p:1": "rank-function",
        "t.md#p2p:2": "output",
        "t.md#helpers:1": "fragment",
        "t.md#helpers:2": "shell",
        "t.md#helpers:3": "fragment",
    }
    assert found["t.md#p2p:1"].launcher == "t.md#setup:1" and found["t.md#p2p:1"].output == "tensor([4.])"
    assert (
        found["t.md#p2p:1"].origin == "tutorial" and found["t.md#p2p:1"].line == 10
    )  # the section line + the fence's offset in it


def test_a_block_that_only_uses_earlier_blocks_names_is_a_continuation() -> None:
    sections = [_section("a", _fence("import torch\nx = torch.ones(2)\n")), _section("b", _fence("y = x + 1\n"))]
    kinds = [b.kind for b in page_code(sections, [], {})]
    assert kinds == ["program", "continuation"] or kinds == ["fragment", "continuation"]


def test_an_api_entrys_signature_and_doctests_are_not_page_code_but_its_docstring_code_blocks_are() -> None:
    entry = ApiEntry(
        qualified_name="torch.distributed.f",
        kind="function",
        module="torch.distributed",
        signature="torch.distributed.f(x)",
        reference="t.md",
        anchor="torch.distributed.f",
    )
    markdown = _fence("torch.distributed.f(x)\n") + _fence(">>> f(1)\n") + _fence("f(tensor)\n")
    found = page_code([_section("torch.distributed.f", markdown)], [entry], {})
    assert [(b.id, b.origin) for b in found] == [("t.md#torch.distributed.f:1", "docstring")]


def test_every_code_block_of_the_committed_references_has_a_known_kind() -> None:
    blocks = CATALOG["page_code"]
    assert len(blocks) > 100 and all(b["kind"] in PAGE_CODE_KINDS for b in blocks)
    kinds = {b["id"]: b["kind"] for b in blocks}
    for anchor in ("point-to-point-communication:1", "point-to-point-communication:2", "collective-communication:1"):
        assert kinds[f"getting-started.md#{anchor}"] == "rank-function"
    assert kinds["getting-started.md#setup:1"] == "program"
    assert kinds["ddp-and-join.md#basic-use-case:2"] == "rank-function"


def test_a_rank_function_is_assembled_with_its_launcher_template_the_helpers_it_needs_and_the_launch() -> None:
    catalog = {
        "page_code": [b.model_dump() for b in page_code(_tutorial(), [], {"pytorch/tutorials:t.rst": "tutorial"})]
    }
    ctx = PageContext(blocks_from_catalog(catalog))
    plan = plan_block(ctx, ctx.by_id["t.md#p2p:1"], "gloo")
    assert plan.action == "run" and plan.spec is not None and plan.spec.world_size == 2
    sources = [u.source for u in plan.spec.units]
    assert "def init_process" in sources[0] and "__main__" not in sources[0]  # the template, without its entry point
    assert "def helper" in sources[1]  # defined after its use on the page
    assert sources[2].startswith("def run") and "mp.Process(target=init_process" in sources[3]
    assert plan.spec.page["expects_launch"] == 1 and plan.parts == ("t.md#setup:1", "t.md#helpers:1")
    shell = plan_block(ctx, ctx.by_id["t.md#helpers:2"], "gloo")
    assert shell.action == "skip" and "shell command" in (shell.reason or "")


def test_the_launcher_shim_runs_only_this_ranks_process_and_refuses_another_world_size() -> None:
    ran: list[tuple[int, int]] = []
    shim = LauncherShim(rank=1, world_size=2)
    for r in range(2):
        shim.Process(target=lambda rank, size: ran.append((rank, size)), args=(r, 2)).start()
    shim.spawn(lambda rank, size: ran.append((rank, size)), args=(2,), nprocs=2)
    assert ran == [(1, 2), (1, 2)] and shim.started == 2
    with pytest.raises(RuntimeError, match="launches 4 processes"):
        shim.spawn(print, nprocs=4)


def test_rewrites_are_named_for_the_report_row() -> None:
    code = 'dist.init_process_group("nccl")\nmodel.to(rank)\nn = torch.cuda.device_count()\nx = torch.ones(1).cuda()\n'
    assert page_rewrites(code, "gloo") == [
        "nccl->gloo",
        "cuda->cpu",
        ".to(rank)->.to(cpu)",
        "torch.cuda.device_count()->world size",
    ]
    assert page_rewrites(code, "nccl") == []


@pytest.mark.torch
def test_the_static_check_resolves_names_binds_calls_and_reports_each_failure_with_evidence() -> None:
    result = check(
        "import torch.distributed as dist\nfrom torch.distributed.fsdp import fully_shard, NoSuch\n"
        "dist.send(tensor=t, dst=1)\ndist.all_reduce(t, bogus=1)\ndist.ReduceOp.SUM\nimport transformers\n"
    )
    assert result.names == 5 and result.calls == 1 and result.external == {"transformers"}
    assert any("NoSuch" in f for f in result.failures)
    assert any(
        "dist.all_reduce(t, bogus=1)" in f and "unexpected keyword argument 'bogus'" in f for f in result.failures
    )
    status, reason = static_verdict(result, "a fragment")
    assert status == "doc-bug" and reason.startswith(
        "checked: 5 names resolved, 1 calls bound (not checked, outside torch: transformers); 2 problem(s)"
    )
    status, reason = static_verdict(check("import torch\nx = torch.zeros(2)\n"), "a fragment")
    assert (status, reason) == ("checked", "checked: 2 names resolved, 1 calls bound; not run: a fragment")
    assert static_verdict(check("def f(:\n"), None)[0] == "doc-bug"


@pytest.mark.torch
def test_a_name_of_a_backend_this_build_lacks_is_a_skip_not_a_doc_bug() -> None:
    import torch.distributed as dist

    if dist.is_nccl_available():
        pytest.skip("this torch build has NCCL: dist.ProcessGroupNCCL resolves")
    result = check("import torch.distributed as dist\nopts = dist.ProcessGroupNCCL.Options()\n")
    assert result.failures == []
    assert result.unbuilt == ["`dist.ProcessGroupNCCL.Options` (this torch build has no NCCL)"]
    status, reason = static_verdict(result, None)
    assert status == "skipped" and "names a backend this torch build lacks" in reason
    # A name that exists in no build is still a doc-bug.
    assert static_verdict(check("import torch.distributed as dist\ndist.NoSuchThing\n"), None)[0] == "doc-bug"


def test_a_run_that_needed_stand_ins_never_reports_plain_passed() -> None:
    catalog = {"page_code": CATALOG["page_code"]}
    ctx = PageContext(blocks_from_catalog(catalog))
    plan = plan_block(ctx, ctx.by_id["getting-started.md#distributed-training:3"], "gloo")
    assert plan.action == "run" and {"Net", "datasets", "Random"} <= set(plan.standins)
    [row] = finish_run_rows(
        [plan],
        [
            {
                "name": plan.block.id,
                "backend": "gloo",
                "world_size": 2,
                "status": "passed",
                "reason": None,
                "seconds": 1.0,
                "warnings": [],
            }
        ],
    )
    assert row["status"] == "passed-with-stand-ins" and row["reason"].startswith("passed with stand-ins: ")


@pytest.mark.torch
@pytest.mark.timeout(300)
def test_the_writing_distributed_applications_examples_run_on_gloo_through_the_pages_own_launcher() -> None:
    from fsdp_skill.verify.page_run import plan_all, select_blocks
    from fsdp_skill.verify.plan import Capabilities
    from fsdp_skill.verify.runner import RunOptions, run_spawned

    ids = [
        "getting-started.md#setup:1",
        "getting-started.md#point-to-point-communication:1",
        "getting-started.md#our-own-ring-allreduce:1",
    ]
    _, plans = plan_all(CATALOG, select_blocks(blocks_from_catalog(CATALOG), ids, None), "gloo")
    specs = [p.spec for p in plans if p.spec is not None]
    assert len(specs) == 3
    rows = finish_run_rows(plans, run_spawned([], RunOptions(timeout_s=60.0), Capabilities.detect(), planned=specs))
    assert {r["name"]: r["status"] for r in rows} == dict.fromkeys(ids, "passed"), rows
    ring = next(r for r in rows if r["name"].endswith("ring-allreduce:1"))
    assert ring["world_size"] == 3 and "sum of all send tensors" in ring["stated"]


@pytest.mark.torch
def test_a_docstring_example_skipped_as_a_fragment_is_statically_checked_in_its_modules_globals() -> None:
    from fsdp_skill.verify.examples import spec_from_entry
    from fsdp_skill.verify.page_run import static_for_fragments

    def entry(name: str, code: str) -> dict:
        return {
            "id": f"torch.distributed.send#{name}",
            "symbol": "torch.distributed.send",
            "world_size": 2,
            "steps": [{"source": code, "expected": None, "expected_by_rank": {}, "line": 1}],
        }

    specs = [
        spec_from_entry(entry("1", "dist.send(tensor=t, dst=1)")),
        spec_from_entry(entry("2", "dist.send(t, dts=1)")),
    ]
    skipped = [
        {
            "name": s.id,
            "backend": "gloo",
            "world_size": 2,
            "status": "skipped",
            "seconds": 0.0,
            "warnings": [],
            "reason": "fragment: uses t without defining it",
        }
        for s in specs
    ]
    ok, bad = static_for_fragments(skipped, specs)
    assert ok["status"] == "checked" and ok["reason"] == (
        "checked: 1 names resolved, 1 calls bound; not run: fragment: uses t without defining it"
    )
    assert bad["status"] == "doc-bug" and "unexpected keyword argument 'dts'" in bad["reason"]


@pytest.mark.torch
def test_names_the_documented_code_uses_are_covered_by_an_entry_of_the_same_object_or_listed_with_a_reason() -> None:
    from fsdp_skill.build.code_names import drift_section, uncovered

    entries = [
        ApiEntry(qualified_name=n, kind="class", module="torch.distributed.fsdp", reference="f.md", anchor=n)
        for n in ("torch.distributed.fsdp.StateDictType", "torch.distributed.ReduceOp")
    ]
    code = (
        "import torch.distributed as dist\n"
        "from torch.distributed.fsdp.fully_sharded_data_parallel import StateDictType\n"
        "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper\n"
        "dist.ReduceOp.AVG\n"
    )
    resolved, rows = uncovered(entries, [code])
    assert resolved == 3  # StateDictType (same object as the entry), checkpoint_wrapper, ReduceOp.AVG (a member)
    assert rows == [
        (
            "torch.distributed.algorithms._checkpoint.checkpoint_wrapper.checkpoint_wrapper",
            "in a private module (torch.distributed.algorithms._checkpoint.checkpoint_wrapper); "
            "torch documents no public path for it",
        )
    ]
    assert "| `torch.distributed.algorithms._checkpoint.checkpoint_wrapper.checkpoint_wrapper` |" in drift_section(
        resolved, rows
    )

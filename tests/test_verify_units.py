"""Pure parts of the example runner: device rewrite, unit building, output comparison, report, flags."""

from __future__ import annotations

import ast
import datetime
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fsdp_skill.cli.main import build_parser as fsdp_skill_parser
from fsdp_skill.verify.cli import build_parser
from fsdp_skill.verify.compare import capability_reason, classify, normalize, outputs_match
from fsdp_skill.verify.examples import build_units, select, spec_from_entry
from fsdp_skill.verify.report import build_report, dumps_json, render_markdown, write_report
from fsdp_skill.verify.rewrite import DEVICE_NAME, analyze, rewrite_source

ROOT = Path(__file__).resolve().parents[1]


def _steps(*pairs: tuple[str, object]) -> list[dict]:
    return [
        {"source": src, "expected": out if isinstance(out, str) else None,
         "expected_by_rank": out if isinstance(out, dict) else {}, "line": n}
        for n, (src, out) in enumerate(pairs, 1)
    ]


# -- rewrite --------------------------------------------------------------------------------------


def test_rewrite_points_hard_coded_cuda_devices_at_the_ranks_device() -> None:
    code = (
        'a = torch.device(f"cuda:{rank}")\nb = torch.device("cuda", rank)\nc = x.cuda()\n'
        'd = y.to("cuda:1")\ne = z.to("cuda")'
    )
    out = rewrite_source(code, "gloo")
    assert f"a = {DEVICE_NAME}" in out and f"b = {DEVICE_NAME}" in out
    assert f"c = x.to({DEVICE_NAME})" in out and f"d = y.to({DEVICE_NAME})" in out
    assert f"e = z.to({DEVICE_NAME}.type)" in out
    assert "cuda" not in out


def test_rewrite_turns_process_group_lifecycle_and_cpu_only_keywords_into_no_ops_on_gloo() -> None:
    code = (
        'dist.init_process_group("nccl", rank=rank)\ntorch.cuda.set_device(rank)\n'
        'm = DDP(m, device_ids=[rank])\ndist.destroy_process_group()'
    )
    out = rewrite_source(code, "gloo")
    assert "init_process_group" not in out and "destroy_process_group" not in out and "set_device" not in out
    assert "device_ids=None" in out


def test_rewrite_keeps_device_ids_and_set_device_on_nccl() -> None:
    out = rewrite_source("torch.cuda.set_device(rank)\nm = DDP(m, device_ids=[rank])", "nccl")
    assert f"torch.cuda.set_device({DEVICE_NAME})" in out and "device_ids=[rank]" in out


def test_rewrite_leaves_the_torch_cuda_module_and_gloo_strings_alone() -> None:
    out = rewrite_source('g = dist.new_group(backend="gloo")\nn = torch.cuda.device_count()', "nccl")
    assert "'gloo'" in out and "torch.cuda.device_count()" in out


def test_analysis_finds_fragments_placeholders_cuda_only_apis_fixed_ports_and_documented_raises() -> None:
    found = analyze(["model = FSDP(model)", "out = ...", "s = torch.cuda.Stream()",
                     'st = dist.TCPStore("127.0.0.1", 1234, 2, True)', "dist.monitored_barrier()  # Raises"], "gloo")
    assert found.undefined == ("FSDP", "model")
    assert found.placeholders == (2,)
    assert found.cuda_only == ("torch.cuda.Stream",)
    assert found.fixed_ports == ("TCPStore port 1234",)
    assert found.raising_lines == (5,)


def test_analysis_counts_names_the_runner_binds_and_the_example_defines_as_defined() -> None:
    found = analyze(
        ["import os", "t = torch.ones(2, device=device) * rank", "for i in range(world_size):\n    dist.all_reduce(t)"],
        "gloo",
    )
    assert found.undefined == ()


# -- units ----------------------------------------------------------------------------------------


def test_block_bodies_written_with_prompts_merge_into_one_compilable_unit() -> None:
    units = build_units(_steps(
        ("if dist.get_rank() == 0:", None), ("    objects = [1]", None), ("else:", None),
        ("    objects = [None]", None), ("objects", "[1]"),
    ))
    assert [u.source for u in units] == [
        "if dist.get_rank() == 0:\n    objects = [1]\nelse:\n    objects = [None]",
        "objects",
    ]
    ast.parse(units[0].source)
    assert units[1].expected == "[1]"


def test_outputs_tagged_beyond_the_catalog_world_size_raise_it_and_leave_a_note() -> None:
    spec = spec_from_entry({"id": "x#1", "steps": _steps(("t", {"0": "a", "3": "b"})), "world_size": 2})
    assert spec.world_size == 4
    assert spec.notes and "Rank 3" in spec.notes[0]


def test_world_sizes_stated_in_the_code_or_implied_by_a_literal_mesh_raise_the_catalogs() -> None:
    stated = spec_from_entry({"id": "x#1", "steps": _steps(("# Assumes world_size of 3.", None), ("x = 1", None))})
    mesh = spec_from_entry({"id": "y#1", "steps": _steps(('m = init_device_mesh("cuda", mesh_shape=(2, 4))', None))})
    listed = spec_from_entry({"id": "z#1", "steps": _steps(('m = DeviceMesh("cuda", mesh=[[0, 1], [2, 3]])', None))})
    assert (stated.world_size, mesh.world_size, listed.world_size) == (3, 8, 4)
    assert "world_size of 3" in stated.notes[0]


def test_select_by_unknown_id_names_similar_ids() -> None:
    specs = [spec_from_entry({"id": "torch.distributed.all_reduce#1", "steps": _steps(("1", None))})]
    with pytest.raises(Exception, match="similar: torch.distributed.all_reduce#1"):
        select(specs, ids=["torch.distributed.all_reduce#9"])


# -- compare --------------------------------------------------------------------------------------


def test_normalize_forgives_device_suffix_and_alignment_whitespace_only() -> None:
    assert outputs_match("tensor([4, 6], device='cuda:1') # Rank 1", "tensor([4, 6])")
    assert outputs_match("tensor([ 1,  2,\n        3])", "tensor([1, 2, 3])")
    assert outputs_match("device(type='cuda', index=1)", "device(type='cpu')")
    assert not outputs_match("tensor([4, 6])", "tensor([4., 6.])")
    assert not outputs_match("tensor([1.+1.j, 2.+2.j])", "tensor([1, 2])")
    assert normalize("[tensor([1]),  tensor([2])]") == "[tensor([1]), tensor([2])]"


def test_ellipsis_in_a_documented_output_is_a_wildcard_and_none_matches_no_output() -> None:
    assert outputs_match("tensor([0.1, ...])", "tensor([0.1, 0.2, 0.3])")
    assert not outputs_match("tensor([0.1, ...])", "tensor([0.5, 0.2])")
    assert outputs_match("None", "")


def test_errors_naming_a_missing_capability_are_recognized() -> None:
    assert capability_reason("AssertionError: Torch not compiled with CUDA enabled") == "needs CUDA"
    assert capability_reason("RuntimeError: Numpy is not available") == "needs numpy"
    assert (
        capability_reason("AttributeError: module 'torch.distributed' has no attribute 'foo'")
        == "not in this torch version"
    )
    assert capability_reason("ValueError: boom") is None


def _outcome(results: dict, failure: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(results=results, failure=failure, message="m", stacks={}, logs={})


def _ok(rank: int, outputs: dict) -> dict:
    return {"rank": rank, "outputs": outputs, "error": None, "warnings": []}


def test_a_clean_run_with_a_wrong_documented_output_is_a_doc_bug_with_the_actual_output() -> None:
    spec = spec_from_entry(
        {"id": "x#1", "world_size": 2, "steps": _steps(("t", {"0": "tensor([1, 2])", "1": "tensor([3, 4])"}))}
    )
    verdict = classify(spec, _outcome({0: _ok(0, {"0": "tensor([1, 2])\n"}), 1: _ok(1, {"0": "tensor([3.+3.j])\n"})}))
    assert verdict.status == "doc-bug"
    assert verdict.ranks == [
        {"rank": 1, "diffs": [{"line": 1, "source": "t", "expected": "tensor([3, 4])", "actual": "tensor([3.+3.j])"}]}
    ]


def test_a_shared_output_said_to_be_on_one_rank_is_compared_on_that_rank_only() -> None:
    spec = spec_from_entry(
        {"id": "x#1", "world_size": 3, "steps": _steps(("# For example, on rank 2:", None), ("out", "[{1: 2}]"))}
    )
    results = {r: _ok(r, {"1": ["['foo']", "[12]", "[{1: 2}]"][r] + "\n"}) for r in range(3)}
    assert classify(spec, _outcome(results)).status == "passed"


def test_different_errors_on_different_ranks_are_a_failure_not_a_doc_bug() -> None:
    spec = spec_from_entry({"id": "x#1", "world_size": 2, "steps": _steps(("f()", None))})
    err = lambda t: {"unit": 0, "line": 1, "type": t, "message": "m", "traceback": "tb"}  # noqa: E731
    results = {0: {**_ok(0, {}), "error": err("ValueError")}, 1: {**_ok(1, {}), "error": err("KeyError")}}
    assert classify(spec, _outcome(results)).status == "failed"
    results[1]["error"] = err("ValueError")
    assert classify(spec, _outcome(results)).status == "doc-bug"


# -- report and flags -----------------------------------------------------------------------------

RESULTS = [
    {
        "name": "b#1",
        "backend": "gloo",
        "world_size": 2,
        "status": "passed",
        "reason": None,
        "seconds": 0.0123,
        "warnings": [],
    },
    {
        "name": "a#1",
        "backend": "gloo",
        "world_size": 2,
        "status": "skipped",
        "reason": "needs CUDA: x | y",
        "seconds": 0.0,
        "warnings": ["FutureWarning: z"],
    },
]


def test_the_report_is_deterministic_sorted_and_escapes_table_cells(tmp_path: Path) -> None:
    day = datetime.date(2025, 1, 2)
    first = build_report(RESULTS, "2.13.0", day)
    second = build_report(list(reversed(RESULTS)), "2.13.0", day)
    assert dumps_json(first) == dumps_json(second)
    assert [r["name"] for r in first["results"]] == ["a#1", "b#1"]
    md = render_markdown(first)
    assert "needs CUDA: x \\| y" in md and "torch 2.13.0 · run on 2025-01-02" in md
    written = write_report(first, tmp_path / "v.json", tmp_path / "v.md")
    again = write_report(build_report(RESULTS, "2.13.0", day), tmp_path / "v.json", tmp_path / "v.md")
    assert written == again and json.loads((tmp_path / "v.json").read_text()) == again
    assert set(json.loads((tmp_path / "v.json").read_text())["results"][0]) == {
        "name", "backend", "world_size", "status", "reason", "seconds", "warnings"}


def test_writing_the_report_keeps_other_backends_and_drops_examples_gone_from_the_catalog(tmp_path: Path) -> None:
    day = datetime.date(2025, 1, 2)
    nccl = {**RESULTS[0], "backend": "nccl"}
    gone = {**RESULTS[0], "name": "gone#1"}
    write_report(build_report([nccl, gone], "2.13.0", day), tmp_path / "v.json", tmp_path / "v.md")
    merged = write_report(
        build_report(RESULTS, "2.13.0", day), tmp_path / "v.json", tmp_path / "v.md", known={"a#1", "b#1"}
    )
    assert sorted((r["name"], r["backend"]) for r in merged["results"]) == [
        ("a#1", "gloo"),
        ("b#1", "gloo"),
        ("b#1", "nccl"),
    ]


def test_a_run_at_the_documented_sizes_replaces_rows_at_a_size_the_catalog_no_longer_documents(tmp_path: Path) -> None:
    day = datetime.date(2025, 1, 2)
    old_size = {**RESULTS[0], "world_size": 1}
    nccl = {**RESULTS[0], "backend": "nccl"}
    write_report(build_report([old_size, nccl], "2.13.0", day), tmp_path / "v.json", tmp_path / "v.md")
    extra = {**RESULTS[1], "world_size": 8}
    added = write_report(build_report([extra], "2.13.0", day), tmp_path / "v.json", tmp_path / "v.md")
    assert sorted((r["name"], r["world_size"]) for r in added["results"]) == [("a#1", 8), ("b#1", 1), ("b#1", 2)]
    merged = write_report(
        build_report(RESULTS, "2.13.0", day), tmp_path / "v.json", tmp_path / "v.md", documented_sizes=True
    )
    rows = sorted((r["name"], r["backend"], r["world_size"]) for r in merged["results"])
    assert rows == [("a#1", "gloo", 2), ("b#1", "gloo", 2), ("b#1", "nccl", 2)]


def test_all_entry_points_accept_the_same_verify_flags() -> None:
    argv = [
        "--backend",
        "gloo",
        "--world-size",
        "2",
        "-k",
        "x",
        "--id",
        "a#1",
        "--id",
        "b#2",
        "--timeout",
        "5",
        "--json",
        "o.json",
        "--write-report",
    ]
    ours = vars(build_parser().parse_args(argv))
    theirs = vars(fsdp_skill_parser().parse_args(["verify", *argv]))
    assert {k: theirs[k] for k in ours} == ours
    assert ours["ids"] == ["a#1", "b#2"]


@pytest.mark.torch
def test_the_script_reports_a_missing_catalog_in_one_line_with_exit_code_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "verify_examples.py"), "--catalog", str(tmp_path / "nope.json")],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("verify: error:") and "does not exist" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_verify_package_imports_nothing_but_the_stdlib_and_torch() -> None:
    # core.atomic (shared with the catalog), core.scratch (its temp names), core.paths (where the data is),
    # core.errors, core.vocabulary (the statuses), core.quoting (table cells) and core.streams are stdlib only; core's
    # __init__ imports nothing.
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "STDLIB_ONLY = {'fsdp_skill', 'fsdp_skill.core', 'fsdp_skill.core.atomic', 'fsdp_skill.core.paths',"
        " 'fsdp_skill.core.errors', 'fsdp_skill.core.scratch', 'fsdp_skill.core.vocabulary',"
        " 'fsdp_skill.core.quoting', 'fsdp_skill.core.streams'}\n"
        "import fsdp_skill.verify, fsdp_skill.verify.__main__, fsdp_skill.verify.worker, fsdp_skill.verify.plan\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'pydantic', 'mcp', 'httpx', 'rich', 'markdown_it'}"
        " or (m.startswith('fsdp_skill.') and not m.startswith('fsdp_skill.verify') and m not in STDLIB_ONLY))\n"
        "print(bad)"
    ) % str(ROOT / "server")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_an_error_gloo_raises_on_an_example_written_for_cuda_is_a_skip_naming_gloo() -> None:
    spec = spec_from_entry({"id": "x#1", "world_size": 2, "device": "cuda", "steps": _steps(("f()", None))})
    err = {
        "unit": 0,
        "line": 1,
        "type": "RuntimeError",
        "message": "ProcessGroupGloo::allgather: invalid tensor size",
        "traceback": "tb",
    }
    results = {r: {**_ok(r, {}), "error": err} for r in range(2)}
    verdict = classify(spec, _outcome(results), backend="gloo")
    assert verdict.status == "skipped" and verdict.reason.startswith("written for CUDA/NCCL and gloo rejects it")
    assert classify(spec, _outcome(results), backend="nccl").status == "doc-bug"


def test_error_messages_lose_timestamps_addresses_and_argument_reprs_but_keep_the_source_file() -> None:
    from fsdp_skill.verify.execute import clean_message

    raw = "[rank0]:[F1129 11:44:05.301781610 ProcessGroupGloo.cpp:1537] Check failed: a == b"
    assert clean_message(raw) == "[ProcessGroupGloo.cpp:1537] Check failed: a == b"
    assert (
        clean_message("set(): bad\n\nInvoked with: TCPStore(port=4242), 'k'")
        == "set(): bad\nInvoked with: (argument reprs elided)"
    )
    assert clean_message("<object at 0x7f00aa>") == "<object>"


# -- module globals (doctest's globs) -------------------------------------------------------------


def _fake_module(name: str, **values: object) -> str:
    """A module registered in sys.modules (so importlib finds it) holding `values` as its globals."""
    import types

    module = types.ModuleType(name)
    module.__dict__.update(values)
    sys.modules[name] = module
    return name


def _run_in_process(symbol: str, *sources: str) -> dict:
    import torch

    from fsdp_skill.verify.execute import RankContext, run_example

    payload = {
        "id": f"{symbol}#1",
        "symbol": symbol,
        "units": [{"source": s, "expected": None, "expected_by_rank": {}, "line": n} for n, s in enumerate(sources, 1)],
    }
    ctx = RankContext(rank=0, world_size=1, local_rank=0, backend="gloo", device=torch.device("cpu"))
    return run_example(payload, ctx, barrier=False)


@pytest.mark.torch
def test_an_example_finds_the_names_its_defining_module_imports_as_doctest_provides_them() -> None:
    # DefaultSavePlanner and WriteItemType are globals of torch.distributed.checkpoint.default_planner,
    # where the re-exported class is defined: its docstring example uses both without importing them.
    result = _run_in_process(
        "torch.distributed.checkpoint.DefaultSavePlanner",
        "class FP16Planner(DefaultSavePlanner):\n    kind = WriteItemType.BYTE_IO",
        "print(FP16Planner.kind.name)",
    )
    assert result["error"] is None, result["error"]
    assert result["outputs"]["1"] == "BYTE_IO\n"


@pytest.mark.torch
def test_the_runners_names_win_over_the_modules_and_the_module_itself_is_never_modified() -> None:
    name = _fake_module("verify_fake_globals_a", helper=41, rank="the module's rank", device="the module's device")
    result = _run_in_process(
        f"{name}.documented", "print(helper + 1, rank, device)", "helper = 'changed by the example'"
    )
    assert result["error"] is None, result["error"]
    assert result["outputs"]["0"] == "42 0 cpu\n"
    assert sys.modules[name].helper == 41


@pytest.mark.torch
def test_the_defining_module_is_the_one_that_defines_the_object_the_class_for_a_method_or_the_module_itself() -> None:
    from fsdp_skill.verify.module_globals import defining_module

    assert (
        defining_module("torch.distributed.checkpoint.DefaultSavePlanner").__name__
        == "torch.distributed.checkpoint.default_planner"
    )
    fsdp = "torch.distributed.fsdp.FullyShardedDataParallel"
    assert defining_module(f"{fsdp}.optim_state_dict").__name__ == "torch.distributed.fsdp.fully_sharded_data_parallel"
    assert defining_module("torch.distributed.launch").__name__ == "torch.distributed.launch"
    assert defining_module("no_such_top_level_module_anywhere.x") is None


@pytest.mark.torch
def test_names_in_the_module_globals_are_defined_for_the_fragment_check_and_the_rest_are_listed() -> None:
    from fsdp_skill.verify.plan import Capabilities, skip_reason

    caps = Capabilities("2.13.0", False, 0, False, True, True, True)
    entry = {"id": "torch.distributed.checkpoint.DefaultSavePlanner#9", "world_size": 1}
    runs = spec_from_entry({**entry, "steps": _steps(("class P(DefaultSavePlanner):\n    t = WriteItemType", None))})
    assert skip_reason(runs, "gloo", 1, caps) is None
    fragment = spec_from_entry(
        {**entry, "steps": _steps(("p = DefaultSavePlanner()", None), ("p.set_up_planner(model.state_dict())", None))}
    )
    reason = skip_reason(fragment, "gloo", 1, caps)
    assert reason is not None and reason.startswith("fragment: uses model, defined neither by the example")
    assert "torch.distributed.checkpoint.default_planner" in reason
    assert analyze(["x = helper + 1"], "gloo", provided={"helper"}).undefined == ()


@pytest.mark.torch
def test_a_name_error_in_the_examples_own_code_is_a_fragment_skip_naming_it_not_a_doc_bug() -> None:
    name = _fake_module("verify_fake_globals_b", helper=1)
    # run_example does not consult the static check, so this stands in for a read the check cannot see.
    result = _run_in_process(f"{name}.documented", "def use():\n    return not_defined_anywhere + helper", "use()")
    assert result["error"]["undefined_name"] == "not_defined_anywhere"
    spec = spec_from_entry({"id": f"{name}.documented#1", "world_size": 2, "steps": _steps(("use()", None))})
    verdict = classify(
        spec, _outcome({0: {**_ok(0, {}), "error": result["error"]}, 1: {**_ok(1, {}), "error": result["error"]}})
    )
    assert verdict.status == "skipped"
    assert verdict.reason.startswith("fragment: uses not_defined_anywhere without defining it (found when it ran")


@pytest.mark.torch
def test_a_name_error_raised_inside_library_code_is_not_mistaken_for_a_fragment() -> None:
    result = _run_in_process("torch.distributed.all_reduce", "eval('missing_inside_eval', {})")
    assert result["error"]["type"] == "NameError"
    assert "undefined_name" not in result["error"]


@pytest.mark.torch
def test_a_platform_requirement_skips_only_on_another_operating_system(monkeypatch: pytest.MonkeyPatch) -> None:
    from fsdp_skill.verify import plan

    caps = plan.Capabilities("2.13.0", False, 0, False, True, True, True)
    entry = {"id": "torch.utils.checkpoint.checkpoint#1", "world_size": 1, "requires": ["platform:linux"]}
    spec = spec_from_entry({**entry, "steps": _steps(("x = 1", None))})
    monkeypatch.setattr(plan.sys, "platform", "linux")
    assert plan.skip_reason(spec, "gloo", 1, caps) is None
    monkeypatch.setattr(plan.sys, "platform", "darwin")
    reason = plan.skip_reason(spec, "gloo", 1, caps)
    assert reason is not None and reason.startswith("needs linux:") and "pip install" not in reason

"""The API timeline built from the committed release cache (upstream/torch-api/, 2.4.1 … 2.15.0), against the
errors issue 29 found: a name exists where it resolves, a move is a definition moving, a deprecation has an
end, and a lookup answers for exactly the name asked or says it cannot. The self-check at the end holds the
pin's column against the installed torch (marked `torch`)."""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from fsdp_skill.build.api_history import build_history, render_versions
from fsdp_skill.cli.main import main
from fsdp_skill.core.api_history import HISTORY_FILE, ApiHistory, dump_history, since_line, what_changed
from fsdp_skill.core.errors import UserError
from fsdp_skill.serve.history import HistoryBook, HistoryError
from fsdp_skill.serve.server import build_server
from fsdp_skill.upstream.releases import load_release_facts
from search_fixture import make_tree

ROOT = Path(__file__).resolve().parents[1]
PIN = "2.15.0"


@pytest.fixture(scope="module")
def facts() -> dict[str, dict[str, Any]]:
    return load_release_facts(ROOT)


@pytest.fixture(scope="module")
def history(facts: dict[str, dict[str, Any]]) -> ApiHistory:
    return build_history(facts, PIN)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory, history: ApiHistory) -> Path:
    """A data tree with a docs index and the timeline of the committed cache (references/ is regenerated
    by the lead; these tests must not depend on its being current)."""
    root = tmp_path_factory.mktemp("timeline")
    make_tree(root)
    (root / "references" / HISTORY_FILE).write_text(dump_history(history), encoding="utf-8")
    return root


def cli_json(capsys: pytest.CaptureFixture[str], name: str) -> dict[str, Any]:
    assert main(["history", name, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# --- 2.15 and the end of a deprecation (issue 28 item 6) ----------------------------------------------------


def test_the_timeline_reaches_2_15_and_finalize_backward_starts_there(
        tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tree))
    entry = cli_json(capsys, "torch.distributed.fsdp.FSDPModule.finalize_backward")
    assert entry["versions"] == [PIN] and entry["releases_read"][-1] == PIN
    old = cli_json(capsys, "torch.distributed.all_gather_into_tensor")
    assert (old["deprecated_since"], old["deprecated_until"]) == ("2.13.0", "2.15.0")
    for key in ("versions", "deprecated_since", "replacement", "removed_in", "moved_from", "signature_changes"):
        assert key in old
    assert "no longer warns from 2.15" in old["since"]
    assert history_entry(tree, "torch.distributed.reduce_scatter_tensor").deprecated_until == "2.15.0"


def test_what_changed_into_2_15_says_the_collectives_no_longer_warn(history: ApiHistory) -> None:
    changes = what_changed(history, "2.14.1", "2.15.0")
    ended = {c.name: c for c in changes.undeprecated}
    assert ended["torch.distributed.all_gather_into_tensor"].version == "2.15.0"
    assert "torch.distributed.reduce_scatter_tensor" in ended
    assert "torch.distributed.all_gather_into_tensor" not in [c.name for c in changes.deprecated]
    # across the whole span (2.12 -> 2.15) they neither start nor stop warning
    across = what_changed(history, "2.12.1", "2.15.0")
    assert "torch.distributed.all_gather_into_tensor" not in [c.name for c in across.deprecated + across.undeprecated]
    assert "### 2.15.0: no longer deprecated" in render_versions(history)


def history_entry(tree: Path, name: str) -> Any:
    return HistoryBook(tree / "references").lookup(name)


def test_an_import_warning_about_something_else_does_not_deprecate_the_modules_names(history: ApiHistory) -> None:
    # 2.4.1-2.5.1's torch.distributed.optim warns on import about TorchScript functional optimizers.
    for name in ("ZeroRedundancyOptimizer", "DistributedOptimizer", "PostLocalSGDOptimizer", "as_functional_optim"):
        entry = history.names[f"torch.distributed.optim.{name}"]
        assert entry.deprecated_since is None, name
        assert "deprecated" not in since_line(entry, history)
    module = history.names["torch.distributed.optim"]
    assert (module.deprecated_since, module.deprecated_until) == ("2.4.1", "2.6.0")


def test_each_span_keeps_its_releases_message_and_checks_its_replacement(history: ApiHistory) -> None:
    spans = history.names["torch.distributed.nn.functional.all_gather"].deprecations
    assert [(s.since, s.until, s.replacement) for s in spans] == [
        ("2.12.1", "2.13.0", "torch.distributed._functional_collectives.all_gather_tensor"),
        ("2.13.0", None, "torch.distributed._functional_collectives.all_gather_single")]
    assert "all_gather_tensor" in spans[0].message and spans[0].note is None
    staging = history.names["torch.distributed.checkpoint.staging.AsyncStager.synchronize_staging"]
    assert staging.replacement == "staging_future"
    assert staging.deprecations[0].note == "replacement staging_future not available in 2.9.1: it exists in no " \
        "release read"


# --- existence is resolution --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "torch.distributed.pipelining.ScheduleZBVZeroBubble.step",  # inherited
    "torch.distributed.checkpoint.FileSystemWriter.write_data",  # inherited
    "torch.distributed.ProcessGroup.size",  # C++ class: its .pyi stub
    "torch.distributed.Work.wait",
    "torch.distributed.Store.set",
])
def test_inherited_and_cxx_members_exist_in_every_release_that_has_their_class(history: ApiHistory,
                                                                              name: str) -> None:
    entry = history.names[name]
    owner = history.names[name.rsplit(".", 1)[0]]
    assert entry.versions == owner.versions and entry.removed_in is None


@pytest.mark.parametrize("name", [
    "torch.distributed._composable.fsdp.FSDPModule.unshard",  # the class is re-exported through 2.15
    "torch.distributed.tensor.Placement.is_shard",  # a C++ class from 2.15 that keeps it
    "torch.distributed._tensor.experimental",  # sys.modules redirects in _tensor/__init__.py
    "torch.distributed._tensor.device_mesh",
    "torch.distributed.autograd.backward",  # left __all__, still imports
])
def test_names_that_still_resolve_are_not_removed(history: ApiHistory, name: str) -> None:
    entry = history.names[name]
    assert entry.removed_in is None and PIN in entry.versions, entry.versions


def test_dtensor_members_live_under_torch_distributed_tensor_from_2_5(history: ApiHistory) -> None:
    entry = history.names["torch.distributed.tensor.DTensor.redistribute"]
    assert entry.versions[0] == "2.5.1"
    assert entry.moved_from[0] == "torch.distributed._tensor.DTensor.redistribute"


def test_a_reexport_is_an_alias_not_a_move(history: ApiHistory) -> None:
    mesh = history.names["torch.distributed.device_mesh.init_device_mesh"]
    assert mesh.moved_to == [] and "torch.distributed._tensor.init_device_mesh" in mesh.aliases
    assert history.names["torch.distributed.device_mesh.DeviceMesh"].moved_to == []
    assert "moved" not in since_line(mesh, history)


def test_removed_in_claims_are_all_absences_of_resolution(history: ApiHistory) -> None:
    removed = [n for n, e in history.names.items() if e.removed_in]
    # Before: 101 claims, 20 of them false (names that still imported). Each claim now is a name that
    # stops resolving; the self-check below holds the pin's side of that against the installed torch.
    assert not [n for n in removed if n.startswith("torch.distributed._composable.fsdp.FSDPModule.")]


# --- lookups are exact or say they are not (issue 29 item 4, issue 32 item 5) -------------------------------


def test_a_qualified_name_the_timeline_lacks_gets_candidates_not_another_object(tree: Path) -> None:
    book = HistoryBook(tree / "references")
    with pytest.raises(HistoryError, match=r"in none of the torch releases.*did you mean: "
                                           r"torch\.distributed\.fsdp\.fully_shard, "):
        book.lookup("torch.distributed.fsdp.fully_shard.fully_shard")
    with pytest.raises(HistoryError, match="did you mean: torch.distributed.Work.wait"):
        book.lookup("torch.distributed.Work.wiat")
    assert book.lookup("torch.distributed.Work.wait").origin == "torch._C._distributed_c10d:Work.wait"
    assert book.lookup("ProcessGroup.size").name == "torch.distributed.ProcessGroup.size"
    step = book.lookup("ScheduleZBVZeroBubble.step")
    assert step.origin.startswith("torch.distributed.pipelining.schedules:") and "Optimizer" not in step.origin


def test_a_short_name_get_api_reads_as_another_api_is_refused_with_that_name(tree: Path) -> None:
    def resolve(symbol: str) -> tuple[str, list[str]]:
        return {"DDP": "torch.nn.parallel.DistributedDataParallel"}[symbol], []

    with pytest.raises(HistoryError, match="DistributedDataParallel.*did you mean: .*_composable.replicate.DDP"):
        HistoryBook(tree / "references").lookup("DDP", resolve)


def test_the_cli_exits_non_zero_with_candidates_and_says_aliases(
        tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tree))
    assert main(["history", "torch.distributed.fsdp.fully_shard.fully_shard"]) == UserError.exit_code
    err = capsys.readouterr().err
    assert "did you mean" in err and "Traceback" not in err
    assert main(["history", "torch.distributed.all_reduce"]) == 0
    out = capsys.readouterr().out
    assert "aliases: torch.distributed.distributed_c10d.all_reduce" in out and "also named so" not in out


# --- the self-check: the pin's column against the installed torch (issue 29 item 6) ---------------------------


@functools.cache
def _import(module: str) -> tuple[str, Any]:
    """('ok', module) | ('missing', None): no such module | ('unimportable', why); once per module path (a
    failed import is slow to repeat, and most names are tried as modules first)."""
    try:
        return "ok", importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            return "missing", None
        return "unimportable", repr(exc)  # an optional dependency of the module (etcd's urllib3)
    except Exception as exc:  # noqa: BLE001 - any import failure is a fact about this machine, reported
        return "unimportable", repr(exc)


def _resolve(name: str) -> tuple[str, Any]:
    """('ok', object) | ('absent', None) | ('unimportable', why): import the longest module prefix, then
    follow the attribute chain, as `import a.b; a.b.c.d` does."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        state, found = _import(".".join(parts[:cut]))
        if state == "missing":
            continue
        if state == "unimportable":
            return state, found
        for part in parts[cut:]:
            try:
                found = getattr(found, part)
            except AttributeError:
                return "absent", None
        return "ok", found
    return "absent", None


def _live_params(found: Any, kind: str) -> list[list[str]] | None:
    """[name, kind] of the live signature, as the facts spell them; None when Python cannot tell (C++)."""
    try:
        signature = inspect.signature(found)
    except (TypeError, ValueError):
        return None
    kinds = {inspect.Parameter.POSITIONAL_ONLY: "/", inspect.Parameter.POSITIONAL_OR_KEYWORD: "",
             inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.KEYWORD_ONLY: "kw",
             inspect.Parameter.VAR_KEYWORD: "**"}
    params = [[p.name, kinds[p.kind]] for p in signature.parameters.values()]
    if kind == "method" and params and params[0][1] in ("", "/"):
        params = params[1:]  # the class attribute is the plain function: `self` comes first
    return params


def _warns(found: Any, kind: str) -> bool:
    """Does calling it (with a placeholder for every parameter) warn of a deprecation? A placeholder
    makes the body fail right after the warning, before any work; the data kind warns on attribute use."""
    placeholder = object()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if kind == "data":
                _ = found.SUM
            else:
                signature = inspect.signature(found)
                arguments = {n: placeholder for n, p in signature.parameters.items()
                             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
                result = found(**arguments)
                if hasattr(result, "__enter__"):  # a @contextmanager runs its body on entry (state_dict_type)
                    with result:
                        pass
        except Exception:  # noqa: BLE001,S110 - the placeholder is meant to fail; only the warning counts
            pass
    # typing_extensions.deprecated warns with its message alone ("Use `set_gradient_divide_factor` instead")
    return any(issubclass(w.category, (DeprecationWarning, FutureWarning)) or "deprecat" in str(w.message).lower()
               for w in caught)


def _disagreements(names: dict[str, Any], pin_facts: dict[str, Any]) -> tuple[list[str], dict[str, int]]:
    """What the installed torch says against the pin's column for each entry: exists, signature (names and
    kinds), and, for the names deprecated in the pin or no longer from it, whether calling one warns."""
    disagreements: list[str] = []
    checked = {"exists": 0, "signature": 0, "warns": 0}
    for name, entry in sorted(names.items()):
        claimed = PIN in entry.versions
        state, found = _resolve(name)
        if state == "unimportable" or (entry.conditional and state == "absent"):
            continue  # a module's optional dependency missing here, or a backend this build lacks (MPI)
        checked["exists"] += 1
        if claimed != (state == "ok"):
            disagreements.append(f"{name}: timeline says {'present' if claimed else 'absent'} in {PIN}, "
                                 f"torch says {state}")
            continue
        if not claimed:
            continue
        fact = pin_facts[name]
        if "params" in fact and fact["kind"] in ("function", "method", "staticmethod", "classmethod", "class"):
            live = _live_params(found, fact["kind"])
            if live is not None:
                checked["signature"] += 1
                if live != [[p[0], p[1]] for p in fact["params"]]:
                    disagreements.append(f"{name}: signature {fact['params']} in the timeline, {live} live")
        deprecated_now = bool(entry.deprecations) and entry.deprecations[-1].until is None
        if deprecated_now or entry.deprecated_until == PIN:
            checked["warns"] += 1
            if _warns(found, entry.kind) != deprecated_now:
                disagreements.append(f"{name}: the timeline says it {'warns' if deprecated_now else 'does not warn'}")
    return disagreements, checked


@pytest.mark.torch
def test_the_pins_column_agrees_with_the_installed_torch(history: ApiHistory,
                                                          facts: dict[str, dict[str, Any]]) -> None:
    import torch

    assert torch.__version__.split("+")[0] == history.pinned == PIN, "the timeline's pin is the torch installed"
    disagreements, checked = _disagreements(history.names, facts[PIN])
    assert checked["exists"] > 2500 and checked["signature"] > 1500 and checked["warns"] > 50, checked
    assert disagreements == [], f"{len(disagreements)} disagreements: {disagreements[:20]}"


@pytest.mark.torch
def test_the_self_check_catches_a_wrong_existence_signature_or_deprecation(
        history: ApiHistory, facts: dict[str, dict[str, Any]]) -> None:
    names = {n: history.names[n] for n in ("torch.distributed.all_gather_single", "torch.distributed.barrier",
                                           "torch.distributed.all_gather_into_tensor", "torch.distributed.launch.main")}
    names["torch.distributed.all_gather_single"] = names["torch.distributed.all_gather_single"].model_copy(
        update={"versions": ["2.13.0", "2.14.1"]})  # "removed in 2.15": it imports
    names["torch.distributed.all_gather_into_tensor"] = history.names["torch.distributed.launch.main"].model_copy(
        update={"name": "torch.distributed.all_gather_into_tensor"})  # "warns in 2.15": it no longer does
    pin_facts = dict(facts[PIN])
    barrier = pin_facts["torch.distributed.barrier"]
    pin_facts["torch.distributed.barrier"] = {**barrier, "params": barrier["params"][:-1]}
    disagreements, _ = _disagreements(names, pin_facts)
    assert [d.split(":")[0] for d in disagreements] == [
        "torch.distributed.all_gather_into_tensor", "torch.distributed.all_gather_single",
        "torch.distributed.barrier"], disagreements

def test_the_mcp_tool_refuses_a_name_it_lacks_with_candidates(tree: Path) -> None:
    async def body() -> Any:
        with anyio.fail_after(60):
            async with Client(build_server(tree)) as client:
                asked = {"symbol": "torch.distributed.fsdp.fully_shard.fully_shard"}
                return await client.call_tool("api_history", asked)

    result = anyio.run(body)
    assert result.is_error and "did you mean: torch.distributed.fsdp.fully_shard" in result.content[0].text

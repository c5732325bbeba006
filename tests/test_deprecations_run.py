"""The deprecated list (api-drift.md, SKILL.md's what-changed block) against a run of the installed torch:
each listed API, called on CPU, warns with the listed message, and nothing listed is a replacement."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_skill.apidoc.deprecation import clean_message
from fsdp_skill.core.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]
DRIFT = (ROOT / "references" / "api-drift.md").read_text(encoding="utf-8")
CALLS = Path(__file__).with_name("deprecated_calls.py")
sys.path.insert(0, str(CALLS.parent))
from deprecated_calls import RECIPES  # noqa: E402 - the recipes live next to this file

_ROW = re.compile(r"^\| `([\w.]+)` \| `?([\w.]*)`? \| (.*) \|$")
_STATED = re.compile(r"^Stated in the deprecation warning of [\w.]+: ")


def _listed() -> dict[str, tuple[str, str]]:
    """api-drift.md's Deprecated table: name -> (replacement, message)."""
    table = DRIFT.split("## Deprecated in", 1)[1].split("\n## ", 1)[0]
    rows = (_ROW.match(line) for line in table.splitlines())
    return {m.group(1): (m.group(2), m.group(3).replace("\\|", "|")) for m in rows if m}


def _run(group: str) -> dict[str, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, str(CALLS), group], capture_output=True, text=True, timeout=300, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _says(listed_message: str, warned: str) -> bool:
    """Whether a warning's text is the listed message (parts the source builds at run time are {…})."""
    core = _STATED.sub("", listed_message)
    pattern = ".*?".join(re.escape(part) for part in core.split("{…}"))
    return re.fullmatch(pattern, clean_message(warned)) is not None


def test_every_listed_deprecation_has_a_cpu_call_and_every_call_is_listed() -> None:
    listed = _listed()
    assert len(listed) >= 25
    assert sorted(set(listed) - set(RECIPES)) == [], "add a call to tests/deprecated_calls.py RECIPES"
    assert sorted(set(RECIPES) - set(listed)) == [], "listed no longer: the detector lost it, or torch changed"


@pytest.mark.torch
def test_calling_each_listed_deprecated_api_emits_the_listed_warning() -> None:
    listed = _listed()
    results = {**_run("gloo"), **_run("fake")}
    assert set(results) == set(RECIPES)
    silent = []
    for name, result in results.items():
        warned = [message for category, message in result["warnings"]  # type: ignore[union-attr]
                  if category in ("FutureWarning", "DeprecationWarning")]
        if not any(_says(listed[name][1], message) for message in warned):
            silent.append(f"{name}: warned {warned}, error {result['error']}")
    assert silent == []


def test_no_listed_replacement_is_itself_listed_as_deprecated() -> None:
    listed = _listed()
    for name, (replacement, _) in listed.items():
        if not replacement:
            continue
        owner = name.rsplit(".", 1)[0]
        package = ".".join(name.split(".")[:3])
        spelled = {replacement, f"{owner}.{replacement}"}
        clashes = [other for other in listed if other in spelled
                   or (not replacement.startswith("torch.") and other.startswith(package)
                       and other.endswith("." + replacement))]
        assert clashes == [], f"{name} -> {replacement}, itself listed as {clashes}"


def test_the_current_fsdp2_api_is_not_deprecated_and_the_functional_collectives_entry_says_what_replaces_it() -> None:
    catalog = {entry.qualified_name: entry for entry in load_catalog(ROOT / "references" / "catalog.json").api}
    assert catalog["torch.distributed.fsdp.FSDPModule.set_gradient_divide_factor"].deprecation is None
    old = catalog["torch.distributed.fsdp.FSDPModule.set_reduce_scatter_divide_factor"].deprecation
    assert old is not None and old.replacement == "set_gradient_divide_factor"
    entry = catalog["torch.distributed.nn.functional.all_reduce"]
    assert entry.deprecation is not None
    assert entry.deprecation.replacement == "torch.distributed._functional_collectives.all_reduce"
    assert catalog["torch.distributed.nn.functional.gather"].deprecation is None  # it does not warn
    assert "torch.distributed.fsdp.FSDPModule.set_gradient_divide_factor" not in _listed()
    members = catalog["torch.distributed.fsdp.ShardingStrategy"].description.split("**Members:**", 1)[1]
    no_shard = next(line for line in members.splitlines() if line.startswith("- `NO_SHARD`"))
    assert "(deprecated: " in no_shard and "`DistributedDataParallel`" in no_shard
    assert "deprecated" not in next(line for line in members.splitlines() if line.startswith("- `FULL_SHARD`"))

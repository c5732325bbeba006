"""What the terminal commands print: docs text exactly as written (rich never reads it as markup), and a
quiet exit when the reader of their output goes away (`| head`). Real subprocesses on the real data."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from fsdp_skill.cli.search import render_api
from fsdp_skill.core.catalog import load_catalog
from fsdp_skill.core.streams import CLOSED_STDOUT_EXIT
from fsdp_skill.search.index import open_index
from fsdp_skill.serve.tools import Toolbox

ROOT = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-m", "fsdp_skill"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FSDP_SKILL_ROOT"}
    return {**env, "PYTHONPATH": str(ROOT / "server"), "COLUMNS": "120"}


def test_show_prints_a_bracketed_type_whole() -> None:
    result = subprocess.run([*COMMAND, "show", "fully_shard"], capture_output=True, text=True, timeout=60,
                            env=_env(), cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "Optional[Union[bool, int]]" in result.stdout and "Optional[Union] " not in result.stdout


def test_every_bracketed_parameter_type_and_description_of_the_catalog_is_printed_as_written() -> None:
    box = Toolbox(open_index(ROOT))
    checked = 0
    for entry in load_catalog(ROOT / "references" / "catalog.json").api:
        bracketed = [p for p in entry.parameters if "[" in (p.type or "") + (p.description or "")]
        if not bracketed:
            continue
        out = io.StringIO()
        Console(file=out, width=2000, color_system=None).print(render_api(box.get_api(entry.qualified_name)))
        text = " ".join(out.getvalue().split())
        for p in bracketed:
            # Every `name[...]` as the docs write it (a wide console: nothing is folded).
            for shown in re.findall(r"\w+\[[^\]\s]*\]", f"{p.type} {p.description}"):
                assert shown in text, (entry.qualified_name, p.name, shown)
                checked += 1
    assert checked > 100  # the issue counted 112 parameter fields


@pytest.mark.parametrize(
    "args",
    [["show", "fully_shard"], ["show", "fully_shard", "--json"], ["api", "--all"], ["api"],
     ["search", "fully_shard mixed precision"], ["search", "fully_shard", "--json"], ["--help"], ["--version"],
     ["validate", "--help"]],
    ids=lambda args: " ".join(args),
)
def test_a_closed_stdout_ends_the_command_quietly(args: list[str]) -> None:
    # The reader is gone before the first write: every write fails (what `| head` does after its lines).
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([*COMMAND, *args], stdout=write, stderr=subprocess.PIPE, text=True, timeout=60,
                              env=_env(), cwd=ROOT)
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.stderr == ""
    # argparse's --help may exit 0 before its text is flushed; the commands end as rich does on this.
    expected = (0, CLOSED_STDOUT_EXIT) if args[-1] in ("--help", "--version") else (CLOSED_STDOUT_EXIT,)
    assert proc.returncode in expected


def test_head_after_the_first_lines_leaves_no_traceback() -> None:
    result = subprocess.run(f"{sys.executable} -m fsdp_skill api --all | head -3", shell=True, capture_output=True,
                            text=True, timeout=60, env=_env(), cwd=ROOT)
    assert len(result.stdout.splitlines()) == 3 and result.stderr == ""

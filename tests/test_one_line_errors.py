"""Hostile data and a missing dependency are one-line errors, never tracebacks (issue 32, item 10)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_skill.core.catalog import CatalogError, load_catalog
from search_fixture import make_tree

FSDP_SKILL = str(Path(sys.executable).with_name("fsdp-skill"))


def test_verify_without_torch_says_how_to_install_it(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    fake = tmp_path / "no-torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'torch\'", name="torch")\n')
    path = os.pathsep.join([str(tmp_path / "no-torch"), os.environ.get("PYTHONPATH", "")])
    result = subprocess.run([FSDP_SKILL, "verify", "-k", "all_reduce"], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": path, "FSDP_SKILL_ROOT": str(tmp_path / "tree")})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.count("\n") == 1 and "verify: error: torch is not installed" in result.stderr
    assert "-m pip install torch" in result.stderr


@pytest.mark.parametrize("content", [b"\xff\xfe{}", b"{\"a\": " * 100_000])
def test_a_catalog_that_is_not_utf8_or_nested_too_deeply_is_a_catalog_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "catalog.json"
    path.write_bytes(content)
    with pytest.raises(CatalogError, match=r"catalog\.json is not (UTF-8 text|a catalog)"):
        load_catalog(path)

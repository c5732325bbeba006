"""Test-wide hooks and fixtures: tests marked `torch` skip, with that reason, where torch is not installed;
`committed_index` opens the repository's index once for the session.

The server, search, conversion and validation never need torch; regenerating, the runner and the
patterns do. A checkout with only the package and the dev extra runs the first kind and lists the
second as skipped instead of failing it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TORCH_MISSING = "torch is not installed"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("torch") is not None:
        return
    skip = pytest.mark.skip(reason=TORCH_MISSING)
    for item in items:
        if item.get_closest_marker("torch") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def committed_index():
    """The repository's committed index, read-only (a module may define its own fixture of this name)."""
    from fsdp_skill.search.index import open_index

    root = Path(__file__).resolve().parents[1]
    if not (root / "references" / "index.sqlite").is_file():
        pytest.skip("references/ has not been generated in this checkout")
    idx = open_index(root, warn=lambda message: None)
    yield idx
    idx.close()

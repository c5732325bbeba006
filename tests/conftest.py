"""Test-wide hooks: tests marked `torch` skip, with that reason, where torch is not installed.

The server, search, conversion and validation never need torch; regenerating, the runner and the
patterns do. A checkout with only the package and the dev extra runs the first kind and lists the
second as skipped instead of failing it.
"""

from __future__ import annotations

import importlib.util

import pytest

TORCH_MISSING = "torch is not installed"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("torch") is not None:
        return
    skip = pytest.mark.skip(reason=TORCH_MISSING)
    for item in items:
        if item.get_closest_marker("torch") is not None:
            item.add_marker(skip)

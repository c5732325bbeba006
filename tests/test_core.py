"""core: the shared vocabularies and the installed torch's version (both stdlib only)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import fsdp_skill
from fsdp_skill.core.errors import FsdpSkillError, UserError
from fsdp_skill.core.torch_version import installed_torch_version, release_version
from fsdp_skill.core.vocabulary import DOCUMENT_KINDS, EXAMPLE_STATUSES, PATTERN_STATUSES, STATUS_FILTERS

SERVER = Path(__file__).resolve().parents[1] / "server"


def test_the_release_version_drops_the_wheel_label_only() -> None:
    assert release_version("2.13.0+cpu") == "2.13.0"
    assert release_version("2.14.0.dev20260101+cu128") == "2.14.0.dev20260101"
    assert release_version("2.13.0") == "2.13.0"


def test_no_torch_on_the_path_means_no_version(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert installed_torch_version() is None


@pytest.mark.torch
def test_the_installed_version_is_the_one_import_torch_reports_and_reading_it_does_not_import_torch() -> None:
    # A fresh interpreter: this one may have imported torch already.
    code = (
        f"import sys; sys.path.insert(0, {str(SERVER)!r})\n"
        "from fsdp_skill.core.torch_version import installed_torch_version\n"
        "version = installed_torch_version(); loaded = 'torch' in sys.modules\n"
        "import torch; print(version, loaded, torch.__version__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    version, loaded, imported = out.split()
    # The registry's CUDA build names its build only in torch.__version__ ('2.15.0+cu132'), not in its metadata.
    assert release_version(version) == release_version(imported) and loaded == "False"


def test_a_torch_the_metadata_does_not_own_is_asked_for_its_version(tmp_path: Path) -> None:
    # A source checkout on the path shadowing the wheel: its own __version__ counts, not the wheel's metadata.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("__version__ = '9.9.9+local'\n", encoding="utf-8")
    code = (
        f"import sys; sys.path[:0] = [{str(tmp_path)!r}, {str(SERVER)!r}]\n"
        "from fsdp_skill.core.torch_version import installed_torch_version; print(installed_torch_version())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.strip() == "9.9.9+local"


def test_statuses_are_listed_in_report_order_and_patterns_have_no_doc_bug() -> None:
    assert EXAMPLE_STATUSES == ("passed", "passed-with-stand-ins", "doc-bug", "checked", "skipped", "failed")
    assert PATTERN_STATUSES == ("passed", "skipped", "failed")
    assert STATUS_FILTERS == (*EXAMPLE_STATUSES, "not verified")
    assert DOCUMENT_KINDS == ("section", "api", "example", "pattern", "skill", "release")


def test_every_exception_class_the_package_defines_derives_from_the_one_root() -> None:
    # Importing every module needs no torch: the modules that use it import it inside functions.
    defined: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(fsdp_skill.__path__, "fsdp_skill."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == info.name:
                defined[f"{info.name}.{name}"] = value
    assert len(defined) >= 12, sorted(defined)
    assert [name for name, cls in defined.items() if not issubclass(cls, FsdpSkillError)] == []
    # Errors the user fixes exit 2 (and the CLI prints them as one line); a download failure exits 3.
    user_facing = ["verify.examples.CatalogReadError", "verify.patterns.PatternHeaderError", "search.query.QueryError",
                   "serve.tools.ToolInputError", "core.catalog.CatalogError", "search.index.IndexUnavailable"]
    assert all(issubclass(defined[f"fsdp_skill.{name}"], UserError) for name in user_facing)


def test_tests_that_need_torch_say_so_with_the_marker_not_importorskip() -> None:
    # The marker gives every such skip the same reason and lets `-m "not torch"` select the rest.
    tests = Path(__file__).resolve().parent
    needle = "importorskip(" + '"torch"'
    offenders = [p.name for p in sorted(tests.rglob("*.py")) if needle in p.read_text(encoding="utf-8")]
    assert offenders == [], f"use @pytest.mark.torch instead of pytest.{needle}) in {offenders}"

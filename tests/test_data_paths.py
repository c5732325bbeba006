"""Where the data is read from ($FSDP_SKILL_ROOT, the checkout, the installed package data) and the one-line
errors when it is missing or read-only. The real installed wheel is exercised in tests/test_packaging.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from fsdp_skill.cli.main import main
from fsdp_skill.core import paths

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def as_installed_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Pretend this code runs from a wheel: no checkout around it, its data in a _data folder."""
    data = tmp_path / "site-packages" / "fsdp_skill" / "_data"
    data.mkdir(parents=True)
    (data / "SKILL.md").write_text("---\nname: pytorch-fsdp\n---\n", encoding="utf-8")
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    monkeypatch.setattr(paths, "checkout_root", lambda: None)
    monkeypatch.setattr(paths, "PACKAGE_DATA", data)
    return data


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_checkout_reads_its_own_data_and_may_write_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    assert paths.locate() == paths.DataRoot(ROOT, "checkout")
    assert paths.writable_root("regenerate writes") == ROOT


def test_fsdp_skill_root_wins_over_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(paths.ENV_VAR, str(tmp_path))
    assert paths.locate() == paths.DataRoot(tmp_path.resolve(), "env")


def test_fsdp_skill_root_that_is_not_a_folder_is_an_error_not_a_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(paths.ENV_VAR, str(tmp_path / "nowhere"))
    assert main(["search", "all_reduce"]) == 2
    err = _one_line_error(capsys)
    assert "FSDP_SKILL_ROOT=" in err and "is not a folder" in err and "skill install" in err


def test_installed_package_data_is_used_without_a_checkout(as_installed_package: Path) -> None:
    assert paths.locate() == paths.DataRoot(as_installed_package, "package")


def test_fsdp_skill_root_naming_the_package_data_keeps_it_read_only(
    as_installed_package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(paths.ENV_VAR, str(as_installed_package))
    with pytest.raises(paths.CheckoutRequired):
        paths.writable_root("regenerate writes")


@pytest.mark.parametrize("argv", [["regenerate"], ["regenerate", "--check"], ["fetch"], ["verify", "--write-report"]])
def test_commands_that_write_next_to_the_data_need_a_checkout(
    as_installed_package: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = _one_line_error(capsys)
    assert "needs a checkout" in err and "FSDP_SKILL_ROOT" in err and str(as_installed_package) in err
    assert list(as_installed_package.iterdir()) == [as_installed_package / "SKILL.md"]


def test_no_data_anywhere_says_what_to_install_or_where_to_point(
    as_installed_package: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(paths, "PACKAGE_DATA", as_installed_package.parent / "missing")
    assert main(["show", "fully_shard"]) == 2
    err = _one_line_error(capsys)
    assert "no skill data" in err and "pip install" in err and "FSDP_SKILL_ROOT" in err


def test_incomplete_package_data_names_a_reinstall_not_regenerate(
    as_installed_package: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "all_reduce"]) == 2
    err = _one_line_error(capsys)
    assert "reinstall" in err and "regenerate" not in err


def test_version_names_the_data_it_reads(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(paths.ENV_VAR, raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert f"data: {ROOT} (checkout)" in capsys.readouterr().out

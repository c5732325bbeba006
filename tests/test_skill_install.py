"""`fsdp-skill skill install`: an atomic, validated copy of the skill folder that never clobbers what it should not.

These install from this checkout (in-process); tests/test_packaging.py installs from the built wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_skill.cli import skill_install
from fsdp_skill.cli.main import main
from fsdp_skill.cli.skill_install import install_skill, read_skill_info, skill_files
from fsdp_skill.cli.validate import validate
from fsdp_skill.core.errors import UserError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("skills") / "pytorch-fsdp"
    assert install_skill(target, source=ROOT) is not None
    return target


@pytest.fixture
def copy_of_install(installed_once: Path, tmp_path: Path) -> Path:
    target = tmp_path / "pytorch-fsdp"
    shutil.copytree(installed_once, target)
    return target


def _set_version(folder: Path, version: str) -> None:
    skill = folder / "SKILL.md"
    text = skill.read_text(encoding="utf-8")
    old = f'skill-version: "{read_skill_info(folder).version}"'  # type: ignore[union-attr]
    assert old in text
    skill.write_text(text.replace(old, f'skill-version: "{version}"'), encoding="utf-8")


def test_installed_folder_holds_the_skill_files_and_validates_with_no_broken_links(installed_once: Path) -> None:
    assert set(skill_files(installed_once)) == set(skill_files(ROOT))
    assert {p.name for p in installed_once.iterdir()} == {"SKILL.md", "references", "assets", "scripts", "LICENSE",
                                                          "upstream"}
    report = validate(installed_once)
    assert report.problems == [] and report.links > 100


def test_default_folder_is_the_claude_skills_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["skill", "install"]) == 0
    target = tmp_path / ".claude" / "skills" / "pytorch-fsdp"
    assert (target / "SKILL.md").is_file()
    assert f"into {target}:" in capsys.readouterr().out


def test_installing_the_same_version_again_changes_nothing(copy_of_install: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    before = {p: p.stat().st_mtime_ns for p in copy_of_install.rglob("*")}
    assert main(["skill", "install", "--target", str(copy_of_install)]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in copy_of_install.rglob("*")} == before


def test_another_version_is_replaced_only_with_force(copy_of_install: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _set_version(copy_of_install, "0.0.1")
    (copy_of_install / "references" / "gone-in-new-version.md").write_text("# old\n", encoding="utf-8")
    assert main(["skill", "install", "--target", str(copy_of_install)]) == 2
    err = capsys.readouterr().err
    assert "version 0.0.1" in err and "--force" in err and err.count("\n") == 1
    assert read_skill_info(copy_of_install).version == "0.0.1"  # type: ignore[union-attr]
    assert main(["skill", "install", "--target", str(copy_of_install), "--force"]) == 0
    assert "replacing version 0.0.1" in capsys.readouterr().out
    assert set(skill_files(copy_of_install)) == set(skill_files(ROOT))  # the old version's extra file is gone


def test_local_edits_to_the_same_version_are_kept_unless_forced(copy_of_install: Path) -> None:
    edited = copy_of_install / "references" / "fsdp2.md"
    edited.write_text("my notes\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"1 file\(s\) differ .*references/fsdp2.md.*--force"):
        install_skill(copy_of_install, source=ROOT)
    assert edited.read_text(encoding="utf-8") == "my notes\n"
    install_skill(copy_of_install, force=True, source=ROOT)
    assert edited.read_bytes() == (ROOT / "references" / "fsdp2.md").read_bytes()


def test_a_folder_that_is_not_this_skill_is_never_replaced(tmp_path: Path) -> None:
    target = tmp_path / "pytorch-fsdp"
    target.mkdir()
    (target / "thesis.tex").write_text("precious\n", encoding="utf-8")
    for force in (False, True):
        with pytest.raises(UserError, match="never replaced, even with --force"):
            install_skill(target, force=force, source=ROOT)
    assert [p.name for p in target.iterdir()] == ["thesis.tex"]


def test_a_clone_of_the_repository_is_never_replaced(copy_of_install: Path) -> None:
    _set_version(copy_of_install, "0.0.1")
    (copy_of_install / ".git").mkdir()
    (copy_of_install / "server").mkdir()
    with pytest.raises(UserError, match=r"other files too \(\.git, server\).*never replaced, even with --force"):
        install_skill(copy_of_install, force=True, source=ROOT)
    assert (copy_of_install / ".git").is_dir()


def test_a_file_in_the_way_or_the_source_itself_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(UserError, match="not a folder"):
        install_skill(tmp_path / "file", source=ROOT)
    for overlapping in (ROOT, ROOT / "references", ROOT / "assets" / "patterns" / "x", ROOT.parent):
        with pytest.raises(UserError, match="overlaps"):
            install_skill(overlapping, force=True, source=ROOT)


def test_a_failed_copy_leaves_the_old_folder_and_no_temporary_folder(
    copy_of_install: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _set_version(copy_of_install, "0.0.1")
    before = sorted(p.relative_to(copy_of_install) for p in copy_of_install.rglob("*"))
    copied = 0

    def failing_copy(src: Path, dst: Path) -> None:
        nonlocal copied
        copied += 1
        if copied == 10:
            raise OSError(28, "No space left on device")
        shutil.copyfile(src, dst)

    monkeypatch.setattr(skill_install.shutil, "copy2", failing_copy)
    with pytest.raises(UserError, match="No space left on device"):
        install_skill(copy_of_install, force=True, source=ROOT)
    assert sorted(p.relative_to(copy_of_install) for p in copy_of_install.rglob("*")) == before
    assert read_skill_info(copy_of_install).version == "0.0.1"  # type: ignore[union-attr]
    assert [p.name for p in copy_of_install.parent.iterdir()] == ["pytorch-fsdp"]


def test_temporary_folders_of_a_killed_install_are_removed_by_the_next_one(tmp_path: Path) -> None:
    target = tmp_path / "pytorch-fsdp"
    for leftover in (".pytorch-fsdp.new-abc123", ".pytorch-fsdp.old-def456"):
        (tmp_path / leftover / "references").mkdir(parents=True)
    install_skill(target, source=ROOT)
    assert [p.name for p in tmp_path.iterdir()] == ["pytorch-fsdp"]


def test_a_source_without_the_skill_data_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tmp_path))
    assert main(["skill", "install", "--dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "lacks SKILL.md, references/catalog.json" in err and "FSDP_SKILL_ROOT" in err
    assert not (tmp_path / "out").exists()


def test_a_folder_named_otherwise_gets_a_note_about_the_spec(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["skill", "install", "--target", str(tmp_path / "fsdp")]) == 0
    assert "wants the folder named after the skill (pytorch-fsdp)" in capsys.readouterr().out


def _fsdp_skill(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FSDP_SKILL_ROOT"}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT / "server"))
    return subprocess.run([sys.executable, "-m", "fsdp_skill", *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=home)


def test_dir_is_the_skills_folder_and_the_skill_lands_in_dir_slash_pytorch_fsdp_which_validates(tmp_path: Path) -> None:
    result = _fsdp_skill("skill", "install", "--dir", "~/skills", home=tmp_path)
    assert result.returncode == 0, result.stderr
    target = tmp_path / "skills" / "pytorch-fsdp"
    assert f"into {target}:" in result.stdout and "note:" not in result.stdout
    assert sorted(p.name for p in (tmp_path / "skills").iterdir()) == ["pytorch-fsdp"]
    check = _fsdp_skill("validate", str(target), home=tmp_path)
    assert check.returncode == 0 and "no problems" in check.stdout, check.stdout


def test_dir_naming_the_skill_folder_itself_is_refused_pointing_at_target(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "skills" / "pytorch-fsdp"
    assert main(["skill", "install", "--dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--dir {folder.parent}" in err and f"--target {folder}" in err
    assert not folder.exists()


def test_a_bare_folder_argument_is_refused_naming_both_options(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["skill", "install", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "ambiguous" in err and "--dir" in err and "--target" in err and not (tmp_path / "x").exists()


def test_dir_and_target_together_are_an_argument_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["skill", "install", "--dir", str(tmp_path), "--target", str(tmp_path / "t")])
    assert exit_info.value.code == 2


def test_the_help_says_what_dir_and_target_mean() -> None:
    result = _fsdp_skill("skill", "install", "--help", home=Path("/"))
    text = " ".join(result.stdout.split())
    assert "the skill goes into DIR/pytorch-" in text and "the skill folder itself, used as given" in text


def test_a_target_that_cannot_be_written_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each of these was a traceback (FileExistsError, NotADirectoryError, OSError 36, PermissionError).
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    cases = {
        ("--dir", str(tmp_path / "a-file")): "a-file is a file (or a broken link) where a folder must be",
        ("--target", str(tmp_path / "a-file" / "x")): "a-file is a file (or a broken link) where a folder must be",
        ("--dir", str(tmp_path / ("n" * 300))): "File name too long",
        ("--target", str(tmp_path / ("n" * 300))): "File name too long",
        ("--target", str(tmp_path / "dangling")): "dangling is a symbolic link to",
    }
    for args, expected in cases.items():
        assert main(["skill", "install", *args]) == 2, args
        err = capsys.readouterr().err
        assert expected in err and err.count("\n") == 1 and "Traceback" not in err, (args, err)
    monkeypatch.setenv("HOME", str(tmp_path / "a-file"))
    assert main(["skill", "install"]) == 2
    assert "where a folder must be: pick a writable --dir or --target" in capsys.readouterr().err

    def read_only(*args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied", str(tmp_path))

    monkeypatch.setattr(skill_install.tempfile, "mkdtemp", read_only)  # root may write anywhere: simulated
    assert main(["skill", "install", "--dir", str(tmp_path / "skills")]) == 2
    assert "Permission denied" in capsys.readouterr().err

"""`kill -9` during regenerate or fetch: the next run removes what the killed one left, `validate` lists
it meanwhile, .gitignore keeps it out of commits, and a fetch killed mid-swap gets its cache back."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from fsdp_skill.build import pipeline as build
from fsdp_skill.cli.validate import validate
from fsdp_skill.upstream.cache_update import CacheStage
from test_build import no_index, regenerate, small_output
from test_validate import FRONTMATTER, skill  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parents[1]


def killed_midway(code: str, tmp_path: Path) -> None:
    """Run `code` in a child until it prints 'staged', then kill -9 it (every wait bounded)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "FSDP_SKILL_ROOT": str(tmp_path),
            "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
        },
    )
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
            assert selector.select(120), "the child never reached the point to kill it at"
            assert proc.stdout and proc.stdout.readline().strip() == "staged"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()


def test_a_regenerate_killed_while_writing_leaves_a_folder_validate_lists_and_the_next_regenerate_removes(
    skill: Path, monkeypatch  # noqa: F811
) -> None:
    killed_midway(
        f"""
        import sys, time
        from pathlib import Path
        from test_build import small_output
        from fsdp_skill.build import pipeline as build
        def hang(catalog, path, root, **_):
            print("staged", flush=True)
            time.sleep(600)
        build.build_index = hang
        refs, root = Path({str(skill / "references")!r}), Path({str(skill)!r})
        build.write_output(small_output({{"a.md": "# a\\n"}}), refs, root)
    """,
        skill,
    )
    left = [p for p in (skill / "references").iterdir() if p.name.startswith(".regenerate-")]
    assert len(left) == 1 and (left[0] / "a.md").is_file()
    expected = (f"references/{left[0].name}:1: temporary folder left by an interrupted run: delete it "
                "(the next `fsdp-skill regenerate` or `fetch` removes it too)")
    assert [str(p) for p in validate(skill).problems if "interrupted run" in p.message] == [expected]
    no_index(monkeypatch)
    build.write_output(small_output({"a.md": "# a\n"}), skill / "references", skill)
    assert not left[0].exists()
    assert not [p for p in validate(skill).problems if "interrupted run" in p.message]


def test_regenerate_check_after_a_killed_regenerate_names_the_folder_it_left(
    skill: Path, monkeypatch, capsys  # noqa: F811
) -> None:
    output = small_output({"a.md": "# a\n"})
    no_index(monkeypatch)
    build.write_output(output, skill / "references", skill)  # the committed state: up to date
    killed_midway(
        f"""
        import time
        from pathlib import Path
        from test_build import small_output
        from fsdp_skill.build import pipeline as build
        def hang(catalog, path, root, **_):
            print("staged", flush=True)
            time.sleep(600)
        build.build_index = hang
        refs, root = Path({str(skill / "references")!r}), Path({str(skill)!r})
        build.write_output(small_output({{"a.md": "# a\\n"}}), refs, root)
    """,
        skill,
    )
    left = [p.name for p in (skill / "references").iterdir() if p.name.startswith(".regenerate-")]
    assert len(left) == 1
    assert regenerate(skill, monkeypatch, output, check=True) == 0
    out = capsys.readouterr().out
    assert f"leftover: references/{left[0]} (a temporary folder an interrupted run left: delete it" in out
    assert out.rstrip().endswith("references/ is up to date, but an interrupted run left 1 temporary entry "
                                 "(listed above)")
    assert (skill / "references" / left[0]).is_dir()  # --check changes nothing


def test_a_fetch_killed_while_staging_leaves_a_folder_the_next_fetch_removes(skill: Path) -> None:  # noqa: F811
    killed_midway("""
        import time
        from fsdp_skill.upstream.cache_update import CacheStage
        stage = CacheStage(None)
        stage.write("pytorch/docs/page.md", b"# half")
        print("staged", flush=True)
        time.sleep(600)
    """, skill)
    left = [p for p in skill.iterdir() if p.name.startswith(".upstream-new-")]
    assert len(left) == 1
    assert any(p.file == left[0].name and "interrupted run" in p.message for p in validate(skill).problems)
    with CacheStage(skill):
        assert not left[0].exists()


def test_a_fetch_killed_between_the_two_renames_gets_the_previous_cache_back(tmp_path: Path) -> None:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, timeout=60, check=True)
    dead = int(finished.stdout)  # the pid of a process that has exited
    old = tmp_path / f".upstream-old-{dead}-abcd1234" / "upstream"
    (old / "pytorch").mkdir(parents=True)
    (old / "pytorch" / "MANIFEST.json").write_text("[]\n")
    with CacheStage(tmp_path):
        assert (tmp_path / "upstream" / "pytorch" / "MANIFEST.json").read_text() == "[]\n"
    assert not old.parent.exists()


def test_temporary_names_are_ignored_by_git() -> None:
    names = ["references/.regenerate-123-abcd1234/a.md", "references/.catalog.json.123-abcd1234",
             "references/.index.sqlite.9-x_y", ".upstream-new-5-abcd1234/x", ".upstream-old-5-abcd1234/x"]
    result = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.stdout.split() == names


def test_a_scratch_folder_of_a_dead_run_is_swept_and_a_live_ones_is_kept(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from fsdp_skill.core.scratch import make_scratch_dir

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(done.stdout)  # that process has exited: its folder is a leftover
    dead = tmp_path / f"fsdp-verify-{dead_pid}-abc123"
    live = tmp_path / f"fsdp-verify-{os.getppid()}-xyz789"  # our parent is alive
    dead.mkdir()
    live.mkdir()
    fresh = make_scratch_dir(tmp_path, "fsdp-verify-")
    assert not dead.exists() and live.is_dir() and fresh.is_dir()


def test_a_scratch_like_folder_that_names_no_owner_is_kept_until_it_is_a_day_old(tmp_path: Path) -> None:
    import os
    import time

    from fsdp_skill.core.scratch import UNOWNED_GRACE_S, leftovers

    # Another tool's or an older version's folder may belong to a run that is still going.
    recent = tmp_path / "fsdp-verify-page-code-123"
    old = tmp_path / "fsdp-verify-something"
    recent.mkdir()
    old.mkdir()
    past = time.time() - UNOWNED_GRACE_S - 60
    os.utime(old, (past, past))
    assert leftovers(tmp_path, "fsdp-verify-") == [old]


def test_the_page_code_folder_is_named_by_its_run_so_other_pools_never_take_it_for_a_leftover() -> None:
    import os
    import tempfile

    from fsdp_skill.core.scratch import leftovers
    from fsdp_skill.verify.page_exec import WORKDIR_PREFIX, workdir

    folder = Path(workdir(os.getpid()))
    assert folder.name.startswith(WORKDIR_PREFIX) and not folder.name.startswith("fsdp-verify-")
    folder.mkdir(exist_ok=True)
    try:
        assert folder not in leftovers(Path(tempfile.gettempdir()), WORKDIR_PREFIX)
    finally:
        folder.rmdir()

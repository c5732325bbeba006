"""The torch-api upstream source (upstream.releases): wheels downloaded through an injected downloader (never
the network here), read, stored deduplicated with a manifest, and swapped in only when every release arrived."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from fsdp_skill.apidoc.release_api import read_release
from fsdp_skill.core.errors import NetworkError, UserError
from fsdp_skill.upstream import releases
from fsdp_skill.upstream.cache_update import CacheStage

SOURCES = {
    "2.4.1": {"torch/distributed/__init__.py": "def all_reduce(tensor, op=None):\n    pass\n"},
    "2.5.1": {"torch/distributed/__init__.py": "def all_reduce(tensor, op=None, group=None):\n    pass\n"},
    "2.6.0": {"torch/distributed/__init__.py": "def all_reduce(tensor, op=None, group=None):\n    pass\n"
                                               "def all_gather_single(out, inp):\n    pass\n"},
}


class FakeIndex:
    """A downloader that writes a small wheel per release and counts the downloads."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, release: str, folder: Path) -> Path:
        self.calls.append(release)
        if release not in SOURCES:
            raise NetworkError(f"pip download torch=={release} failed: no such version")
        wheel = folder / f"torch-{release}-cp312-none-macosx_11_0_arm64.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            for path, text in SOURCES[release].items():
                archive.writestr(path, text)
            archive.writestr("torch/nn/modules/linear.py", "x = 1\n")  # not read
            archive.writestr("torch/lib/libtorch.dylib", b"\0" * 64)
        return wheel


def test_each_release_is_read_from_its_wheel_and_recorded_with_the_wheel_name_sha256_and_size(tmp_path: Path) -> None:
    index = FakeIndex()
    update = releases.fetch_releases(tmp_path, ["2.5.1", "2.4.1"], read_release, downloader=index, work_dir=tmp_path)
    assert update.read == ["2.4.1", "2.5.1"] and index.calls == ["2.4.1", "2.5.1"]
    manifest = json.loads((tmp_path / "upstream/torch-api/MANIFEST.json").read_text())
    assert [row["release"] for row in manifest] == ["2.4.1", "2.5.1"]
    assert manifest[0]["wheel"] == "torch-2.4.1-cp312-none-macosx_11_0_arm64.whl"
    assert manifest[0]["files"] == 1 and len(manifest[0]["sha256"]) == 64 and manifest[0]["size"] > 100
    facts = releases.load_release_facts(tmp_path)
    assert [p[0] for p in facts["2.5.1"]["torch.distributed.all_reduce"]["params"]] == ["tensor", "op", "group"]
    assert not list(tmp_path.glob("fsdp-skill-wheels-*")), "the wheels are deleted after reading"


def test_the_sha256_in_the_manifest_is_that_of_the_downloaded_wheel(tmp_path: Path) -> None:
    kept: dict[str, bytes] = {}

    def keeping(release: str, folder: Path) -> Path:
        wheel = FakeIndex()(release, folder)
        kept[release] = wheel.read_bytes()
        return wheel

    releases.fetch_releases(tmp_path, ["2.4.1"], read_release, downloader=keeping, work_dir=tmp_path)
    entry = releases.read_manifest(tmp_path)["2.4.1"]
    assert entry.sha256 == hashlib.sha256(kept["2.4.1"]).hexdigest() and entry.size == len(kept["2.4.1"])


def test_unchanged_facts_are_stored_once_for_all_the_releases_that_share_them(tmp_path: Path) -> None:
    releases.fetch_releases(tmp_path, list(SOURCES), read_release, downloader=FakeIndex(), work_dir=tmp_path)
    stored = json.loads((tmp_path / "upstream/torch-api/facts.json").read_text())
    assert stored["meta"]["releases"] == ["2.4.1", "2.5.1", "2.6.0"]
    variants = stored["names"]["torch.distributed.all_reduce"]
    assert [where for where, _ in variants] == [[0], [1, 2]]  # 2.5.1 and 2.6.0 share one copy


def test_a_second_fetch_reads_only_the_releases_the_cache_lacks_and_refresh_reads_all(tmp_path: Path) -> None:
    releases.fetch_releases(tmp_path, ["2.4.1"], read_release, downloader=FakeIndex(), work_dir=tmp_path)
    index = FakeIndex()
    update = releases.fetch_releases(tmp_path, ["2.4.1", "2.6.0"], read_release, downloader=index, work_dir=tmp_path)
    assert index.calls == ["2.6.0"] and update.kept == ["2.4.1"]
    index = FakeIndex()
    releases.fetch_releases(tmp_path, ["2.4.1", "2.6.0"], read_release, downloader=index, refresh=True,
                            work_dir=tmp_path)
    assert index.calls == ["2.4.1", "2.6.0"]


def test_a_failed_download_leaves_the_cache_as_it_was(tmp_path: Path) -> None:
    releases.fetch_releases(tmp_path, ["2.4.1"], read_release, downloader=FakeIndex(), work_dir=tmp_path)
    before = (tmp_path / "upstream/torch-api/facts.json").read_bytes()
    with pytest.raises(NetworkError, match="2.99.0"):
        releases.fetch_releases(tmp_path, ["2.4.1", "2.5.1", "2.99.0"], read_release, downloader=FakeIndex(),
                                work_dir=tmp_path, refresh=True)
    assert (tmp_path / "upstream/torch-api/facts.json").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "upstream").iterdir()) == ["torch-api"]


def test_a_hand_edited_facts_file_is_refused_with_the_way_to_restore_it(tmp_path: Path) -> None:
    releases.fetch_releases(tmp_path, ["2.4.1"], read_release, downloader=FakeIndex(), work_dir=tmp_path)
    path = tmp_path / "upstream/torch-api/facts.json"
    path.write_text(path.read_text().replace("tensor", "tensors"))
    with pytest.raises(UserError, match="edited.*fsdp-skill fetch --only-releases"):
        releases.load_release_facts(tmp_path)


def test_a_missing_cache_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="fsdp-skill fetch --only-releases"):
        releases.load_release_facts(tmp_path)


def test_a_release_that_is_not_major_minor_patch_is_refused() -> None:
    with pytest.raises(UserError, match="MAJOR.MINOR.PATCH"):
        releases.check_release("2.8")
    assert releases.release_key("2.10.0") > releases.release_key("2.9.1")


def test_the_declared_releases_are_the_last_patch_of_each_minor_from_2_4_on() -> None:
    declared = releases.declared_releases(Path(__file__).resolve().parents[1])
    assert declared[0] == "2.4.1" and len(declared) >= 11
    minors = [tuple(r.split(".")[:2]) for r in declared]
    assert len(set(minors)) == len(minors)


def test_a_docs_fetch_keeps_the_torch_api_cache(tmp_path: Path) -> None:
    releases.fetch_releases(tmp_path, ["2.4.1"], read_release, downloader=FakeIndex(), work_dir=tmp_path)
    before = (tmp_path / "upstream/torch-api/facts.json").read_bytes()
    with CacheStage(tmp_path) as stage:  # what a docs fetch or seed does: a whole new upstream/
        stage.write("README.md", b"docs\n")
        stage.commit()
    assert (tmp_path / "upstream/torch-api/facts.json").read_bytes() == before
    assert releases.load_release_facts(tmp_path)["2.4.1"]


def test_fetch_only_releases_adds_the_releases_the_index_serves_after_the_newest_cached_one(tmp_path: Path) -> None:
    index = FakeIndex()
    releases.fetch_releases(tmp_path, ["2.4.1"], read_release, downloader=index, work_dir=tmp_path)
    served = ["2.6.0", "2.5.0", "2.5.1", "2.4.1", "2.4.0", "2.3.1", "2.13.0+cpu", "2.7.0rc1"]
    wanted, found = releases.discover_releases(tmp_path, ["2.4.1"], lister=lambda: served)
    assert found == ["2.5.1", "2.6.0"], "the last patch of each newer minor; no local build, no pre-release"
    assert wanted == ["2.4.1", "2.5.1", "2.6.0"]
    update = releases.fetch_releases(tmp_path, wanted, read_release, downloader=index, work_dir=tmp_path)
    assert update.read == ["2.5.1", "2.6.0"] and update.kept == ["2.4.1"]
    assert releases.discover_releases(tmp_path, ["2.4.1"], lister=lambda: served) == (wanted, [])


def test_the_index_is_asked_without_the_users_constraint_file(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, str] = {}

    class Done:
        returncode, stderr = 0, ""
        stdout = "torch (2.15.0)\nAvailable versions: 2.15.0, 2.14.1, 2.13.0+cpu\n"

    def run(command: list[str], **kwargs: object) -> Done:
        env = kwargs["env"]
        assert isinstance(env, dict)
        seen.update(env)
        return Done()

    monkeypatch.setenv("PIP_CONSTRAINT", "/etc/caps-torch.txt")
    monkeypatch.setattr(releases.subprocess, "run", run)
    assert releases.pip_index_versions() == ["2.15.0", "2.14.1", "2.13.0+cpu"]
    assert seen["PIP_CONSTRAINT"] == releases.os.devnull, "a cap on installs must not hide a release to read"


def test_the_fetch_command_with_only_releases_reads_a_release_the_index_adds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from fsdp_skill.cli.main import main

    (tmp_path / "assets").mkdir()
    (tmp_path / releases.RELEASES_FILE).write_text('releases = ["2.4.1"]\n')
    (tmp_path / "SKILL.md").write_text("# skill\n")
    index = FakeIndex()
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(tmp_path))
    monkeypatch.setattr(releases, "pip_index_versions", lambda: ["2.5.1", "2.4.1"])
    monkeypatch.setattr(releases, "pip_download", index)
    assert main(["fetch", "--only-releases"]) == 0
    assert index.calls == ["2.4.1", "2.5.1"]
    assert "after the newest one declared or cached: 2.5.1" in capsys.readouterr().err
    assert list(releases.load_release_facts(tmp_path)) == ["2.4.1", "2.5.1"]

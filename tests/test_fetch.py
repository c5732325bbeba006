"""`fsdp-skill fetch`: downloads (through httpx.MockTransport, never the network) and --from-dir seeding."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from fsdp_skill.cli.main import main
from fsdp_skill.core.errors import NetworkError, UserError
from fsdp_skill.upstream import fetch
from fsdp_skill.upstream.fetch import fetch_sources, parse_ref_args, torch_tag
from fsdp_skill.upstream.seed import seed_from_dir
from fsdp_skill.upstream.sources import load_declaration, load_sources, read_cached, source_record
from sources_fixture import REPOS_TOML

SOURCES_TOML = REPOS_TOML + """
[[sources]]
repo = "pytorch/pytorch"
path = "docs/source/fsdp.md"
kind = "page"

[[sources]]
repo = "pytorch/pytorch"
path = "LICENSE"
kind = "licence"

[[sources]]
repo = "pytorch/tutorials"
path = "intermediate_source/FSDP_tutorial.rst"
kind = "tutorial"
"""

RAW = "https://raw.githubusercontent.com"
FSDP_MD = f"{RAW}/pytorch/pytorch/v2.13.0/docs/source/fsdp.md"
LICENSE = f"{RAW}/pytorch/pytorch/v2.13.0/LICENSE"
TUTORIAL = f"{RAW}/pytorch/tutorials/main/intermediate_source/FSDP_tutorial.rst"
TORCH_COMMIT = "1" * 40
BODIES = {
    FSDP_MD: b"# FullyShardedDataParallel\n\n```{eval-rst}\n.. autoclass:: FullyShardedDataParallel\n```\n",
    LICENSE: b"From PyTorch:\n\nBSD-3-Clause\n",
    TUTORIAL: "Getting Started with Fully Sharded Data Parallel (FSDP2)\n\u2014\n".encode(),
}
PINNED = {"pytorch/pytorch": "v2.13.0"}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FakeGitHub:
    """raw.githubusercontent.com and the commits API, with scripted failures per URL."""

    def __init__(self, bodies: dict[str, bytes]) -> None:
        self.bodies = dict(bodies)
        self.script: dict[str, list[int | type[Exception]]] = {}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        url = str(request.url)
        if url.startswith("https://api.github.com/repos/pytorch/pytorch/commits/"):
            return httpx.Response(200, text=TORCH_COMMIT)
        if url.startswith("https://api.github.com/"):
            return httpx.Response(403, json={"message": "API rate limit exceeded"})
        steps = self.script.get(url)
        if steps:
            step = steps.pop(0)
            if isinstance(step, int):
                return httpx.Response(step, headers={"Retry-After": "2"} if step == 429 else {})
            raise step("scripted failure", request=request)
        if url not in self.bodies:
            return httpx.Response(404, text="404: Not Found")
        etag = f'"{sha(self.bodies[url])[:20]}"'
        if request.headers.get("if-none-match") == etag:
            return httpx.Response(304, headers={"ETag": etag})
        return httpx.Response(200, content=self.bodies[url], headers={"ETag": etag})

    def raw_requests(self) -> list[str]:
        return [str(r.url) for r in self.requests if r.url.host == "raw.githubusercontent.com"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "sources.toml").write_text(SOURCES_TOML, encoding="utf-8")
    return tmp_path


def run_fetch(root: Path, github: FakeGitHub, sleeps: list[float] | None = None, **kwargs) -> fetch.CacheUpdate:
    sleep: Callable[[float], None] = sleeps.append if sleeps is not None else (lambda _seconds: None)
    kwargs.setdefault("refs", PINNED)
    return fetch_sources(root, transport=httpx.MockTransport(github), sleep=sleep, show_progress=False, **kwargs)


def route_cli_to(monkeypatch: pytest.MonkeyPatch, github: FakeGitHub) -> None:
    """Make `fsdp-skill fetch` (through cli.main) talk to `github` instead of the network."""
    real_open_client = fetch.open_client

    def open_client(timeout: float, transport: httpx.BaseTransport | None = None) -> httpx.Client:
        return real_open_client(timeout, httpx.MockTransport(github))

    monkeypatch.setattr(fetch, "open_client", open_client)


def snapshot_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def manifest(root: Path, repo_dir: str) -> dict[str, dict]:
    rows = json.loads((root / "upstream" / repo_dir / "MANIFEST.json").read_text(encoding="utf-8"))
    return {row["path"]: row for row in rows}


def test_a_fetch_writes_every_file_and_a_manifest_with_url_ref_commit_sha256_and_licence(root: Path) -> None:
    github = FakeGitHub(BODIES)
    update = run_fetch(root, github)
    assert update.files == 3 and update.unchanged == 0
    assert (root / "upstream/pytorch/docs/source/fsdp.md").read_bytes() == BODIES[FSDP_MD]
    row = manifest(root, "pytorch")["docs/source/fsdp.md"]
    assert row["url"] == FSDP_MD and row["ref"] == "v2.13.0" and row["commit"] == TORCH_COMMIT
    assert row["sha256"] == sha(BODIES[FSDP_MD]) and row["licence"] == "BSD-3-Clause"
    assert row["etag"] and row["chars"] == len(BODIES[FSDP_MD].decode())
    tutorial = manifest(root, "pytorch-tutorials")["intermediate_source/FSDP_tutorial.rst"]
    # The commits API refusing (rate limit) is tolerated: the commit is recorded as unknown.
    assert tutorial["ref"] == "main" and tutorial["commit"] is None
    assert tutorial["chars"] == len(BODIES[TUTORIAL].decode()) < len(BODIES[TUTORIAL])
    page = load_sources(root)[0]
    assert read_cached(root, page) == BODIES[FSDP_MD].decode()
    assert source_record(root, page).commit == TORCH_COMMIT
    assert "pytorch/pytorch at `v2.13.0`" in (root / "upstream/README.md").read_text(encoding="utf-8")


def test_the_default_ref_is_the_installed_torch_tag_and_main_for_the_tutorials(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fetch, "installed_torch_version", lambda: "2.13.0+cpu")
    github = FakeGitHub(BODIES)
    run_fetch(root, github, refs=None)
    assert sorted(github.raw_requests()) == sorted(BODIES)


def test_a_404_leaves_the_cache_untouched_and_prints_one_line_naming_the_url(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_fetch(root, FakeGitHub(BODIES))
    before = snapshot_of(root / "upstream")
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(root))
    route_cli_to(monkeypatch, FakeGitHub(BODIES))
    code = main(["fetch", "--ref", "v9.9.9"])
    err = capsys.readouterr().err
    assert code == NetworkError.exit_code
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{RAW}/pytorch/pytorch/v9.9.9/docs/source/fsdp.md: HTTP 404 Not Found" in err
    assert "--ref REF" in err and "--from-dir DIR" in err
    assert snapshot_of(root / "upstream") == before
    assert [p.name for p in root.iterdir() if p.name.startswith(".upstream")] == []


def test_a_404_is_not_retried(root: Path) -> None:
    github = FakeGitHub(BODIES)
    github.script[FSDP_MD] = [404, 404]
    with pytest.raises(NetworkError, match="HTTP 404"):
        run_fetch(root, github, retries=5)
    assert github.raw_requests().count(FSDP_MD) == 1


@pytest.mark.parametrize("failure", [httpx.ReadTimeout, httpx.ConnectError])
def test_timeouts_and_connection_errors_are_retried_with_backoff_then_reported(
    root: Path, failure: type[Exception]
) -> None:
    run_fetch(root, FakeGitHub(BODIES))
    before = snapshot_of(root / "upstream")
    github = FakeGitHub(BODIES)
    github.script[LICENSE] = [failure] * 4
    sleeps: list[float] = []
    with pytest.raises(NetworkError) as info:
        run_fetch(root, github, sleeps, retries=3, timeout=7)
    message = str(info.value)
    assert message.startswith(f"{LICENSE}: ") and "(4 attempts)" in message and "check the network" in message
    assert ("timed out after 7 s" in message) == (failure is httpx.ReadTimeout)
    assert sleeps == [0.5, 1.0, 2.0]
    assert snapshot_of(root / "upstream") == before


def test_server_errors_and_rate_limits_are_retried_until_the_file_arrives(root: Path) -> None:
    github = FakeGitHub(BODIES)
    github.script[FSDP_MD] = [503, 502]
    github.script[TUTORIAL] = [429]
    sleeps: list[float] = []
    update = run_fetch(root, github, sleeps, retries=2)
    assert update.files == 3
    assert sleeps == [0.5, 1.0, 2.0]  # 503, 502 back off exponentially; the 429 honours Retry-After: 2
    assert manifest(root, "pytorch")["docs/source/fsdp.md"]["sha256"] == sha(BODIES[FSDP_MD])


def test_an_unchanged_file_answers_304_to_its_etag_and_the_cached_copy_is_kept(root: Path) -> None:
    run_fetch(root, FakeGitHub(BODIES))
    first = manifest(root, "pytorch")
    github = FakeGitHub(BODIES)
    update = run_fetch(root, github)
    assert update.unchanged == 3
    assert all(r.headers.get("if-none-match") for r in github.requests if r.url.host == "raw.githubusercontent.com")
    assert manifest(root, "pytorch") == first
    assert (root / "upstream/pytorch/docs/source/fsdp.md").read_bytes() == BODIES[FSDP_MD]


def test_a_changed_file_is_downloaded_again_and_an_edited_cache_is_not_trusted_with_a_304(root: Path) -> None:
    run_fetch(root, FakeGitHub(BODIES))
    (root / "upstream/pytorch/LICENSE").write_bytes(b"edited by hand\n")
    changed = dict(BODIES, **{FSDP_MD: b"# FSDP, revised\n"})
    github = FakeGitHub(changed)
    update = run_fetch(root, github)
    assert update.unchanged == 1  # only the tutorial: fsdp.md changed upstream, LICENSE was edited locally
    license_request = next(r for r in github.requests if str(r.url) == LICENSE)
    assert "if-none-match" not in license_request.headers
    assert (root / "upstream/pytorch/LICENSE").read_bytes() == BODIES[LICENSE]
    assert (root / "upstream/pytorch/docs/source/fsdp.md").read_bytes() == b"# FSDP, revised\n"


def test_a_missing_torch_asks_for_ref_and_ref_makes_the_fetch_work(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(root))
    monkeypatch.setattr(fetch, "installed_torch_version", lambda: None)
    route_cli_to(monkeypatch, FakeGitHub(BODIES))
    assert main(["fetch"]) == UserError.exit_code
    err = capsys.readouterr().err
    assert "torch is not installed" in err and "pass --ref REF" in err and err.count("\n") == 1
    assert not (root / "upstream").exists()
    assert main(["fetch", "--ref", "v2.13.0", "--retries", "0"]) == 0
    assert "3 files from pytorch/pytorch@v2.13.0" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("version", "tag"),
    [("2.13.0", "v2.13.0"), ("2.13.0+cpu", "v2.13.0"), ("2.13.1+cu128", "v2.13.1"), ("2.14.0rc2", "v2.14.0-rc2")],
)
def test_torch_versions_map_to_their_release_tags(version: str, tag: str) -> None:
    assert torch_tag(version) == tag


def test_a_development_torch_has_no_tag_and_the_error_says_to_pass_ref() -> None:
    with pytest.raises(UserError, match=r"2\.14\.0a0\+git1234abc is not a release build.*pass --ref"):
        torch_tag("2.14.0a0+git1234abc")


def test_ref_arguments_name_the_torch_repo_by_default_or_any_declared_repo_explicitly(root: Path) -> None:
    declaration = load_declaration(root)
    refs = parse_ref_args(["v2.12.0", "pytorch/tutorials=abc123"], declaration)
    assert refs == {"pytorch/pytorch": "v2.12.0", "pytorch/tutorials": "abc123"}
    with pytest.raises(UserError, match="not a declared repository"):
        parse_ref_args(["pytorch/vision=main"], declaration)
    with pytest.raises(UserError, match="given twice"):
        parse_ref_args(["v1", "pytorch/pytorch=v2"], declaration)


# --- --from-dir ---------------------------------------------------------------------------------


def make_snapshot(folder: Path) -> Path:
    """A snapshot in the shared layout: files plus a manifest that lists all but pytorch/LICENSE."""
    tutorial = "intermediate_source/FSDP_tutorial.rst"
    files = {
        ("pytorch", "docs/source/fsdp.md", "pytorch/pytorch", "c" * 40, None): BODIES[FSDP_MD],
        ("pytorch", "LICENSE", "pytorch/pytorch", None, None): BODIES[LICENSE],
        ("pytorch-tutorials", tutorial, "pytorch/tutorials", None, "located by content"): BODIES[TUTORIAL],
    }
    manifests: dict[str, list[dict]] = {"pytorch": [], "pytorch-tutorials": []}
    for (repo_dir, path, repo, commit, note), data in files.items():
        (folder / repo_dir / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / repo_dir / path).write_bytes(data)
        if path != "LICENSE":
            row = {"path": path, "repo": repo, "commit": commit, "chars": len(data.decode()), "sha256": sha(data)}
            manifests[repo_dir].append(row | ({"note": note} if note else {}))
    for repo_dir, rows in manifests.items():
        (folder / repo_dir / "MANIFEST.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    (folder / "README.md").write_text("# snapshot\n", encoding="utf-8")
    return folder


def test_seeding_from_a_snapshot_copies_files_and_keeps_its_commits_and_notes(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = make_snapshot(tmp_path / "snapshot")
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(root))
    assert main(["fetch", "--from-dir", str(snapshot)]) == 0
    assert "3 files from pytorch/pytorch@snapshot, pytorch/tutorials@snapshot" in capsys.readouterr().out
    page = manifest(root, "pytorch")["docs/source/fsdp.md"]
    assert page["ref"] == "snapshot" and page["commit"] == "c" * 40
    assert page["url"] == f"{RAW}/pytorch/pytorch/{'c' * 40}/docs/source/fsdp.md"
    tutorial = manifest(root, "pytorch-tutorials")["intermediate_source/FSDP_tutorial.rst"]
    assert tutorial["note"] == "located by content" and tutorial["commit"] is None
    assert "Not listed in the snapshot" in manifest(root, "pytorch")["LICENSE"]["note"]
    assert (root / "upstream/README.md").read_text(encoding="utf-8") == "# snapshot\n"
    first = snapshot_of(root / "upstream")
    seed_from_dir(root, snapshot)
    assert snapshot_of(root / "upstream") == first  # reseeding is byte-for-byte identical


def test_a_snapshot_file_that_does_not_match_its_sha256_is_reported_and_nothing_is_written(
    root: Path, tmp_path: Path
) -> None:
    snapshot = make_snapshot(tmp_path / "snapshot")
    seed_from_dir(root, snapshot)
    before = snapshot_of(root / "upstream")
    (snapshot / "pytorch/docs/source/fsdp.md").write_bytes(b"# tampered\n")
    with pytest.raises(UserError, match=r"fsdp\.md: sha256 .* does not match .*MANIFEST\.json"):
        seed_from_dir(root, snapshot)
    assert snapshot_of(root / "upstream") == before


def test_a_snapshot_missing_a_declared_file_or_folder_is_one_clear_error(root: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such folder"):
        seed_from_dir(root, tmp_path / "nowhere")
    snapshot = make_snapshot(tmp_path / "snapshot")
    (snapshot / "pytorch-tutorials/intermediate_source/FSDP_tutorial.rst").unlink()
    with pytest.raises(UserError, match=r"FSDP_tutorial\.rst is missing: the snapshot must hold every file"):
        seed_from_dir(root, snapshot)
    assert not (root / "upstream").exists()


def test_seeding_with_ref_records_that_ref_for_the_repository_it_names(root: Path, tmp_path: Path) -> None:
    snapshot = make_snapshot(tmp_path / "snapshot")
    seed_from_dir(root, snapshot, {"pytorch/tutorials": "main"})
    tutorial = manifest(root, "pytorch-tutorials")["intermediate_source/FSDP_tutorial.rst"]
    assert tutorial["ref"] == "main" and tutorial["url"] == TUTORIAL
    assert manifest(root, "pytorch")["docs/source/fsdp.md"]["ref"] == "snapshot"


def _within(seconds: float, call: Callable[[], object]) -> object:
    """`call()` in a daemon thread, failing the test if it has not returned within `seconds` (a FIFO read
    blocks forever)."""
    import threading

    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test below
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still blocked after {seconds} s"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


def test_a_fifo_or_folder_in_a_snapshot_or_the_cache_is_one_line_error_not_a_hang(root: Path, tmp_path: Path) -> None:
    import os

    snapshot = make_snapshot(tmp_path / "snapshot")
    page = snapshot / "pytorch/docs/source/fsdp.md"
    page.unlink()
    os.mkfifo(page)
    with pytest.raises(UserError, match=r"fsdp\.md is a FIFO \(named pipe\), not a regular file"):
        _within(10, lambda: seed_from_dir(root, snapshot))
    page.unlink()
    page.mkdir()
    with pytest.raises(UserError, match=r"fsdp\.md is a folder, not a regular file"):
        seed_from_dir(root, snapshot)
    # The cache: what `regenerate --check` reads.
    seed_from_dir(root, make_snapshot(tmp_path / "good"))
    cached = root / "upstream/pytorch/docs/source/fsdp.md"
    cached.unlink()
    os.mkfifo(cached)
    source = next(s for s in load_declaration(root).sources if s.path == "docs/source/fsdp.md")
    with pytest.raises(UserError, match="FIFO"):
        _within(10, lambda: read_cached(root, source))


def test_a_deeply_nested_snapshot_manifest_is_one_line_error(root: Path, tmp_path: Path) -> None:
    snapshot = make_snapshot(tmp_path / "snapshot")
    (snapshot / "pytorch/MANIFEST.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(UserError, match=r"MANIFEST\.json is not a valid (snapshot )?manifest"):
        seed_from_dir(root, snapshot)


def test_fetch_from_dir_says_which_files_changed(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(root))
    snapshot = make_snapshot(tmp_path / "snapshot")
    assert main(["fetch", "--from-dir", str(snapshot)]) == 0
    assert "3 changed, 0 removed" in capsys.readouterr().out  # a first seed: everything is new
    assert main(["fetch", "--from-dir", str(snapshot)]) == 0
    assert "every file is identical to the cached copy" in capsys.readouterr().out
    (snapshot / "pytorch/LICENSE").write_bytes(b"a new licence\n")  # not in the snapshot's manifest
    assert main(["fetch", "--from-dir", str(snapshot)]) == 0
    out = capsys.readouterr().out
    assert "changed: upstream/pytorch/LICENSE" in out and "1 changed, 0 removed, 2 identical" in out
    assert "fsdp-skill regenerate" in out

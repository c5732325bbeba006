"""The wheel a user installs: it carries the skill's data, and works with no checkout anywhere on sys.path.

The sdist is built once per session from this tree, and the wheel from that sdist (`python -m build
--no-isolation`, offline: the build backend comes from the dev extra), so the wheel's data proves the sdist
carries it too. The wheel is installed with `pip install --no-deps` into a fresh venv whose only
link to the project venv is a .pth file naming that venv's site-packages (for mcp, pydantic, ...). Python
does not process .pth files inside a folder added that way, so the editable install's .pth (the checkout's
server/) stays out: each run asserts that `fsdp_skill` imports from the fresh venv and serves its own data.
"""

from __future__ import annotations

import ast
import email
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters

from fsdp_skill import __version__
from fsdp_skill.cli.skill_install import skill_files
from fsdp_skill.cli.validate import split_frontmatter
from fsdp_skill.core.paths import SKILL_ITEMS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project supports 3.10 through tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DATA = "fsdp_skill/_data/"


def _missing_build_tools() -> str | None:
    for module, why in (("build", "the `build` frontend"), ("hatchling", "the hatchling build backend")):
        try:
            __import__(module)
        except ImportError:
            return f"{why} is not installed: `pip install -e '.[dev]'` (package {module}) to build and test the wheel"
    return None


needs_build = pytest.mark.skipif(_missing_build_tools() is not None, reason=_missing_build_tools() or "")


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, and the wheel built from it (what `python -m build` does by default)."""
    out = tmp_path_factory.mktemp("dist")
    before = sorted(p.name for p in ROOT.iterdir())
    result = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert sorted(p.name for p in ROOT.iterdir()) == before  # no build/, dist/ or *.egg-info left in the checkout
    return out


@pytest.fixture(scope="session")
def wheel(dist: Path) -> Path:
    (built,) = dist.glob("*.whl")
    return built


@pytest.fixture(scope="session")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the wheel installed (no deps); returns its bin/ folder."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, with_pip=False, symlinks=True)
    python = env_dir / "bin" / "python"
    result = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                             "--no-index", "--quiet", str(wheel)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, timeout=60, env=_clean_env(), check=True).stdout.strip()
    (Path(purelib) / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return env_dir / "bin"


def _clean_env() -> dict[str, str]:
    """This process's environment minus whatever could point a child back at the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FSDP_SKILL_ROOT", "PYTHONHOME")}


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    folder = tmp_path / "unrelated"
    folder.mkdir()
    return folder


def run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir / "fsdp-skill"), *args], capture_output=True, text=True, cwd=cwd,
                          env=_clean_env(), stdin=subprocess.DEVNULL, timeout=180, check=False)


def _data_snapshot(bin_dir: Path) -> dict[str, tuple[int, int]]:
    code = "import fsdp_skill, pathlib; print(pathlib.Path(fsdp_skill.__file__).parent / '_data')"
    data = Path(subprocess.run([str(bin_dir / "python"), "-c", code], capture_output=True, text=True, timeout=60,
                               env=_clean_env(), check=True).stdout.strip())
    return {str(p.relative_to(data)): (p.stat().st_size, p.stat().st_mtime_ns) for p in data.rglob("*")}


# ------------------------------------------------------------------------------------- without a build


def test_skill_md_skill_version_is_the_package_version() -> None:
    parts = split_frontmatter((ROOT / "SKILL.md").read_text(encoding="utf-8"))
    assert parts is not None
    assert yaml.safe_load(parts[0])["metadata"]["skill-version"] == __version__
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["hatch"]["version"]["path"] == "server/fsdp_skill/__init__.py"


def test_every_skill_item_is_in_the_wheel_selection_and_exists() -> None:
    wheel_config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["hatch"]["build"][
        "targets"
    ]["wheel"]
    hook = ast.parse((ROOT / "hatch_build.py").read_text(encoding="utf-8"))
    (top_level,) = [ast.literal_eval(node.value) for node in hook.body
                    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "TOP_LEVEL_FILES"]
    selected = set(wheel_config["only-include"]) | set(top_level)
    assert set(SKILL_ITEMS) <= selected
    assert all((ROOT / item).exists() for item in SKILL_ITEMS)


# ---------------------------------------------------------------------------------------- the wheel


@needs_build
def test_wheel_carries_every_skill_file_under_the_package_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    data = {n.removeprefix(DATA) for n in names if n.startswith(DATA)}
    assert data == set(skill_files(ROOT))  # whole folders: files others add under references/ or assets/ ship too
    assert {"SKILL.md", "references/catalog.json", "references/index.sqlite", "LICENSE"} <= data
    dist_info = f"pytorch_fsdp_skill-{__version__}.dist-info/"
    outside = [n for n in names if not n.startswith(("fsdp_skill/", dist_info))]
    assert outside == []
    assert {f"{dist_info}licenses/LICENSE", f"{dist_info}licenses/upstream/pytorch/LICENSE",
            f"{dist_info}licenses/upstream/pytorch-tutorials/LICENSE"} <= set(names)
    assert not [n for n in names if "__pycache__" in n or "/." in n]


@needs_build
def test_sdist_holds_the_repository_the_wheel_is_built_from(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.partition("/")[2] for name in archive.getnames()}
    assert {"pyproject.toml", "hatch_build.py", "LICENSE", "README.md", "SKILL.md", "references/catalog.json",
            "references/index.sqlite", "scripts/verify_examples.py", "server/fsdp_skill/__init__.py",
            "upstream/pytorch/LICENSE", "upstream/pytorch-tutorials/LICENSE"} <= names
    assert {f"assets/{p.relative_to(ROOT / 'assets').as_posix()}" for p in (ROOT / "assets").rglob("*.py")} <= names
    assert not [n for n in names if n.startswith(".ci/") or "__pycache__" in n]


@needs_build
def test_wheel_metadata_has_the_skill_version_licence_classifiers_and_urls(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        meta = email.message_from_bytes(archive.read(f"pytorch_fsdp_skill-{__version__}.dist-info/METADATA"))
        entry_points = archive.read(f"pytorch_fsdp_skill-{__version__}.dist-info/entry_points.txt").decode()
    assert meta["Version"] == __version__
    assert meta["License-Expression"] == "BSD-3-Clause"
    assert "upstream/pytorch/LICENSE" in meta.get_all("License-File")
    assert "Programming Language :: Python :: 3.11" in meta.get_all("Classifier")
    assert len(meta.get_all("Project-URL")) >= 3
    assert "fsdp-skill = fsdp_skill.cli:main" in entry_points


@needs_build
def test_installed_wheel_imports_from_the_fresh_venv_and_reads_the_package_data(
    installed: Path, elsewhere: Path
) -> None:
    code = (
        "import fsdp_skill; from fsdp_skill.core.paths import locate; "
        "print(fsdp_skill.__file__); print(locate().origin)"
    )
    result = subprocess.run([str(installed / "python"), "-c", code], capture_output=True, text=True, cwd=elsewhere,
                            env=_clean_env(), timeout=60, check=False)
    where, origin = result.stdout.split()
    assert Path(where).is_relative_to(installed.parent) and not Path(where).is_relative_to(ROOT)
    assert origin == "package"
    version = run(installed, "--version", cwd=elsewhere)
    assert version.returncode == 0 and f"fsdp-skill {__version__}" in version.stdout
    assert "(installed package data)" in version.stdout
    as_module = subprocess.run([str(installed / "python"), "-m", "fsdp_skill", "--version"], capture_output=True,
                               text=True, cwd=elsewhere, env=_clean_env(), timeout=60, check=False)
    assert as_module.stdout == version.stdout


@needs_build
def test_installed_wheel_answers_search_and_show_from_an_unrelated_folder(installed: Path, elsewhere: Path) -> None:
    before = _data_snapshot(installed)
    search = run(installed, "search", "all_reduce", "--json", cwd=elsewhere)
    assert search.returncode == 0, search.stderr
    assert json.loads(search.stdout)["results"][0]["id"] == "torch.distributed.all_reduce"
    assert search.stderr == ""  # the committed index is current: no rebuild warning
    table = run(installed, "search", "fully_shard mixed precision", cwd=elsewhere)
    assert table.returncode == 0 and "MixedPrecisionPolicy" in table.stdout
    show = run(installed, "show", "fully_shard", cwd=elsewhere)
    assert show.returncode == 0 and "torch.distributed.fsdp.fully_shard" in show.stdout, show.stderr
    assert _data_snapshot(installed) == before  # an installed package never writes next to its data


@needs_build
def test_installed_wheel_serves_an_mcp_stdio_session(installed: Path, elsewhere: Path) -> None:
    params = StdioServerParameters(command=str(installed / "fsdp-skill"), args=["serve"], env=_clean_env(),
                                   cwd=str(elsewhere))

    async def session() -> None:
        with anyio.fail_after(120):
            async with Client(params) as client:
                found = await client.call_tool("search_docs", {"query": "fully_shard", "limit": 3})
                assert not found.is_error and found.structured_content["results"]
                api = await client.call_tool("get_api", {"symbol": "fully_shard"})
                assert api.structured_content["qualified_name"] == "torch.distributed.fsdp.fully_shard"
                page = await client.call_tool("read_reference", {"name": "fsdp2", "max_chars": 2000})
                assert not page.is_error and page.structured_content["text"].startswith("#")
                pattern = await client.call_tool("get_pattern", {"name": "fsdp2-training"})
                assert "fully_shard" in pattern.structured_content["source"]
                skill = await client.read_resource("fsdp-skill://SKILL.md")
                assert "name: pytorch-fsdp" in skill.contents[0].text

    anyio.run(session)


@needs_build
@pytest.mark.parametrize(
    ("args", "what"),
    [(["regenerate"], "regenerate rebuilds references/"), (["fetch"], "fetch rewrites the upstream/ cache"),
     (["verify", "--write-report"], "--write-report rewrites references/verification")],
)
def test_installed_wheel_refuses_to_write_next_to_its_data_in_one_line(
    installed: Path, elsewhere: Path, args: list[str], what: str
) -> None:
    result = run(installed, *args, cwd=elsewhere)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert what in result.stderr and "needs a checkout" in result.stderr and "FSDP_SKILL_ROOT" in result.stderr


@needs_build
def test_skill_install_from_the_wheel_writes_a_folder_that_validates(installed: Path, tmp_path: Path) -> None:
    target = tmp_path / "skills" / "pytorch-fsdp"
    result = run(installed, "skill", "install", "--dir", str(tmp_path / "skills"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "(installed package data)" in result.stdout
    assert set(skill_files(target)) == set(skill_files(ROOT))
    check = run(installed, "validate", str(target), cwd=tmp_path)
    assert check.returncode == 0, check.stdout
    assert "no problems" in check.stdout and " 0 relative links" not in check.stdout

"""`fsdp-skill skill install`: write the Agent Skill folder (SKILL.md, references/, assets/, scripts/) for an agent.

The files come from wherever this fsdp-skill reads its data (core/paths.py: $FSDP_SKILL_ROOT, the checkout,
or the data installed with the package), so `pipx install` / `uvx` users get the skill without a clone.

The folder is built next to the target under a temporary name, checked with the same validator as
`fsdp-skill validate`, and swapped in by renames: an interrupted install leaves either the old folder or
the new one, never a mix (its temporary folder is removed by the next run). An existing folder is
replaced only when it is this skill: a different version, or local edits to the same version, need
--force; a folder that is not a pytorch-fsdp skill, or holds more than one (a clone), is never replaced.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from fsdp_skill import __version__
from fsdp_skill.cli.validate import SKILL_FILE, SKILL_NAME, split_frontmatter, validate
from fsdp_skill.core.atomic import replace_dir
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import SKILL_ITEMS, DataMissing, locate, rebuild_hint

# Claude Code's personal skills folder; `--dir` names another agent's, `--target` the skill folder itself.
DEFAULT_SKILLS_DIR = Path("~/.claude/skills")


@dataclass(frozen=True)
class SkillInfo:
    name: str | None
    version: str | None
    torch_version: str | None


@dataclass(frozen=True)
class Installed:
    target: Path
    version: str
    files: int
    bytes: int
    replaced: str | None  # the version that was there before, when one was


def read_skill_info(folder: Path) -> SkillInfo | None:
    """Name and versions from `folder`/SKILL.md's frontmatter; None when there is no readable SKILL.md."""
    try:
        parts = split_frontmatter((folder / SKILL_FILE).read_text(encoding="utf-8"))
        data = yaml.safe_load(parts[0]) if parts else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(data, dict):
        return None
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}

    def text(value: object) -> str | None:
        return str(value) if value is not None else None

    return SkillInfo(text(data.get("name")), text(metadata.get("skill-version")), text(metadata.get("torch-version")))


def _skipped(relative: Path) -> bool:
    """What never belongs in a skill folder even when a checkout has it lying around (as for the wheel):
    dot files (a killed run's temp files) and bytecode caches."""
    return relative.suffix == ".pyc" or any(part.startswith(".") or part == "__pycache__" for part in relative.parts)


def skill_files(folder: Path) -> dict[str, Path]:
    """Every file a skill folder holds (SKILL_ITEMS, recursively, minus dot files and caches), by relative path."""
    found: dict[str, Path] = {}
    for item in SKILL_ITEMS:
        path = folder / item
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in candidates:
            relative = file.relative_to(folder)
            if not _skipped(relative):
                found[relative.as_posix()] = file
    return found


def _differences(source: dict[str, Path], target: Path) -> list[str]:
    """Relative paths whose content differs between the files to install and the folder `target`."""
    installed = set(skill_files(target))
    changed = [rel for rel, path in source.items() if rel not in installed
               or not filecmp.cmp(path, target / rel, shallow=False)]
    return sorted(changed + sorted(installed - set(source)))


def _check_source(source: Path) -> SkillInfo:
    missing = [item for item in ("SKILL.md", "references/catalog.json", "assets/patterns", "scripts")
               if not (source / item).exists()]
    info = read_skill_info(source)
    if missing or info is None or info.name != SKILL_NAME:
        what = ", ".join(missing) if missing else "a SKILL.md naming the pytorch-fsdp skill"
        raise DataMissing(f"{source} lacks {what}, so there is no skill to install: {rebuild_hint(source)}")
    return info


def _already_installed(target: Path, source: Path, info: SkillInfo, files: dict[str, Path], force: bool) -> bool:
    """True when `target` holds exactly these files; False when it may be written; raises when it must not be."""
    inside_data = any(target.is_relative_to(source / item.split("/")[0]) for item in SKILL_ITEMS)
    if target == source or source.is_relative_to(target) or inside_data:
        raise UserError(f"{target} overlaps the skill data it would be copied from ({source}): pick another --dir")
    if target.exists() and not target.is_dir():
        raise UserError(f"{target} exists and is not a folder: pick another --dir")
    if not target.exists() or not any(target.iterdir()):
        return False
    there = read_skill_info(target)
    if there is None or there.name != SKILL_NAME:
        raise UserError(
            f"{target} is not empty and holds no {SKILL_NAME} skill (no SKILL.md named {SKILL_NAME}): it is never "
            "replaced, even with --force; pick another --dir or empty that folder yourself"
        )
    ours = {item.split("/")[0] for item in SKILL_ITEMS}
    foreign = sorted(p.name for p in target.iterdir() if p.name not in ours)
    if foreign:
        raise UserError(
            f"{target} holds the {SKILL_NAME} skill and other files too ({', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}), e.g. a git clone: it is never replaced, even with --force; "
            "update a clone with git, or pick another --dir"
        )
    changed = _differences(files, target)
    if there.version == info.version and not changed:
        return True
    if not force:
        if there.version != info.version:
            raise UserError(f"{target} holds the {SKILL_NAME} skill version {there.version or '(unknown)'}; this is "
                            f"version {info.version}: pass --force to replace it")
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        raise UserError(f"{target} holds version {info.version} of the skill but {len(changed)} file(s) differ from "
                        f"this install ({shown}), e.g. local edits: pass --force to replace them")
    return False


def _remove_debris(target: Path) -> None:
    """Temporary folders an interrupted install left next to the target (`.<name>.new-*`, `.<name>.old-*`)."""
    if target.parent.is_dir():
        for pattern in (f".{target.name}.new-*", f".{target.name}.old-*"):
            for leftover in target.parent.glob(pattern):
                shutil.rmtree(leftover, ignore_errors=True)


def install_skill(target: Path, force: bool = False, source: Path | None = None) -> Installed | None:
    """Write the skill folder at `target` from `source` (default: where the data is read from).

    Returns None when `target` already holds exactly these files (nothing written). A folder that cannot be
    written (read-only, under a file, a name too long, a dangling link) is a UserError naming it: each of
    these was a traceback."""
    try:
        return _install_skill(target, force, source)
    except OSError as exc:
        raise _install_error(target, exc) from None


def _install_error(target: Path, exc: OSError) -> UserError:
    def clipped(path: object) -> str:
        text = str(path)
        return text if len(text) <= 200 else text[:100] + "…" + text[-100:]

    where = clipped(exc.filename or target)
    if isinstance(exc, FileExistsError | NotADirectoryError):
        problem = f"{where} is a file (or a broken link) where a folder must be"
    else:
        problem = f"{exc.strerror or exc} ({where})"
    return UserError(f"cannot install the skill at {clipped(target)}: {problem}: pick a writable --dir or "
                     "--target (the default is under $HOME)")


def _install_skill(target: Path, force: bool, source: Path | None) -> Installed | None:
    source = (source or locate().path).resolve()
    target = target.expanduser().absolute()
    if target.is_symlink() and not target.exists():
        raise UserError(f"{target} is a symbolic link to {os.readlink(target)}, which does not exist: "
                        "remove the link, or pick another --dir or --target")
    info = _check_source(source)
    files = skill_files(source)
    if _already_installed(target, source, info, files, force):
        return None
    previous = read_skill_info(target) if target.is_dir() else None
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_debris(target)
    staged = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    try:
        for relative, path in files.items():
            destination = staged / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination)
        problems = validate(staged).problems
        if problems:
            listed = "; ".join(str(p) for p in problems[:3])
            raise UserError(f"the skill data in {source} does not validate ({len(problems)} problem(s): {listed}): "
                            f"nothing installed; run `fsdp-skill validate {source}`")
        staged.chmod(0o755)  # mkdtemp makes it 0700; a skill folder is as readable as any other
        replace_dir(staged, target)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return Installed(target, info.version or __version__, len(files), sum(p.stat().st_size for p in files.values()),
                     previous.version if previous else None)


def install_target(skills_dir: str | None, target: str | None, stray: str | None = None) -> Path:
    """The skill folder for `skill install --dir DIR` (DIR/pytorch-fsdp) or `--target FOLDER` (FOLDER itself)."""
    if stray is not None:
        raise UserError(f"a bare folder ({stray}) is ambiguous: pass --dir {stray} to install into "
                        f"{stray}/{SKILL_NAME} (an agent's skills folder), or --target {stray} for that exact folder")
    if target is not None:
        return Path(target)
    folder = Path(skills_dir) if skills_dir is not None else DEFAULT_SKILLS_DIR
    if (folder.expanduser() / SKILL_FILE).is_file() or folder.name == SKILL_NAME:
        # `--dir ~/.claude/skills/pytorch-fsdp`: the old meaning of --dir; nesting pytorch-fsdp/pytorch-fsdp is no use.
        raise UserError(f"--dir is the skills folder the skill goes into ({folder}/{SKILL_NAME}), and {folder} is "
                        f"{'a skill folder itself' if folder.name != SKILL_NAME else 'named after the skill'}: "
                        f"pass --dir {folder.parent}, or --target {folder} to write exactly there")
    return folder / SKILL_NAME


def cli_skill_install(args: argparse.Namespace) -> int:
    try:
        target = install_target(args.dir, args.target, args.stray)
    except OSError as exc:  # e.g. a name too long to look at
        raise _install_error(Path(args.target or args.dir or DEFAULT_SKILLS_DIR), exc) from None
    data = locate()
    result = install_skill(target, force=args.force, source=data.path)
    if result is None:
        print(f"{target.expanduser().absolute()} already holds this version of the {SKILL_NAME} skill; nothing to do")
        return 0
    replaced = f", replacing version {result.replaced}" if result.replaced else ""
    print(f"installed the {SKILL_NAME} skill {result.version} into {result.target}: {result.files} files, "
          f"{result.bytes / 1e6:.1f} MB, from {data.describe()}{replaced}")
    if result.target.name != SKILL_NAME:
        print(f"note: the Agent Skills spec wants the folder named after the skill ({SKILL_NAME}), "
              f"this one is {result.target.name!r}")
    return 0

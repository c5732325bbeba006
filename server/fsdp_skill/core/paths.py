"""Where the skill's data (SKILL.md, references/, assets/, scripts/) is read from, and where it may be written.

Three places, tried in this order:
1. `FSDP_SKILL_ROOT`, when set: any folder with the skill's layout (a checkout, or a folder written by
   `fsdp-skill skill install`). Set but not a folder is an error, never a silent fallback.
2. The checkout this code runs from: `server/fsdp_skill/` under a folder holding SKILL.md (running from
   source, or `pip install -e .`).
3. The data installed with the package: `fsdp_skill/_data/`, which the wheel build maps from the
   repository root (pyproject.toml); the source tree never holds a copy.

Installed data is read-only: commands that write next to the data (regenerate, fetch, `verify
--write-report`) call `writable_root`, which refuses with one line saying they need a checkout.

Stdlib only: the example runner (`fsdp_skill.verify`, stdlib + torch) resolves its catalog here too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fsdp_skill.core.errors import UserError

ENV_VAR = "FSDP_SKILL_ROOT"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
PACKAGE_DATA = PACKAGE_DIR / "_data"
# What a skill folder holds, relative to its root: written by `fsdp-skill skill install`, packaged into
# fsdp_skill/_data/ by the wheel build (pyproject.toml), and checked against the built wheel by a test.
SKILL_ITEMS = ("SKILL.md", "references", "assets", "scripts", "LICENSE",
               "upstream/pytorch/LICENSE", "upstream/pytorch-tutorials/LICENSE")
# Where to get a checkout, named in the messages below.
CHECKOUT_HINT = "a pytorch-fsdp git checkout"

Origin = Literal["env", "checkout", "package"]


class DataMissing(UserError):
    """No usable skill data: the message says what to install or where to point FSDP_SKILL_ROOT."""


class CheckoutRequired(UserError):
    """A command that writes next to the data was run against the installed (read-only) package data."""


@dataclass(frozen=True)
class DataRoot:
    path: Path
    origin: Origin

    def describe(self) -> str:
        where = {"env": f"${ENV_VAR}", "checkout": "checkout", "package": "installed package data"}[self.origin]
        return f"{self.path} ({where})"


def checkout_root() -> Path | None:
    """The repository root when this code runs from a checkout (server/fsdp_skill/ under a folder with SKILL.md)."""
    server = PACKAGE_DIR.parent
    root = server.parent
    return root if server.name == "server" and (root / "SKILL.md").is_file() else None


def locate() -> DataRoot:
    """The folder the skill's data is read from (see the module docstring for the order)."""
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env).expanduser().resolve()
        if not path.is_dir():
            raise DataMissing(
                f"{ENV_VAR}={_quote(env)} is not a folder: point it at {CHECKOUT_HINT} or at a folder written by "
                f"`fsdp-skill skill install`, or unset it to use the data installed with the package"
            )
        # The installed data stays read-only even when named explicitly (the MCP server's runner does that).
        return DataRoot(path, "package" if path == PACKAGE_DATA else "env")
    checkout = checkout_root()
    if checkout is not None:
        return DataRoot(checkout, "checkout")
    if (PACKAGE_DATA / "SKILL.md").is_file():
        return DataRoot(PACKAGE_DATA, "package")
    raise DataMissing(
        f"no skill data: {PACKAGE_DIR} has no _data/ folder and is not inside a checkout. Reinstall from a wheel "
        f"built from the repository (`pip install /path/to/pytorch-fsdp` or `uvx --from /path/to/pytorch-fsdp "
        f"fsdp-skill ...`), or set {ENV_VAR} to {CHECKOUT_HINT}"
    )

__all__ = ["catalog_path", "index_path", "patterns_dir", "references_dir", "repo_root", "upstream_dir"]


def repo_root() -> Path:
    """The folder the skill's data is read from: $FSDP_SKILL_ROOT, the checkout, or the installed package data."""
    return locate().path


def writable_root(what: str) -> Path:
    """The data folder for a command that writes into it (or needs more than a wheel carries, like upstream/).

    `what` says what the command does there ("fetch rewrites the upstream/ cache"). Installed package data
    is never modified: there, this raises CheckoutRequired, one line naming the way out.
    """
    found = locate()
    if found.origin == "package":
        raise CheckoutRequired(
            f"{what}, so it needs a checkout, and the data here is the read-only copy installed with the package "
            f"({found.path}): run it in {CHECKOUT_HINT}, or set {ENV_VAR} to one"
        )
    return found.path


def rebuild_hint(root: Path) -> str:
    """What a user should do when the data under `root` is missing or stale, depending on where it came from."""
    root = root.resolve()
    if root == PACKAGE_DATA:
        return (f"the installed package is incomplete: reinstall it from a wheel built from the repository, "
                f"or set {ENV_VAR} to {CHECKOUT_HINT}")
    if root == checkout_root():
        return "run `fsdp-skill regenerate` in this checkout"
    return (f"point {ENV_VAR} at a folder holding the skill's references/ (a checkout, or `fsdp-skill skill install` "
            f"output), or run `fsdp-skill regenerate` if {root} is a checkout")


def _quote(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def references_dir(root: Path | None = None) -> Path:
    return (root or repo_root()) / "references"


def catalog_path(root: Path | None = None) -> Path:
    return references_dir(root) / "catalog.json"


def index_path(root: Path | None = None) -> Path:
    return references_dir(root) / "index.sqlite"


def upstream_dir(root: Path | None = None) -> Path:
    return (root or repo_root()) / "upstream"


def patterns_dir(root: Path | None = None) -> Path:
    return (root or repo_root()) / "assets" / "patterns"

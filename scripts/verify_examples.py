#!/usr/bin/env python3
"""Run the documented torch.distributed / FSDP examples across ranks, from a plain clone.

Runs the `>>>` docstring examples and the code blocks of the reference pages (programs as the page
launches them, rank functions through the page's own launcher template; the rest statically checked
against the installed torch), then the patterns.

From a clone it imports the runner from ../server. From a skill folder written by `fsdp-skill skill install`
(no server/ there) it uses the installed `fsdp_skill` package and verifies that folder's own catalog.
Needs only torch (numpy too for the object-collective examples; they are skipped with that reason
without it; rich, if installed, draws a nicer table). Examples:

    python scripts/verify_examples.py                      # every example, gloo, each at its world size
    python scripts/verify_examples.py -k all_reduce --json out.json
    python scripts/verify_examples.py -k getting-started.md#   # one page's code blocks
    python scripts/verify_examples.py --backend nccl       # on a machine with one GPU per rank
    python scripts/verify_examples.py --only-claims        # the claim checks of assets/checks/ (SKILL.md's statements)
    torchrun --nproc-per-node 2 scripts/verify_examples.py --world-size 2   # as launcher-started ranks

Exit status: 0 when nothing failed, 1 when an example failed, 2 for bad input.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

SKILL_ROOT = Path(__file__).resolve().parents[1]
if (SKILL_ROOT / "server" / "fsdp_skill").is_dir():
    sys.path.insert(0, str(SKILL_ROOT / "server"))
elif importlib.util.find_spec("fsdp_skill") is None:
    sys.exit(f"verify_examples.py: error: the runner (package fsdp_skill) is neither in ../server nor installed in "
             f"{sys.executable}: run this from a pytorch-fsdp checkout, or install the package into this Python "
             f"(`{Path(sys.executable).name} -m pip install /path/to/pytorch-fsdp`, or its wheel)")
else:  # an installed skill folder: verify the catalog next to this script, not the package's copy
    os.environ.setdefault("FSDP_SKILL_ROOT", str(SKILL_ROOT))

if importlib.util.find_spec("torch") is None:
    sys.exit("verify_examples.py: error: torch is not installed; `pip install torch` (CPU build is enough for gloo)")

from fsdp_skill.verify.cli import main  # noqa: E402 - needs the sys.path entry above

# Only in the process the user started: the runner's ranks are spawned processes that import this file
# again (as __mp_main__), and under torchrun every rank runs it; each would repeat the note.
if __name__ == "__main__":
    if importlib.util.find_spec("numpy") is None and os.environ.get("RANK", "0") == "0":
        print("verify_examples.py: note: numpy is not installed, so the object-collective examples "
              "(all_gather_object, broadcast_object_list, ...) are skipped; `pip install numpy` to run them",
              file=sys.stderr)
    sys.exit(main(prog="verify_examples.py"))

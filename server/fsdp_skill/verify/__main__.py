"""`python -m fsdp_skill.verify`: the same flags as `fsdp-skill verify` (the MCP server runs it this way)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m fsdp_skill.verify"))

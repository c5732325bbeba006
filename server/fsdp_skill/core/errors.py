"""The package's errors: one root, `FsdpSkillError`, so a caller can catch everything this package raises on purpose.

Every message is one line that names the problem and what to do; the CLI prints it as
`fsdp-skill CMD: error: MESSAGE` and exits with `exit_code`, the MCP server turns it into a ToolError
the model reads. Stdlib only: the example runner (`fsdp_skill.verify`) raises these too.
"""

from __future__ import annotations

__all__ = ["FsdpSkillError", "NetworkError", "UserError"]


class FsdpSkillError(Exception):
    """Root of the errors this package raises on purpose (anything else is a bug)."""

    exit_code = 1


class UserError(FsdpSkillError):
    """Bad input or missing prerequisite; the message names the problem and what to do."""

    exit_code = 2


class NetworkError(UserError):
    """A download failed (no network, HTTP error, timeout); the cache was left untouched."""

    exit_code = 3

"""Errors a user can act on. The CLI prints them as one line; the MCP server turns them into ToolErrors."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or missing prerequisite; the message names the problem and what to do."""

    exit_code = 2


class NetworkError(UserError):
    """A download failed (no network, HTTP error, timeout); the cache was left untouched."""

    exit_code = 3

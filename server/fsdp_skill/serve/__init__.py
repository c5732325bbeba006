"""serve: the MCP server — tool logic as pure functions (`tools`), their result models (`results`),
verification lookups, prompts, and the thin MCP wiring (`server`) over them.

Imports: `search` and `core`; never torch (cold start matters to agents).
"""

# The public face: the modules other stages may import (tests/test_layers.py holds them to it).
__all__ = ["history", "results", "server", "tools"]

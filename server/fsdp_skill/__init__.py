"""pytorch-fsdp: an Agent Skill and offline MCP docs server for PyTorch FSDP and torch.distributed.

Public API (the rest of the modules are implementation detail):
- catalog models and load/save: `fsdp_skill.core.catalog`
- search: `fsdp_skill.search.index`
- the MCP server: `fsdp_skill.serve.server.build_server`
- the example runner: `fsdp_skill.verify` (stdlib + torch only)
"""

__all__ = ["__version__"]

__version__ = "0.1.0"

"""Build hook: put the skill's top-level files (SKILL.md, LICENSE) into the wheel under fsdp_skill/_data/.

The folders (references/, assets/, scripts/, the upstream licences) are mapped by `sources` in
pyproject.toml, which rewrites folder prefixes only. The two files are added here rather than with a
static `force-include`, because hatchling copies force-included files into editable installs too,
where they would be a stale second copy: `pip install -e .` serves everything from the checkout.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.config import BuilderConfig
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

DATA = "fsdp_skill/_data"
TOP_LEVEL_FILES = ("SKILL.md", "LICENSE")


class SkillDataHook(BuildHookInterface[BuilderConfig]):
    PLUGIN_NAME = "skill-data"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        for name in TOP_LEVEL_FILES:
            build_data["force_include"][name] = f"{DATA}/{name}"

"""`python -m fsdp_skill`: the same as the `fsdp-skill` command."""

import sys

from fsdp_skill.cli import main

sys.exit(main())

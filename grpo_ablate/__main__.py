"""`python -m grpo_ablate ...` is the same as the `grpo-ablate` command."""

import sys

from grpo_ablate.commands.cli import main

sys.exit(main())

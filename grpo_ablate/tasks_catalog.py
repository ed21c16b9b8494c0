"""Names of the built-in tasks and rewards, for validation without building anything.

The registries live in the trainer core; this module only reads their names, so `validate`
and `plan` can check a study without loading a model.
"""

from __future__ import annotations

__all__ = ["builtin_task_names", "builtin_reward_names"]


def builtin_task_names() -> list[str]:
    from grpo_ablate.trainer.tasks import TASKS

    return sorted(TASKS)


def builtin_reward_names() -> list[str]:
    from grpo_ablate.trainer.rewards import BUILTIN_REWARDS

    return sorted(BUILTIN_REWARDS)

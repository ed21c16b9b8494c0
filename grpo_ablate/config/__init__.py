"""The study file: its schema, loading, and validation that reports every problem at once.

    grpo-ablate validate studies/tiny-cpu.yaml

A study file has the sections study, model, data, rewards, trainer (GRPOConfig keywords
verbatim), trainer_from (a recipe file the trainer section starts from), hardware, search,
budget and compare. The field descriptions in config/schema.py are their documentation
(`grpo-ablate explain KEY`, config/keys.py).

Modules: yaml_io (bounded YAML reading), schema (the sections), keys (their documentation), load (recipe merge, `--set`),
recipes (a recipe's keys translated, with notes), trainer_fields (the trainer section against
GRPOConfig's fields, which trl_facts/ reads and caches), hardware (world size, batch shape, and the space with probe.json applied),
names and places (what the study names, where it writes), validate (the meaning checks), study
(the validated StudyConfig). Problem and StudyError live one layer down (grpo_ablate/core/errors.py) and are
re-exported here; probe.json is read through grpo_ablate/files/, never through preflight.
"""

from grpo_ablate.core.errors import Problem, StudyError
from grpo_ablate.config.load import apply_overrides, load_study
from grpo_ablate.config.schema import (
    BudgetSection,
    DataSection,
    FloatRange,
    HardwareSection,
    IntRange,
    ModelSection,
    SearchSection,
    StudySection,
)
from grpo_ablate.config.study import StudyConfig

__all__ = [
    "StudyConfig",
    "StudyError",
    "Problem",
    "load_study",
    "apply_overrides",
    "FloatRange",
    "IntRange",
    "ModelSection",
    "DataSection",
    "BudgetSection",
    "HardwareSection",
    "SearchSection",
    "StudySection",
]

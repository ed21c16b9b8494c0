"""Published recipes as they are: Open R1's GRPO recipe files and `trl grpo` CLI recipes.

    grpo-ablate plan studies/openr1-1.5b-numina-8gpu.yaml     # prints a note per translated key

A recipe mixes four kinds of key. Script keys (model, dataset, rewards ...) go to the study's
sections; GRPOConfig keys go to the trainer section; keys TRL or transformers removed are
translated; keys the study owns (run length, output, hub, saving, logging) are overridden;
keys other tools read (callbacks, benchmarks, W&B entity, code sandboxes) are listed once as
ignored. Every note and every error names the recipe file and the line of the key. The study's
own `trainer:` section is not translated: a typo there stays an error.

A study must train the run the recipe describes. Keys the recipe leaves out mean what the TRL it
was written for said (Open R1: TRL 0.18), not what the installed TRL says, so they are resolved
against that stack where it is known; Open R1's rewards are Open R1's own functions where open_r1
imports (its factories called with the recipe's arguments), else built-ins that score as they do;
and whatever still differs from the recipe's own run is a RecipeDifference, which `plan` lists.

Modules, one concept each: file (a recipe's keys and lines, the notes), keys (what each kind of key
becomes), registry (Open R1's and `trl grpo`'s reward registries and script keys), stack (the TRL a
recipe was written for), defaults (the keys it leaves out), rewards (its reward_funcs as study
rewards), sharding (its accelerate config), merge (the study with its recipe merged in).
"""

from grpo_ablate.config.recipes.defaults import DRIFTING_KEYS, NEW_LOSS_SWITCHES
from grpo_ablate.config.recipes.file import FieldList, RecipeDifference, RecipeNote, read_recipe
from grpo_ablate.config.recipes.keys import OTHER_TOOL_KEYS, REMOVED_KEYS, SCRIPT_KEYS, STUDY_OWNED_KEYS
from grpo_ablate.config.recipes.merge import merge_recipe
from grpo_ablate.config.recipes.registry import (OPEN_R1_DEFAULT_REWARDS, OPEN_R1_REWARDS, OPEN_R1_SCRIPT_DEFAULTS,
                                                 OPEN_R1_STAND_INS, TRL_REWARDS)
from grpo_ablate.config.recipes.sharding import recipe_accelerate_config
from grpo_ablate.config.recipes.stack import OPEN_R1_STACK, TargetStack, recipe_stack, stack_default

__all__ = ["RecipeNote", "RecipeDifference", "FieldList", "TargetStack", "OPEN_R1_STACK", "OPEN_R1_SCRIPT_DEFAULTS", "recipe_stack",
           "stack_default", "SCRIPT_KEYS", "REMOVED_KEYS", "STUDY_OWNED_KEYS", "OTHER_TOOL_KEYS", "OPEN_R1_REWARDS",
           "OPEN_R1_STAND_INS", "OPEN_R1_DEFAULT_REWARDS", "TRL_REWARDS", "DRIFTING_KEYS", "NEW_LOSS_SWITCHES",
           "merge_recipe", "read_recipe", "recipe_accelerate_config"]

"""Facts about TRL itself, not about a study: GRPOConfig's fields, defaults and help, installed and released.

    python -c "from grpo_ablate.trl_facts.fields import trl_default; print(trl_default('temperature'))"

Both the orchestrator and the trial process read them, so they sit below `config/` (the study
file) and `trainer/` (the child): the child takes TRL's defaults from here without importing the
study file's schema. Modules: fields (the installed GRPOConfig, read once and cached per version);
releases (each release's defaults and annotations, trl_defaults.json, read from its wheel by
tools/trl_defaults.py).
"""

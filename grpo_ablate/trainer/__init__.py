"""The trainer core: one GRPO trial as one real GRPOTrainer run (the only place that imports trl)."""

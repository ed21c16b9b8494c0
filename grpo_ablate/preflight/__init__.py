"""Pre-flight: what to know before the first full trial.

probe.py (capacity per G, from a few real steps, written to probe.json), difficulty.py (the
zero-spread law over prompts of varying difficulty), advise.py (which G pays off, from samples
only, written to advise.json), launch_plan.py (what `run` would start per arm, started by nothing:
`plan --commands`). The files themselves live in grpo_ablate/files/, beside space:
config, plan and study setup read them there without importing this package. Nothing is
imported here.

    grpo-ablate probe studies/tiny-cpu.yaml && grpo-ablate advise studies/tiny-cpu.yaml
"""

"""Pre-flight: what to know before the first full trial.

probe.py (capacity per G, from a few real steps: probe.json), probe_file.py (probe.json and the
space it leaves the study), difficulty.py (the zero-spread law over prompts of varying
difficulty), advise.py (which G pays off, from samples only: advise.json). Nothing is imported
here: config reads probe_file without pulling in the rest.

    grpo-ablate probe studies/tiny-cpu.yaml && grpo-ablate advise studies/tiny-cpu.yaml
"""

"""What `grpo-ablate probe` costs next to one trial, and what sharing one process saves.

    nice -n 10 python benchmarks/probe.py            # tiny model, G = 2, 4, 8, 16, batches up to 256
    nice -n 10 python benchmarks/probe.py --steps 2 --max-batch 512

Side by side in one run, on the same study:
1. `run_probe` as the CLI runs it: the bisection's points in one process (a warm session from LauncherPool(probe=True));
2. the same points again, each in a process of its own (how the probe ran before sessions);
3. one real full trial of the study's baseline (its budget's steps), against the probe's estimate.
Printed: each way's seconds, their ratio, the largest difference in a point's peak memory
between the two ways, and the probe's cost as a share of one measured trial.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_ablate.config import load_study  # noqa: E402
from grpo_ablate.plan.cells import baseline_arm  # noqa: E402
from grpo_ablate.files.probe_file import probe_table  # noqa: E402
from grpo_ablate.preflight.probe import measure_point, run_probe  # noqa: E402
from grpo_ablate.study.trial_spec import build_spec  # noqa: E402
from grpo_ablate.launch import run_trial  # noqa: E402
from grpo_ablate.core.vocab import Cell, Outcome  # noqa: E402


def study_file(folder: Path, max_batch: int, steps: int) -> Path:
    path = folder / "probe-bench.yaml"
    path.write_text(f"""
study: {{name: probe-bench, output_dir: {folder / 'run'}, sampler: tpe, n_trials: 4, trial_timeout: 900}}
model: {{name_or_path: "builtin:tiny"}}
data: {{task: addition, num_prompts: 2000}}
trainer: {{per_device_train_batch_size: 16, max_completion_length: 6, beta: 0.0}}
hardware: {{command: python}}
search: {{num_generations: [2, 4, 8, 16], generation_batch_size: probed, max_generation_batch_size: {max_batch}}}
budget: {{max_steps: {steps}}}
""")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps per probe point")
    parser.add_argument("--max-batch", type=int, default=256)
    parser.add_argument("--trial-steps", type=int, default=50, help="the full trial's budget")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="probe-bench-") as tmp:
        study = load_study(study_file(Path(tmp), args.max_batch, args.trial_steps))
        probe = run_probe(study, steps=args.steps, log=lambda m: print(m, flush=True))
        print(probe_table(probe))
        started = time.perf_counter()
        alone = [measure_point(study, p.num_generations, p.generation_batch_size, Path(tmp) / "alone" / p.label,
                               steps=args.steps) for p in probe.points]
        own_seconds = time.perf_counter() - started
        same = all(a.fits == p.fits for a, p in zip(alone, probe.points))
        peaks = [abs((a.peak_memory_mb or 0) - (p.peak_memory_mb or 0)) for a, p in zip(alone, probe.points)]
        study = load_study(study_file(Path(tmp), args.max_batch, args.trial_steps))  # now with probe.json
        arm = baseline_arm(study)
        best = probe.best().get(arm.num_generations)
        if best is not None:
            arm = dataclasses.replace(arm, generation_batch_size=best.generation_batch_size)
        started = time.perf_counter()
        trial = run_trial(build_spec(study, Cell(arm, study.study.seeds[0], "benchmark"), Path(tmp) / "trial"))
        trial_seconds = time.perf_counter() - started
    print(f"\n{len(probe.points)} points x {args.steps} step(s): in one session {probe.total_seconds:.1f} s "
          f"({probe.processes} process(es)); each in its own process {own_seconds:.1f} s; "
          f"ratio {own_seconds / probe.total_seconds:.1f}x")
    print(f"same fits/OOM answer both ways: {same}; largest peak-memory difference {max(peaks):.0f} MiB")
    print(f"one full trial ({args.trial_steps} steps, {arm.label}): {trial_seconds:.1f} s measured "
          f"({trial.outcome.value}), {probe.one_trial_estimate_s} s estimated; the probe cost "
          f"{probe.total_seconds / trial_seconds:.0%} of it")
    return 0 if same and trial.outcome is Outcome.COMPLETED else 1


if __name__ == "__main__":
    raise SystemExit(main())

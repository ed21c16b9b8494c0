"""A small, real Optuna journal study shaped exactly like `grpo-ablate run` leaves one.

The numbers are chosen by hand so the report tests can assert exact values: every arm's
reward_per_hour is a short list whose mean and t-interval are easy to check on paper.
Trial folders hold real-shaped metrics.jsonl / groups.jsonl / result.json files, including
model text that tries to inject markup.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState, create_trial

from grpo_ablate.records import trial_record as record
from grpo_ablate.core.vocab import Arm

XSS = "<script>alert(1)</script>"
STUDY_NAME = "fixture-ablation"

# arm -> (G, B, T, {seed: (outcome, reward_per_hour)})
ARMS: dict[str, tuple[int, int, float, dict[int, tuple[str, float | None]]]] = {
    "baseline": (8, 16, 1.0, {0: ("completed", 1.0), 1: ("completed", 2.0), 2: ("completed", 3.0)}),
    "num_generations=4": (4, 16, 1.0, {0: ("completed", 4.0), 1: ("completed", 5.0), 2: ("completed", 6.0)}),
    "num_generations=16": (16, 16, 1.0, {0: ("completed", 1.5), 1: ("oom", None), 2: ("pruned", None)}),
    "temperature=0.3": (8, 16, 0.3, {0: ("completed", 2.0), 1: ("completed", 2.0), 2: ("failed", None)}),
}
# per arm: (frac_reward_zero_std, completions_clipped_ratio, distinct_frac) of every step/group
DIAG = {
    "baseline": (0.25, 0.10, 1.0),
    "num_generations=4": (0.75, 0.10, 1.0),  # zero-spread warning
    "num_generations=16": (0.10, 0.80, 0.9),  # truncated warning
    "temperature=0.3": (0.30, 0.05, 0.25),  # near-duplicate warning
}
STEPS = 10
PROMPTS = ["What is 2+2?", f"{XSS} Say hi", "Name a prime."]
# within-group reward variance per prompt (same in every trial): the XSS prompt ranks first
PROMPT_VAR = {PROMPTS[0]: 0.05, PROMPTS[1]: 0.25, PROMPTS[2]: 0.15}
PROMPT_MEAN = {PROMPTS[0]: 0.9, PROMPTS[1]: 0.5, PROMPTS[2]: 0.2}


def step_rows(g: int, seed: int, clipped: float, zero: float) -> list[dict[str, Any]]:
    rows = []
    for i in range(1, STEPS + 1):
        row: dict[str, Any] = {
            "step": i,
            "train_seconds": float(i * g),  # bigger groups take longer per step
            "num_tokens": i * g * 100,
            "step_time": float(g),
            "completions": i * 16,
            "completions_mean_length": 12.0,
            "completions_clipped_ratio": clipped,
            "entropy": 1.0,
            "loss": 0.01,
            "grad_norm": 0.5,
            "learning_rate": 1e-5,
            "peak_memory_mb": 100.0 * g,
        }
        if not (g == 16 and i % 3 == 0):  # some steps log no reward keys (steps_per_generation > 1)
            row.update({
                "reward": 0.1 + 0.04 * i + 0.01 * seed,
                "reward_std": 0.2,
                "frac_reward_zero_std": zero,
                "rewards/count_char/mean": 0.1 + 0.04 * i,
            })
        rows.append(row)
    return rows


def group_rows(g: int, distinct: float) -> list[dict[str, Any]]:
    rows = []
    for step in (1, 2):
        for p in PROMPTS:
            rows.append({
                "step": step,
                "prompt": p,
                "num_generations": g,
                "reward_mean": PROMPT_MEAN[p],
                "reward_var": PROMPT_VAR[p],
                "distinct_frac": distinct,
                "completions": [f"answer {XSS} one", "answer two", "answer three", "answer four"][: min(4, g)],
            })
    return rows


def make_study(root: Path, objectives: tuple[tuple[str, str], ...] = (("reward_per_hour", "maximize"),),
               corrupt_last_line: bool = False, role_attr: str = record.ROLE) -> tuple[str, Path]:
    """Build the study under root; returns (storage path, output_dir).

    role_attr "arm" writes trials as studies did before the "role" attr.
    """
    out = root / "run"
    (out / "trials").mkdir(parents=True)
    storage_path = str(out / "study.journal")
    storage = JournalStorage(JournalFileBackend(storage_path))
    study = optuna.create_study(study_name=STUDY_NAME, storage=storage,
                                directions=[d for _, d in objectives])
    study.set_user_attr(record.CONFIG, {
        "study": {"name": STUDY_NAME, "sampler": "ablation", "seeds": [0, 1, 2]},
        "model": {"name_or_path": f"builtin:tiny {XSS}"},
        "data": {"task": "count_char", "num_prompts": 64},
        "rewards": [{"name": "count_char", "weight": 1.0}],
        "trainer": {"learning_rate": 1e-5, "max_completion_length": 16},
        "budget": {"max_steps": STEPS},
        "search": {"num_generations": [4, 8, 16], "temperature": [0.3, 1.0]},
    })
    study.set_user_attr(record.VERSIONS, {"python": "3.11", "torch": "2.13.0", "trl": "1.16.0",
                                     "transformers": "5.2.0", "optuna": "5.0.0", "grpo_ablate": "0.1.0"})
    study.set_user_attr(record.BASELINE, {"num_generations": 8, "generation_batch_size": 16, "temperature": 1.0})
    study.set_user_attr(record.OBJECTIVES, [{"metric": m, "direction": d} for m, d in objectives])
    study.set_user_attr(record.HARDWARE, "1 training process(es) x 8 per device = 8 completions per micro-step")
    dists = {
        "num_generations": CategoricalDistribution([4, 8, 16]),
        "temperature": CategoricalDistribution([0.3, 1.0]),
        "seed": CategoricalDistribution([0, 1, 2]),
    }
    number = 0
    for seed in (0, 1, 2):  # seed by seed, as the ablation plan runs them
        for arm, (g, b, t, by_seed) in ARMS.items():
            outcome, rph = by_seed[seed]
            tdir = out / "trials" / str(number)
            tdir.mkdir()
            zero, clipped, distinct = DIAG[arm]
            attrs: dict[str, Any] = {
                "num_generations": g, "generation_batch_size": b, "temperature": t, "seed": seed,
                role_attr: arm, record.TRIAL_DIR: str(tdir), record.OUTCOME: outcome,
            }
            if outcome in ("completed", "pruned"):
                steps = step_rows(g, seed, clipped, zero)
                text = "".join(json.dumps(r) + "\n" for r in steps)
                if corrupt_last_line and number == 0:
                    text += '{"step": 11, "rew'  # a trial killed mid-write
                (tdir / "metrics.jsonl").write_text(text)
                (tdir / "groups.jsonl").write_text("".join(json.dumps(r) + "\n" for r in group_rows(g, distinct)))
            if outcome == "completed":
                attrs.update({
                    "reward_per_hour": rph, "final_reward": 0.5 + 0.1 * seed, "start_reward": 0.1,
                    "reward_gain": 0.4 + 0.1 * seed, "stability_variance": 0.001 * g,
                    "samples_per_second": 16.0 / g * 10, "tokens_per_second": 1000.0,
                    "reward_per_million_tokens": 10.0, "peak_memory_mb": 100.0 * g,
                    "train_seconds": 10.0 * g, "load_seconds": 2.0,
                })
            elif outcome == "oom":
                attrs[record.REASON] = "CUDA out of memory. Tried to allocate 2.00 GiB"
            elif outcome == "failed":
                attrs[record.REASON] = f"RuntimeError: reward function crashed {XSS}"
            elif outcome == "pruned":
                attrs[record.REASON] = "pruned at step 5 by the median pruner"
            (tdir / "result.json").write_text(json.dumps({"outcome": outcome, "reason": attrs.get(record.REASON)}))
            params = {"num_generations": g, "temperature": t, "seed": seed}
            values = None
            constraints = None
            state = TrialState.COMPLETE
            if outcome == "completed":
                values = [attrs[m] for m, _ in objectives]
                constraints = {"oom": 0.0}
            elif outcome == "oom":
                values = [0.0 if d == "maximize" else 1e9 for _, d in objectives]
                constraints = {"oom": 1.0}
            elif outcome == "pruned":
                state = TrialState.PRUNED
            else:
                state = TrialState.FAIL
            ft = create_trial(state=state, params=params, distributions=dists, values=values,
                              user_attrs=attrs, constraints=constraints)
            study.add_trial(ft)
            number += 1
    return storage_path, out


def make_tpe_study(root: Path, n: int = 24) -> tuple[str, Path]:
    """An adaptive-sampler study: one-off configurations, continuous temperature, no baseline run."""
    import random

    rng = random.Random(0)
    out = root / "tpe"
    (out / "trials").mkdir(parents=True)
    storage_path = str(out / "study.journal")
    study = optuna.create_study(study_name="tpe", storage=JournalStorage(JournalFileBackend(storage_path)),
                                direction="maximize")
    study.set_user_attr(record.BASELINE, {"num_generations": 8, "generation_batch_size": 64, "temperature": 1.0})
    study.set_user_attr(record.OBJECTIVES, [{"metric": "reward_per_hour", "direction": "maximize"}])
    dists = {
        "generation": CategoricalDistribution(["2x64", "4x64", "8x64", "16x64", "8x32", "16x32"]),
        "temperature": optuna.distributions.FloatDistribution(0.5, 1.2),
    }
    for number in range(n):
        label = rng.choice(dists["generation"].choices)
        g, b = (int(x) for x in str(label).split("x"))
        t = round(rng.uniform(0.5, 1.2), 3)
        tdir = out / "trials" / str(number)
        tdir.mkdir()
        rph = 1.0 + 0.1 * g * t + rng.random()
        (tdir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in step_rows(g, number, 0.1, 0.2)))
        (tdir / "groups.jsonl").write_text("".join(json.dumps(r) + "\n" for r in group_rows(g, 0.9)))
        attrs = {"num_generations": g, "generation_batch_size": b, "temperature": t, record.SEED: 0, record.ROLE: "tpe",
                 record.TRIAL_DIR: str(tdir), record.OUTCOME: "completed", "reward_per_hour": rph, "final_reward": 0.5,
                 "stability_variance": 0.01, "samples_per_second": 100.0 / g, "peak_memory_mb": 10.0 * b * g}
        study.add_trial(create_trial(params={"generation": label, "temperature": t}, distributions=dists,
                                     value=rph, user_attrs=attrs, constraints={"oom": -1.0}))
    return storage_path, out


# ---------------------------------------------------------------- hand-built studies for the answer

EVAL_PROMPTS = ["47+8=", "19+3=", f"{XSS}+1="]


@dataclass(frozen=True)
class SeedRun:
    """One completed trial of a hand-built study: its held-out curve and its training numbers.

    `eval_curve` is the held-out reward at evenly spaced points of generated compute (point 0 is
    before the first step); the same completions budget for every arm, as the trial side runs it.
    """

    eval_curve: tuple[float, ...] | None = None
    train_seconds: float = 10.0
    tokens_per_completion: float = 4.0
    metrics: dict[str, float] = field(default_factory=dict)  # extra user attrs (reward_per_hour ...)


def eval_rows(run: SeedRun, budget_completions: int = 256, steps: int = 8) -> list[dict[str, Any]]:
    """eval.jsonl rows as the interface defines them, with completions and rewards per sample."""
    curve = run.eval_curve or ()
    rows = []
    last = len(curve) - 1
    for i, reward in enumerate(curve):
        frac = i / last if last else 1.0
        completions = int(round(budget_completions * frac))
        samples = []
        for j, prompt in enumerate(EVAL_PROMPTS[:2]):
            ok = reward >= (0.5 if j == 0 else 0.7)
            samples.append({"prompt_index": j, "prompt": prompt, "completions": [
                {"text": "55" if ok else f"5{j} {XSS}", "reward": 1.0 if ok else 0.0, "length": 3}]})
        rows.append({
            "point": i, "step": int(round(steps * frac)), "completions": completions,
            "generated_tokens": completions * run.tokens_per_completion,
            "train_seconds": run.train_seconds * frac, "eval_seconds": 0.5, "reward": reward,
            "per_prompt": [reward] * 4, "num_prompts": 4, "samples_per_prompt": 1, "temperature": 0.0,
            "max_completion_length": 6, "samples": samples,
        })
    return rows


def make_custom_study(root: Path, arms: dict[str, tuple[Arm, dict[int, SeedRun]]], *,
                      name: str = "custom", objectives: tuple[tuple[str, str], ...] = (("eval_final_reward", "maximize"),),
                      evaluation: dict[str, Any] | None = None, baseline: str = "baseline",
                      distinct: dict[str, float] | None = None, zero_spread: dict[str, float] | None = None,
                      write_eval_attrs: bool = False) -> tuple[str, Path]:
    """A journal study of completed trials, one per (arm, seed), shaped as `grpo-ablate run` leaves them.

    Held-out metrics come from each trial's eval.jsonl (the report derives them) unless
    `write_eval_attrs` also copies them into the user attrs, as the trial side will.
    """
    from grpo_ablate.report.evaluation import summarize_eval

    out = root / name
    (out / "trials").mkdir(parents=True)
    storage_path = str(out / "study.journal")
    study = optuna.create_study(study_name=name, storage=JournalStorage(JournalFileBackend(storage_path)),
                                directions=[d for _, d in objectives])
    study.set_user_attr(record.BASELINE, arms[baseline][0].as_dict())
    study.set_user_attr(record.OBJECTIVES, [{"metric": m, "direction": d} for m, d in objectives])
    if evaluation is not None:
        study.set_user_attr(record.EVALUATION, evaluation)
    dists = {"num_generations": CategoricalDistribution(sorted({a.num_generations for a, _ in arms.values()})),
             "temperature": CategoricalDistribution(sorted({a.temperature for a, _ in arms.values()})),
             "seed": CategoricalDistribution(sorted({s for _, runs in arms.values() for s in runs}))}
    number = 0
    seeds = sorted({s for _, runs in arms.values() for s in runs})
    for seed in seeds:
        for role, (arm, runs) in arms.items():
            if seed not in runs:
                continue
            run = runs[seed]
            tdir = out / "trials" / f"{number:05d}"
            tdir.mkdir()
            rows = eval_rows(run) if run.eval_curve else []
            if rows:
                (tdir / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            steps = [{"step": i, "train_seconds": run.train_seconds * i / 8, "completions": 32,
                      "completion_tokens": 32 * run.tokens_per_completion, "reward": 0.3 + 0.02 * i,
                      "frac_reward_zero_std": (zero_spread or {}).get(role, 0.2)} for i in range(1, 9)]
            (tdir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
            groups = [{"step": 1, "prompt": p, "num_generations": arm.num_generations, "reward_mean": 0.5,
                       "reward_var": 0.25, "distinct_frac": (distinct or {}).get(role, 0.9),
                       "completions": [{"text": f"{k}", "reward": float(k % 2)} for k in range(arm.num_generations)]}
                      for p in ("1+1=", "2+2=")]
            (tdir / "groups.jsonl").write_text("".join(json.dumps(g) + "\n" for g in groups))
            attrs: dict[str, Any] = {**arm.as_dict(), record.SEED: seed, record.ROLE: role,
                                     record.TRIAL_DIR: str(tdir), record.OUTCOME: "completed", "train_seconds": run.train_seconds, "steps": 8,
                                     **run.metrics}
            if write_eval_attrs and rows:
                attrs.update({k: v for k, v in summarize_eval(rows).items() if v is not None})
            values = [attrs.get(m, summarize_eval(rows).get(m)) or 0.0 for m, _ in objectives]
            study.add_trial(create_trial(params={"num_generations": arm.num_generations, "temperature": arm.temperature,
                                                 "seed": seed}, distributions=dists, values=values,
                                         user_attrs=attrs, constraints={"oom": 0.0}))
            number += 1
    return storage_path, out


def load_custom(storage: str, name: str = "custom"):
    """The ReportData of a hand-built study."""
    from grpo_ablate.report.data import build_report_data
    from grpo_ablate.report.records import load_trials

    attrs, frozen = load_trials(storage, name)
    return build_report_data(name, attrs, frozen, storage_url=storage)

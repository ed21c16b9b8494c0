"""Two real colocate-vLLM trials at once on the CPU (`run --workers 2`), each with held-out
evaluation through its trainer's vLLM engine; one arm runs a G schedule. Each trial's greedy answers
equal transformers' on the same weights, before training (the model on disk) and after it (the
trial's final checkpoint), so each engine saw its own trainer's updated weights.

Two trials at once is what `--workers 2` on one GPU does: each one-process colocate trial claims a
rendezvous port of its own (TRL alone tries 29500 first, and the second trial died with EADDRINUSE).
On vLLM's CPU build the weight sync needs the trial to turn the build's weight prepacking off
(grpo_ablate/trainer/vllm_cpu.py); without it the first sync raised AttributeError."""

from __future__ import annotations

from pathlib import Path

from helpers import run_cli, write_study
from tier import jsonl

STEPS = 4
HELD_OUT = 48


def _study(tmp_path: Path) -> Path:
    return write_study(tmp_path, f"""
        study:
          name: colocate
          sampler: grid
          seeds: [0]
          workers: 2
          output_dir: {tmp_path / 'out'}
          checkpoint_steps: null     # no retry checkpoints: the trainer's save_steps below is what saves
          keep_checkpoints: true     # the final weights stay on disk, for transformers to load
          baseline: {{num_generations: 4}}
        model: {{name_or_path: builtin:tiny-vllm}}
        data: {{task: addition, num_prompts: 200}}
        trainer:
          learning_rate: 1.0e-3      # large, so a few steps change greedy answers the engine must then show
          per_device_train_batch_size: 16
          max_completion_length: 6
          beta: 0.0
          lr_scheduler_type: constant
          warmup_steps: 0
          vllm_max_model_length: 64
          save_strategy: steps
          save_steps: {STEPS}
          save_only_model: true
        hardware: {{num_processes: 1, vllm: {{mode: colocate}}}}
        search: {{num_generations: [4, "4->8@50%"]}}
        budget: {{max_steps: {STEPS}}}
        evaluation: {{num_prompts: {HELD_OUT}, temperature: 0, points: 1, show_prompts: {HELD_OUT}}}
        """)


def _greedy(folder: Path, prompts: list[str], max_new_tokens: int) -> list[str]:
    """transformers' greedy answers as the evaluator's transformers branch makes them (left padding, no
    special tokens added, cut after the end token, decoded without special tokens)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id,
                             eos_token_id=tok.eos_token_id)
    texts = []
    for row in out[:, enc["input_ids"].shape[1]:].tolist():
        cut = row[: row.index(tok.eos_token_id) + 1] if tok.eos_token_id in row else row
        texts.append(tok.decode(cut, skip_special_tokens=True))
    return texts


def _check_trial(trial: Path, model: Path, g_first: int, g_last: int) -> None:
    log = (trial / "log.txt").read_text() if (trial / "log.txt").exists() else ""
    assert "weight prepacking off" in log, log[-3000:]
    steps = jsonl(trial / "metrics.jsonl")
    g = [row.get("num_generations") for row in steps]
    assert len(steps) == STEPS and g[0] == g_first and g[-1] == g_last, g

    evals = jsonl(trial / "eval.jsonl")
    assert len(evals) == 3 and [e["num_prompts"] for e in evals] == [HELD_OUT] * 3
    first, last = evals[0], evals[-1]
    assert first["step"] == 0 and last["step"] == STEPS
    prompts = [s["prompt"] for s in first["samples"]]
    assert len(prompts) == HELD_OUT and prompts == [s["prompt"] for s in last["samples"]]
    answers = lambda row: [s["completions"][0]["text"] for s in row["samples"]]  # noqa: E731

    (final,) = sorted((trial / "trainer").glob("checkpoint-*"))
    before = _greedy(model, prompts, first["max_completion_length"])
    after = _greedy(final, prompts, last["max_completion_length"])
    # the training changed greedy answers, so an engine still holding the first weights would show
    assert before != after, "training changed no greedy answer: the weight check below would prove nothing"
    assert answers(first) == before  # vLLM's evaluation = transformers' on the model it started from
    assert answers(last) == after  # ... and on the trainer's final weights: the colocate sync is real


def test_two_colocate_trials_at_once_evaluate_through_vllm_as_transformers_does(tmp_path, needs_vllm, tiny_vllm_model):
    import optuna

    from grpo_ablate.storage import open_storage
    from grpo_ablate.trial_record import TRIAL_DIR, arm_of

    r = run_cli("run", str(_study(tmp_path)), "--no-report", timeout=1200)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    study = optuna.load_study(study_name="colocate", storage=open_storage(str(tmp_path / "out" / "study.journal")))
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 2 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials), r.stdout[-3000:]
    (a, b) = sorted(trials, key=lambda t: t.datetime_start)
    assert b.datetime_start < a.datetime_complete, "the two trials did not run at the same time"

    by_g = {str(arm_of(t).num_generations): Path(t.user_attrs[TRIAL_DIR]) for t in trials}  # type: ignore[union-attr]
    fixed = by_g.pop("4")
    (scheduled,) = by_g.values()
    _check_trial(fixed, Path(tiny_vllm_model), 4, 4)
    _check_trial(scheduled, Path(tiny_vllm_model), 4, 8)

"""Two real colocate-vLLM trials at once on the CPU (`run --workers 2`), each with held-out
evaluation through its trainer's vLLM engine; one arm runs a G schedule. Each trial's greedy answers
equal transformers' on the same weights, before training (the model on disk) and after it (the
trial's final checkpoint), except at near ties (NEAR_TIE: the engine runs bfloat16), while
training changed answers by far more than that: so each engine saw its own trainer's updated weights.

Two trials at once is what `--workers 2` on one GPU does: each one-process colocate trial claims a
rendezvous port of its own (TRL alone tries 29500 first, and the second trial died with EADDRINUSE).
On vLLM's CPU build the weight sync needs the trial to turn the build's weight prepacking off
(grpo_ablate/trainer/vllm_cpu.py); without it the first sync raised AttributeError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import run_cli, write_study
from tier import jsonl
from grpo_ablate.records import trial_record as record
from grpo_ablate.contract.files import trainer_dir

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


# vLLM's CPU build runs a float32 checkpoint in bfloat16 (its dtype "auto" takes the platform's first
# supported dtype, and TRL passes no dtype to the colocated engine), while transformers here runs
# float32. Where transformers' two best next tokens are closer than bfloat16 can tell apart (the
# logits are ~7: bfloat16's step there is 0.03), the two can take different greedy tokens without
# any difference in weights. Seen: 3 of 48 answers, their top-2 gaps 0.008-0.016.
NEAR_TIE = 0.05


def _greedy(folder: Path, prompts: list[str], max_new_tokens: int) -> tuple[list[str], Any]:
    """transformers' greedy answers as the evaluator's transformers branch makes them (left padding, no
    special tokens added, cut after the end token, decoded without special tokens), with the
    tokenizer and each step's logits."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id,
                             eos_token_id=tok.eos_token_id, output_scores=True, return_dict_in_generate=True)
    texts = []
    for row in out.sequences[:, enc["input_ids"].shape[1]:].tolist():
        cut = row[: row.index(tok.eos_token_id) + 1] if tok.eos_token_id in row else row
        texts.append(tok.decode(cut, skip_special_tokens=True))
    return texts, (tok, out.scores)


def _mismatches_off_ties(engine: list[str], greedy: tuple[list[str], Any]) -> list[str]:
    """The engine's answers that differ from transformers' other than at a near tie: at the first
    character where they part (the tokenizer is one character a token), transformers' logit for
    its own token must exceed the engine's token's by NEAR_TIE or more for the difference to count."""
    texts, (tok, scores) = greedy

    def token(text: str, at: int) -> int:  # the text's token at a character; past its end, the end token
        return tok.convert_tokens_to_ids(text[at]) if at < len(text) else tok.eos_token_id

    off = []
    for i, (ours, theirs) in enumerate(zip(engine, texts)):
        if ours == theirs:
            continue
        at = next((j for j, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        gap = float(scores[at][i, token(theirs, at)] - scores[at][i, token(ours, at)]) if at < len(scores) else float("inf")
        if gap >= NEAR_TIE:
            off.append(f"{i}: engine {ours!r}, transformers {theirs!r} (logit gap {gap:.3f} at character {at})")
    return off


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

    # checkpoint_steps is null: no sealed checkpoints; the trainer's own save_steps wrote its output_dir
    (final,) = sorted(trainer_dir(trial).glob("checkpoint-*"))
    before = _greedy(model, prompts, first["max_completion_length"])
    after = _greedy(final, prompts, last["max_completion_length"])
    # training changed some answer by more than a near tie, so an engine still holding the first
    # weights would fail the last check
    assert _mismatches_off_ties(before[0], after), "training changed no greedy answer clearly: the check proves nothing"
    # vLLM's evaluation = transformers' on the model it started from, and on the trainer's final
    # weights (the colocate sync is real), but for near ties (NEAR_TIE)
    assert not _mismatches_off_ties(answers(first), before)
    assert not _mismatches_off_ties(answers(last), after)


def test_two_colocate_trials_at_once_evaluate_through_vllm_as_transformers_does(tmp_path, needs_vllm, tiny_vllm_model):
    import optuna

    from grpo_ablate.storage.store import open_storage
    from grpo_ablate.records.trial_record import arm_of

    r = run_cli("run", str(_study(tmp_path)), "--no-report", timeout=1200)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    study = optuna.load_study(study_name="colocate", storage=open_storage(str(tmp_path / "out" / "study.journal")))
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 2 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials), r.stdout[-3000:]
    (a, b) = sorted(trials, key=lambda t: t.datetime_start)
    assert b.datetime_start < a.datetime_complete, "the two trials did not run at the same time"

    by_g = {str(arm_of(t).num_generations): Path(record.trial_dir(t)) for t in trials}  # type: ignore[union-attr]
    fixed = by_g.pop("4")
    (scheduled,) = by_g.values()
    _check_trial(fixed, Path(tiny_vllm_model), 4, 4)
    _check_trial(scheduled, Path(tiny_vllm_model), 4, 8)

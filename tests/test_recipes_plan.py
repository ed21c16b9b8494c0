"""`plan` estimates each trial's generated tokens, and its wall time from trials already in the study's storage."""

from __future__ import annotations

from pathlib import Path

from grpo_ablate.plan.cells import completions_per_trial
from grpo_ablate.config import load_study
from grpo_ablate.commands.plan_words import plan_json, plan_text
from grpo_ablate.plan.trial_cost import trial_cost
from grpo_ablate.study.setup import open_study


def test_tokens_and_wall_time_from_a_previous_study(tmp_path):
    sets = [f"study.output_dir={tmp_path / 'out'}", "budget.max_steps=10"]
    study = load_study("studies/tiny-cpu.yaml", sets)
    cost = trial_cost(study)
    assert cost["completions"] == 10 * 32 and cost["max_tokens"] == 10 * 32 * 6  # max_completion_length 6
    assert "no measurement yet" in plan_text(study)

    previous = load_study("studies/tiny-cpu.yaml", [*sets, "study.name=earlier"])
    ostudy, _ = open_study(previous, completions_per_trial(previous))
    for rate in (20.0, 40.0, 80.0):  # completions per second of three finished trials
        trial = ostudy.ask()
        trial.set_user_attr("samples_per_second", rate)
        ostudy.tell(trial, 1.0)
    cost = trial_cost(study)
    assert cost["seconds_per_completion"] == 1 / 40.0 and cost["seconds"] == 320 / 40.0
    text = plan_text(study)
    assert "Wall time: about 8 s per trial" in text and "from 3 finished trial(s) of earlier in" in text
    assert plan_json(study)["trial_cost"]["seconds"] == 8.0


def test_wall_time_counts_what_a_trial_spends_outside_training(tmp_path):
    """Trials of 20 s that trained for 1 s: the plan says about 20 s per trial, not 0 s."""
    from datetime import datetime, timedelta

    import optuna

    sets = [f"study.output_dir={tmp_path / 'out'}", "budget.max_steps=10"]
    study = load_study("studies/tiny-cpu.yaml", sets)
    ostudy, _ = open_study(study, completions_per_trial(study))
    start = datetime(2026, 1, 1)
    for i in range(3):
        ostudy.add_trial(optuna.trial.FrozenTrial(
            number=i, trial_id=i, state=optuna.trial.TrialState.COMPLETE, value=1.0, values=None,
            datetime_start=start, datetime_complete=start + timedelta(seconds=20), params={}, distributions={},
            user_attrs={"samples_per_second": 320.0, "train_seconds": 1.0}, system_attrs={}, intermediate_values={}))
    cost = trial_cost(study)
    assert cost["overhead_seconds"] == 19.0 and cost["seconds"] == 19.0 + 320 / 320.0
    text = plan_text(study)
    assert "Wall time: about 20 s per trial" in text and "19 s start-up and evaluation" in text
    assert "GPU time: no GPU-hours: the study runs on CPU" in text


def _recipe_study(tmp_path, hardware: str, gens: str = "[7, 14]"):
    recipe = Path("studies/recipes/openr1-demo-grpo.yaml").resolve()
    path = tmp_path / "study.yaml"
    path.write_text(f"study: {{name: r, sampler: ablation, output_dir: {tmp_path / 'out'}, seeds: [0, 1]}}\ntrainer_from: {recipe}\n"
                    f"{hardware}\nsearch: {{num_generations: {gens}}}\nbudget: {{max_steps: 10}}\n")
    return load_study(path)


def test_a_gpu_study_gets_gpu_hours_from_stated_assumptions_before_any_trial(tmp_path):
    from grpo_ablate.core.cost import ASSUMED, assumed_trial_seconds, flops_per_token

    study = _recipe_study(tmp_path, "hardware: {gpus: 8, accelerate_config: "
                                    f"{Path('sweeps/accelerate/zero2.yaml').resolve()}, vllm: {{mode: server}}}}")
    cost = trial_cost(study)
    gpu = cost["gpu_time"]
    assert gpu["gpus_per_trial"] == 8 and gpu["trials"] == len(plan_json(study)["plan"]) == 4
    lo, hi = gpu["gpu_hours_per_trial"]
    n = cost["completions"]
    flops = flops_per_token(int(1.5e9), checkpointing=True, reference_model=True, old_logprobs=False)  # beta 0.04
    lengths = (1024 * ASSUMED.completion_share[0], 1024 * ASSUMED.completion_share[1])
    prompts = (512 * ASSUMED.prompt_share[0], 512 * ASSUMED.prompt_share[1])
    seconds = assumed_trial_seconds(int(1.5e9), n, lengths, prompts, training_gpus=7, generation_gpus=1, vllm=True,
                                    flops_per_trained_token=flops)
    assert (lo, hi) == (seconds[0] * 8 / 3600, seconds[1] * 8 / 3600) and 0 < lo < hi
    assert gpu["gpu_hours_study"] == [lo * 4, hi * 4]
    text = plan_text(study)
    assert "GPU time (estimate):" in text and "assumed, not measured: model 1.5 B parameters" in text
    assert f"training at {ASSUMED.mfu[0]:.0%}-{ASSUMED.mfu[1]:.0%} of the BF16 peak" in text  # printed with the figure
    assert "hardware.gpu_type unset" in text


def test_parameters_from_a_config_match_a_known_model():
    from grpo_ablate.core.cost import parameters_from_config

    qwen25_1_5b = {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
                   "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True}
    assert abs(parameters_from_config(qwen25_1_5b) - 1.54e9) / 1.54e9 < 0.01  # published: 1.54 B
    assert parameters_from_config({"hidden_size": 8}) is None


def test_the_recipe_keys_the_study_replaced_are_noted(tmp_path):
    study = _recipe_study(tmp_path, "hardware: {gpus: 8, vllm: {mode: server}}")
    notes = [str(w) for w in study.warnings]
    assert any("seed: 42 overridden; seeds: study.seeds decides" in n for n in notes)
    assert "seed" not in study.trainer
    sharding = [n for n in notes if "names no accelerate config" in n]
    assert len(sharding) == 1 and "ZeRO-2/3" in sharding[0]
    text = plan_text(study)
    assert "seed: 42 overridden" in text and "set hardware.accelerate_config" in text
    single = _recipe_study(tmp_path, "hardware: {gpus: 1}", gens="[8, 16]")
    assert not any("names no accelerate config" in str(w) for w in single.warnings)

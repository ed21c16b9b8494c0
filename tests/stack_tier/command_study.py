"""Study files for the command-trial tier: the addition task as a user's dataset, an Open R1-style recipe, a study."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "openr1_style_grpo.py"


def write_task_files(folder: Path, *, train: int = 200, held_out: int = 16) -> tuple[Path, Path, Path]:
    """(the built-in tiny model's folder, train.jsonl, heldout.jsonl): the addition task as a user's dataset files."""
    from grpo_ablate.trainer.builtin.model import builtin_model_path
    from grpo_ablate.trainer.builtin.tasks import held_out_problems, task_problems

    folder.mkdir(parents=True, exist_ok=True)
    model = builtin_model_path("builtin:tiny", "addition", log=lambda m: None)
    pairs = task_problems("addition", train)
    held = held_out_problems("addition", held_out, exclude={p for p, _ in pairs})
    for name, rows in (("train.jsonl", pairs), ("heldout.jsonl", held)):
        (folder / name).write_text("".join(json.dumps({"prompt": p, "answer": a}) + "\n" for p, a in rows))
    return model, folder / "train.jsonl", folder / "heldout.jsonl"


def write_command_study(folder: Path, python: str, *, name: str = "cmd", seeds: str = "[0]", max_steps: int = 8,
                        checkpoint_steps: int = 4, generations: str = "[2, 8]", extra: str = "") -> Path:
    """A study whose trials run openr1_style_grpo.py on `python`'s TRL, from an Open R1-style recipe."""
    model, train, _ = write_task_files(folder)
    (folder / "recipe.yaml").write_text(
        f"model_name_or_path: {model}\ndataset_name: {train}\nreward_funcs: [exact_answer]\n"
        "learning_rate: 2.0e-4\nper_device_train_batch_size: 16\ngradient_accumulation_steps: 1\n"
        "max_completion_length: 6\nmax_prompt_length: 32\nbeta: 0.0\nlr_scheduler_type: constant\n"
        "num_generations: 8\ntemperature: 1.0\nreport_to: [tensorboard]\nsave_total_limit: 1\npush_to_hub: true\n")
    study = folder / "study.yaml"
    study.write_text(
        f"study: {{name: {name}, sampler: ablation, seeds: {seeds}, workers: 1, output_dir: runs,"
        f" checkpoint_steps: {checkpoint_steps}, trial_timeout: 900}}\n"
        "trainer_from: recipe.yaml\n"
        f"script:\n  command: python {SCRIPT} --config {{recipe}}\n  python: {python}\n"
        "rewards: [addition]\n"
        f"search: {{num_generations: {generations}}}\n"
        f"budget: {{max_steps: {max_steps}}}\n"
        "evaluation: {dataset: heldout.jsonl, num_prompts: 16, temperature: 0, points: 1}\n" + extra)
    return study

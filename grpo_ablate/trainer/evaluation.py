"""Held-out evaluation inside a trial: the same prompts, at one fixed decoding, at equal generated compute.

Every arm of a study scores the study's held-out prompts at the study's decoding (temperature,
samples per prompt, maximum length; never the arm's own training temperature) before the first
optimizer step, whenever the training completions generated so far (tokens, when the budget is
in tokens) pass k/(points+1) of the trial's budget, and once at the end. So a G=2 arm and a G=16
arm are compared after the same number of completions, not the same step. Each point is one
line of `<trial_dir>/eval.jsonl` (written by rank 0; the fields are in the module's
`Evaluator._row`). Evaluation time is kept out of training time: the recorder and the stop
switch subtract it, and it is reported on its own as eval_seconds.

Generation uses the training backend: the trainer's vLLM engine when the study runs vLLM
(colocate: its LLM; server: its client), else the model's own generate(), batched, under
no_grad, in eval mode, with the model put back in train mode afterwards. Sampling (temperature
> 0) draws from a forked RNG seeded the same in every arm, so evaluation never moves training's
random stream and two arms' samples differ only through their weights.

    grpo-ablate run-one studies/tiny-cpu.yaml   # then: cat runs/tiny-cpu/.../eval.jsonl
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from transformers import TrainerCallback

from grpo_ablate.vocab import EVAL_FILE

from .text import plain_text

__all__ = ["EVAL_SEED", "Evaluator", "MAX_SAMPLE_CHARS", "evaluation_thresholds"]

EVAL_SEED = 0  # the sampling seed of every arm's evaluation (temperature > 0)
MAX_SAMPLE_CHARS = 300  # each shown completion's text is cut to this many characters


def evaluation_thresholds(total: float, points: int) -> list[float]:
    """The interior evaluation points: k/(points+1) of the budget, k = 1..points (start and end are extra)."""
    if total <= 0:
        return []
    return [total * k / (points + 1) for k in range(1, points + 1)]


def _weighted(per_func: Sequence[Sequence[float | None]], weights: Sequence[float], n: int) -> list[float]:
    """TRL's total reward: sum of weight x reward over the functions that scored (None skipped), 0 if none did."""
    out = []
    for i in range(n):
        parts = [w * f[i] for w, f in zip(weights, per_func) if f[i] is not None and not math.isnan(f[i])]
        out.append(sum(parts) if parts else 0.0)
    return out


class Evaluator(TrainerCallback):
    """Score the held-out prompts at start, at equal generated compute, and at the end; write eval.jsonl.

    `recorder` (the MetricsRecorder) supplies the compute counters and takes the evaluation
    time off training time; `stopper` does the same for the seconds budget. Register it after
    the recorder so each step's row is counted before the threshold check.
    """

    def __init__(
        self,
        trial_dir: str | Path,
        *,
        prompts: Any,
        tokenizer: Any,
        reward_funcs: Sequence[Callable[..., Any]],
        reward_weights: Sequence[float],
        settings: dict[str, Any],
        unit: str,
        total: float,
        recorder: Any,
        stopper: Any = None,
    ) -> None:
        self.trial_dir = Path(trial_dir)
        self.prompts = prompts
        self.tokenizer = tokenizer
        self.reward_funcs = list(reward_funcs)
        self.reward_weights = list(reward_weights)
        self.temperature = float(settings.get("temperature", 0.0))
        self.samples = int(settings.get("samples_per_prompt", 1))
        self.max_length = int(settings["max_completion_length"])
        self.batch_size = int(settings.get("batch_size", 64))
        self.show = int(settings.get("show_prompts", 4))
        self.unit = unit  # "completions" | "tokens" | "seconds": what the thresholds count
        self.thresholds = evaluation_thresholds(total, int(settings.get("points", 4)))
        self.recorder = recorder
        self.stopper = stopper
        self.trainer: Any = None
        self.point = 0
        self.seconds = 0.0  # all evaluation time, for result.json
        # Read once: a Dataset's row access is slow, and the prompts never change.
        self._prompts = list(prompts["prompt"])
        self._columns = {c: list(prompts[c]) for c in prompts.column_names if c != "prompt"}
        self._texts = [self._prompt_text(p) for p in self._prompts]

    def attach(self, trainer: Any) -> None:
        self.trainer = trainer

    # -- when ------------------------------------------------------------------------------
    def _progress(self, state) -> float:
        if self.unit == "tokens":
            return float(state.num_input_tokens_seen)
        if self.unit == "seconds":
            return self.recorder.train_seconds
        return float(self.recorder.completions_total)

    def on_train_begin(self, args, state, control, **kwargs):
        self._evaluate(state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not self.thresholds:
            return
        progress = self._progress(state)
        if progress >= self.thresholds[0]:
            while self.thresholds and progress >= self.thresholds[0]:
                self.thresholds.pop(0)
            self._evaluate(state)

    def on_train_end(self, args, state, control, **kwargs):
        self._evaluate(state)

    # -- what ------------------------------------------------------------------------------
    def _evaluate(self, state) -> None:
        if not state.is_world_process_zero:
            return
        started = time.perf_counter()
        completion_ids = self._generate(self._texts, state)
        flat_prompts, flat_completions, flat_ids, columns = [], [], [], {c: [] for c in self._columns}
        for i, per_prompt in enumerate(completion_ids):
            for ids in per_prompt:
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                prompt = self._prompts[i]
                flat_prompts.append(prompt)
                flat_completions.append([{"role": "assistant", "content": text}] if isinstance(prompt, list) else text)
                flat_ids.append(ids)
                for c, values in self._columns.items():
                    columns[c].append(values[i])
        per_func = [
            self._call(f, flat_prompts, flat_completions, flat_ids, columns, state) for f in self.reward_funcs
        ]
        rewards = _weighted(per_func, self.reward_weights, len(flat_completions))
        s = self.samples
        per_prompt = [sum(rewards[i * s:(i + 1) * s]) / s for i in range(len(completion_ids))]
        elapsed = time.perf_counter() - started
        self.seconds += elapsed
        self.recorder.paused_seconds += elapsed
        if self.stopper is not None:
            self.stopper.paused_seconds += elapsed
        row = self._row(state, elapsed, rewards, per_prompt, flat_completions, flat_ids)
        with open(self.trial_dir / EVAL_FILE, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        self.point += 1

    def _row(self, state, elapsed: float, rewards: list[float], per_prompt: list[float],
             completions: list[Any], ids: list[list[int]]) -> dict[str, Any]:
        s = self.samples
        shown = []
        for i in range(min(self.show, len(per_prompt))):
            shown.append({
                "prompt_index": i,
                "prompt": plain_text(self._prompts[i])[:MAX_SAMPLE_CHARS],
                "completions": [
                    {"text": plain_text(completions[j])[:MAX_SAMPLE_CHARS], "reward": round(rewards[j], 4), "length": len(ids[j])}
                    for j in range(i * s, (i + 1) * s)
                ],
            })
        return {
            "point": self.point,
            "step": int(state.global_step),
            "completions": int(self.recorder.completions_total),
            "generated_tokens": round(float(self.recorder.tokens_total), 2),
            "train_seconds": round(self.recorder.train_seconds, 4),
            "eval_seconds": round(elapsed, 4),
            "reward": sum(rewards) / len(rewards) if rewards else None,
            "per_prompt": [round(v, 4) for v in per_prompt],
            "num_prompts": len(per_prompt),
            "samples_per_prompt": s,
            "temperature": self.temperature,
            "max_completion_length": self.max_length,
            "samples": shown,
        }

    def _call(self, func, prompts, completions, ids, columns, state) -> list[float | None]:
        values = func(prompts=prompts, completions=completions, completion_ids=ids, trainer_state=state, **columns)
        if inspect.isawaitable(values):
            values = asyncio.run(values)
        return list(values)

    def _prompt_text(self, prompt: Any) -> str:
        if isinstance(prompt, list):
            return self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        return prompt

    # -- how -------------------------------------------------------------------------------
    def _generate(self, texts: list[str], state) -> list[list[list[int]]]:
        """Completion token ids per prompt (samples_per_prompt each), cut after the first end token."""
        vllm = getattr(self.trainer, "vllm_generation", None) if getattr(self.trainer.args, "use_vllm", False) else None
        if vllm is not None:
            return self._generate_vllm(vllm, texts, state)
        return self._generate_hf(texts)

    def _end_ids(self) -> set[int]:
        eos = self.tokenizer.eos_token_id
        return {eos} if isinstance(eos, int) else set(eos or [])

    def _cut(self, ids: Sequence[int]) -> list[int]:
        ends = self._end_ids()
        out = []
        for t in ids:
            out.append(int(t))
            if int(t) in ends:
                break
        return out

    def _generate_hf(self, texts: list[str]) -> list[list[list[int]]]:
        from transformers import GenerationConfig

        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        tok = self.tokenizer
        sample = self.temperature > 0
        config = GenerationConfig(
            max_new_tokens=self.max_length,
            do_sample=sample,
            temperature=self.temperature if sample else None,
            top_p=1.0 if sample else None,
            top_k=0 if sample else None,
            num_return_sequences=self.samples,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            bos_token_id=tok.bos_token_id,
        )
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        out: list[list[list[int]]] = []
        devices = [device] if device.type == "cuda" else []
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=devices):
                torch.manual_seed(EVAL_SEED)
                for lo in range(0, len(texts), self.batch_size):
                    batch = texts[lo:lo + self.batch_size]
                    enc = tok(batch, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False).to(device)
                    generated = model.generate(**enc, generation_config=config)
                    new = generated[:, enc["input_ids"].shape[1]:].tolist()
                    for i in range(len(batch)):
                        out.append([self._cut(new[i * self.samples + j]) for j in range(self.samples)])
        finally:
            model.train(was_training)
        return out

    def _generate_vllm(self, vllm: Any, texts: list[str], state) -> list[list[list[int]]]:
        """Through the trainer's own vLLM engine, its weights synced to this step first.

        Not run on this project's CPU machines (vLLM needs a GPU): written to TRL 1.16's
        VLLMGeneration (`llm` in colocate mode, `vllm_client` in server mode).
        """
        if state.global_step != getattr(self.trainer, "_last_loaded_step", None):
            vllm.sync_weights()
            self.trainer._last_loaded_step = state.global_step
        prompt_ids = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        if getattr(vllm, "llm", None) is not None:  # colocate
            from vllm import SamplingParams

            params = SamplingParams(n=self.samples, temperature=self.temperature, top_p=1.0, top_k=-1,
                                    max_tokens=self.max_length, seed=EVAL_SEED)
            outputs = vllm.llm.generate([{"prompt_token_ids": ids} for ids in prompt_ids], sampling_params=params, use_tqdm=False)
            return [[self._cut(c.token_ids) for c in o.outputs] for o in outputs]
        result = vllm.vllm_client.generate(prompts=prompt_ids, n=self.samples, temperature=self.temperature,
                                           top_p=1.0, top_k=0, max_tokens=self.max_length)
        flat = result["completion_ids"]
        return [[self._cut(flat[i * self.samples + j]) for j in range(self.samples)] for i in range(len(texts))]

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
(colocate: its LLM, woken and put back to sleep in TRL's order under sleep mode; server: its
client), else the model's own generate() (through TRL's unwrap for ZeRO-3/FSDP), batched, under
no_grad, in eval mode. Sampling (temperature > 0) is seeded the same in every arm (a forked RNG
for generate(), the request's seed for vLLM), so evaluation never moves training's random stream
and two arms' samples differ only through their weights.

In a multi-process trial every rank evaluates (syncing weights and generating from a sharded
model are collectives): the prompts are split among the ranks (a TP group shares one engine; in
server mode rank 0, which holds the client, asks for all), each rank scores its own, and rank 0
gathers the scores and writes the row. When to evaluate is rank 0's decision, broadcast.

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
from transformers import GenerationConfig, TrainerCallback

from grpo_ablate.contract.spec import EvaluationSpec
from grpo_ablate.core.vocab import EVAL_FILE

from . import trl_adapter
from .collective import all_gather, from_rank0, rank_and_world
from .request_seeds import prompt_seeds
from .text import plain_text

__all__ = ["EVAL_SEED", "Evaluator", "MAX_SAMPLE_CHARS", "evaluation_thresholds", "server_completions", "shard"]

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
        scores = [(w, f[i]) for w, f in zip(weights, per_func)]
        parts = [w * x for w, x in scores if x is not None and not math.isnan(x)]
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
        settings: EvaluationSpec,
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
        if settings.max_completion_length is None:
            raise ValueError("the evaluation's max_completion_length must be resolved (the trainer's) before scoring")
        self.temperature = float(settings.temperature)
        self.samples = int(settings.samples_per_prompt)
        self.max_length = int(settings.max_completion_length)
        self.batch_size = int(settings.batch_size)
        self.show = int(settings.show_prompts)
        self.unit = unit  # "completions" | "tokens" | "seconds": what the thresholds count
        self.thresholds = evaluation_thresholds(total, int(settings.points))
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
        """The trainer whose backend generates; evaluating with its vLLM engine needs a checked TRL (trl_adapter)."""
        trl_adapter.gate(trainer, vllm_evaluation=trl_adapter.vllm_generation(trainer) is not None)
        self.trainer = trainer

    # -- when ------------------------------------------------------------------------------
    def _progress(self, state) -> float:
        if self.unit == "tokens":
            return float(state.num_input_tokens_seen)
        if self.unit == "seconds":
            return self.recorder.train_seconds
        return float(self.recorder.completions_total)

    def on_train_begin(self, args, state, control, **kwargs):
        if self.point == 0:  # a resumed trial scored its start before (contract/checkpoints.py)
            self._evaluate(state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not self.thresholds:
            return
        # Rank 0 counts the thresholds passed (its recorder holds the counters and the clock without
        # evaluation time) and every rank follows: evaluation is a collective now.
        passed = 0
        if state.is_world_process_zero:
            progress = self._progress(state)
            passed = sum(1 for t in self.thresholds if progress >= t)
        passed = from_rank0(passed)
        if passed:
            del self.thresholds[:passed]
            self._evaluate(state)

    def on_train_end(self, args, state, control, **kwargs):
        self._evaluate(state)

    # -- what ------------------------------------------------------------------------------
    def _evaluate(self, state) -> None:
        """Every rank: generate its share of the prompts, score it; rank 0 gathers the scores and writes.

        Every rank takes part because syncing weights into vLLM and generating with a ZeRO-3 or
        FSDP model gather sharded parameters, which is a collective: rank 0 alone would wait forever.
        """
        started = time.perf_counter()
        rank, world = rank_and_world()
        if self.point == 0 and rank == 0 and world > 1:
            zero_stage, fsdp_version = trl_adapter.dist_description(self.trainer)
            params = list(self.trainer.model.parameters())
            # ZeRO-3 keeps a tensor whole on every rank (ds_persist) below stage3_param_persistence_threshold
            split = sum(1 for p in params if getattr(p, "ds_persist", True) is False)
            print(f"[grpo-ablate] evaluation on {world} ranks (ZeRO stage {zero_stage}, "
                  f"FSDP {fsdp_version}; {split} of {len(params)} parameter tensors "
                  "partitioned across ranks)", flush=True)
        indices, completion_ids = self._generate(state, rank, world)
        scored = self._score(indices, completion_ids, state) if indices else []
        parts = all_gather(scored)
        elapsed = time.perf_counter() - started
        self.seconds += elapsed
        self.recorder.paused_seconds += elapsed
        if self.stopper is not None:
            self.stopper.paused_seconds += elapsed
        if rank == 0:
            by_index: dict[int, tuple[list[float], list[Any], list[list[int]]]] = {}
            for part in parts:
                for i, rewards, completions, ids in part:
                    by_index.setdefault(i, (rewards, completions, ids))  # a TP group's ranks return the same prompts
            missing = [i for i in range(len(self._texts)) if i not in by_index]
            if missing:
                raise RuntimeError(f"evaluation: {len(missing)} held-out prompts were scored by no rank (first: {missing[:5]})")
            ordered = [by_index[i] for i in range(len(self._texts))]
            rewards = [r for o in ordered for r in o[0]]
            completions = [c for o in ordered for c in o[1]]
            ids = [x for o in ordered for x in o[2]]
            per_prompt = [sum(o[0]) / len(o[0]) for o in ordered]
            row = self._row(state, elapsed, rewards, per_prompt, completions, ids)
            row["ranks"] = world
            with open(self.trial_dir / EVAL_FILE, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
        self.point += 1

    def _score(self, indices: list[int], completion_ids: list[list[list[int]]], state) -> list[tuple]:
        """[(prompt index, rewards of its samples, completions, ids)] for this rank's prompts."""
        flat_prompts, flat_completions, flat_ids = [], [], []
        columns: dict[str, list[Any]] = {c: [] for c in self._columns}
        for i, per_prompt in zip(indices, completion_ids):
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
        return [(i, rewards[k * s:(k + 1) * s], flat_completions[k * s:(k + 1) * s], flat_ids[k * s:(k + 1) * s])
                for k, i in enumerate(indices)]

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
        if inspect.iscoroutine(values):
            values = asyncio.run(values)
        return list(values)

    def _prompt_text(self, prompt: Any) -> str:
        if isinstance(prompt, list):
            return self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        return prompt

    # -- how -------------------------------------------------------------------------------
    def _generate(self, state, rank: int, world: int) -> tuple[list[int], list[list[list[int]]]]:
        """(this rank's prompt indices, completion token ids per prompt), through the training backend."""
        vllm = trl_adapter.vllm_generation(self.trainer)
        n = len(self._texts)
        if vllm is None:
            return self._generate_hf(shard(n, world, rank), pad_to=math.ceil(n / world) if world > 1 else 0)
        self._sync_vllm(vllm, state)  # every rank: under ZeRO-3 each parameter's gather is a collective
        if vllm.mode == "server":  # only rank 0 holds the client; it asks for every prompt
            indices = list(range(n)) if rank == 0 else []
            return indices, (self._generate_server(vllm.vllm_client, indices) if indices else [])
        tp = max(1, int(getattr(vllm, "tensor_parallel_size", 1) or 1))
        indices = list(shard(n, max(1, world // tp), rank // tp))  # a TP group shares one engine: same prompts
        return indices, self._generate_colocate(vllm, indices)

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

    def _prompt_ids(self, indices: Sequence[int]) -> list[list[int]]:
        """Token ids of the prompts as training sees them (no special tokens added: the template has them)."""
        return [self.tokenizer(self._texts[i], add_special_tokens=False)["input_ids"] for i in indices]

    def _generate_hf(self, indices: range, *, pad_to: int) -> tuple[list[int], list[list[list[int]]]]:
        """transformers' generate on this rank's prompts, padded to `pad_to` so every rank calls it alike.

        Under ZeRO-3 and FSDP each forward pass gathers parameters (transformers syncs the ranks'
        token loops itself); the number and size of generate calls must match on every rank too,
        so a short shard is filled with repeats of a prompt whose completions are dropped.
        """
        # lazy: TRL only when the trial generates; this module imports without it
        from trl.models import unwrap_model_for_generation

        mine = list(indices)
        work = mine + [mine[0] if mine else 0] * max(0, pad_to - len(mine))
        trainer = self.trainer
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                         gather_deepspeed3_params=trainer.args.ds3_gather_for_generation) as model, \
                torch.no_grad(), trl_adapter.full_params(trainer):
            # synced: every rank steps until all are done (transformers turns it on by itself only for
            # ZeRO-3 and FSDP; here for any multi-rank run: one small all-reduce a token)
            out = self.generate_with(model, work, synced=pad_to > 0)
        return mine, out[:len(mine)]

    def generate_with(self, model: Any, work: Sequence[int], *, synced: bool = False) -> list[list[list[int]]]:
        """Completion ids per prompt of `work` (held-out indices) from a transformers model, at the study's fixed
        decoding, batched, in eval mode, sampling seeded by EVAL_SEED on a forked RNG (training's stream untouched).
        The trial's own model (above) and a command trial's saved checkpoints (score_model) go through here."""
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
        out: list[list[list[int]]] = []
        device = next(model.parameters()).device
        devices = [device] if device.type == "cuda" else []
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=devices):
                torch.manual_seed(EVAL_SEED)
                for lo in range(0, len(work), self.batch_size):
                    batch = [self._texts[i] for i in work[lo:lo + self.batch_size]]
                    enc = tok(batch, return_tensors="pt", padding=True, padding_side="left",
                              add_special_tokens=False).to(device)
                    generated = model.generate(**enc, generation_config=config, synced_gpus=synced)
                    new = generated[:, enc["input_ids"].shape[1]:].tolist()
                    for i in range(len(batch)):
                        out.append([self._cut(new[i * self.samples + j]) for j in range(self.samples)])
        finally:
            model.train(was_training)
        return out

    def score_model(self, model: Any, state: Any) -> dict[str, Any]:
        """One evaluation point on a model outside a trainer (a command trial's checkpoint: trainer/command_worker.py),
        in this one process: generate every held-out prompt, score, write the row; the row."""
        started = time.perf_counter()
        indices = list(range(len(self._texts)))
        ordered = [(r, c, i) for _, r, c, i in self._score(indices, self.generate_with(model, indices), state)]
        elapsed = time.perf_counter() - started
        self.seconds += elapsed
        rewards = [r for o in ordered for r in o[0]]
        row = self._row(state, elapsed, rewards, [sum(o[0]) / len(o[0]) for o in ordered],
                        [c for o in ordered for c in o[1]], [x for o in ordered for x in o[2]])
        row["ranks"] = 1
        with open(self.trial_dir / EVAL_FILE, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        self.point += 1
        return row

    def _sync_vllm(self, vllm: Any, state) -> None:
        """Load this step's weights into the engine, as TRL does before its own generate.

        With sleep mode TRL leaves the engine asleep after each generate (weights discarded), so
        the weights are re-pushed whenever they sleep, even at an unchanged step.
        """
        if state.global_step != trl_adapter.loaded_step(self.trainer) or trl_adapter.weights_sleeping(vllm):
            vllm.sync_weights()  # wakes the weights first under sleep mode
            trl_adapter.mark_loaded_step(self.trainer, state.global_step)

    def _sampling(self) -> dict[str, Any]:
        """The evaluation's decoding, the same in both vLLM modes; seeded so every arm draws alike."""
        return {"n": self.samples, "temperature": self.temperature, "top_p": 1.0, "top_k": 0,
                "max_tokens": self.max_length, "seed": EVAL_SEED}

    def _generate_colocate(self, vllm: Any, indices: list[int]) -> list[list[list[int]]]:
        """The trainer's colocated engine, in TRL's order: (weights woken and synced) -> wake the KV
        cache -> generate -> sleep again (level 2, as TRL leaves it)."""
        from vllm import SamplingParams  # optional: vLLM (the gpu extra), only for a colocated engine

        # a seed per held-out prompt (from its index, so a rank's share draws what one process would):
        # one seed for all gave every prompt the same random draws (request_seeds.py)
        sampling = self._sampling()
        seeds = prompt_seeds(int(sampling["seed"]), max(indices, default=-1) + 1, int(sampling["n"]))
        params = [SamplingParams(**{**sampling, "seed": seeds[i]}) for i in indices]
        prompts = [{"prompt_token_ids": ids} for ids in self._prompt_ids(indices)]
        sleep = bool(getattr(vllm, "enable_sleep_mode", False))
        if sleep:
            vllm.llm.wake_up(tags=["kv_cache"])  # vLLM schedules nothing until the engine is fully awake
        try:
            outputs = vllm.llm.generate(prompts, sampling_params=params, use_tqdm=False) if prompts else []
        finally:
            if sleep:
                vllm.llm.sleep(level=2)
                trl_adapter.mark_weights_sleeping(vllm)
        return [[self._cut(c.token_ids) for c in o.outputs] for o in outputs]

    def _generate_server(self, client: Any, indices: list[int]) -> list[list[list[int]]]:
        return server_completions(client, self._prompt_ids(indices), self._sampling(), self._cut)


def shard(n: int, parts: int, part: int) -> range:
    """The contiguous slice of n items that part `part` of `parts` takes (ceil(n/parts) each; the last ones may be short or empty)."""
    per = math.ceil(n / parts) if parts > 0 else n
    return range(min(n, part * per), min(n, (part + 1) * per))


def server_completions(client: Any, prompt_ids: list[list[int]], sampling: dict[str, Any],
                       cut: Callable[[Sequence[int]], list[int]] = list) -> list[list[list[int]]]:
    """Completion ids per prompt from TRL's VLLMClient; the seed travels in the request's generation kwargs.

    TRL's client sends one seed for the whole request, so here every prompt shares the seed's
    draws (the colocate branch seeds each prompt); at temperature 0, the default, that changes nothing.

    vLLM seeds a request's sampling from the request's own `seed`: without it two arms' evaluation
    draws would differ by chance, not by their weights (colocate passes the seed in SamplingParams).
    """
    kw = dict(sampling)
    n, seed = int(kw.pop("n")), kw.pop("seed")
    result = client.generate(prompts=prompt_ids, n=n, temperature=kw["temperature"], top_p=kw["top_p"], top_k=kw["top_k"],
                             max_tokens=kw["max_tokens"], generation_kwargs={"seed": seed})
    flat = result["completion_ids"]
    return [[cut(flat[i * n + j]) for j in range(n)] for i in range(len(prompt_ids))]

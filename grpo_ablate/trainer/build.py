"""Build one trial from its spec: model, tokenizer, prompts (trainer/prompts.py), rewards,
GRPOConfig, GRPOTrainer, and the callbacks (recorder, stop switch, held-out evaluator).

The single place where a study's sections meet TRL. Every trial builds a *fresh* GRPOConfig
from the raw keyword arguments (TRL fills generation_batch_size and steps_per_generation in
__post_init__, so a copied or rebuilt config raises "both configured"), then a fresh trainer.
No Optuna here: a trial is just a run, so `run-one`, the tests and the benchmarks use it as is.

    python -m grpo_ablate.trainer.worker runs/tiny-cpu/trials/00000/spec.json   # builds through this module
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

import torch

from grpo_ablate.core.precision import MIXED_PRECISION_ENV, trainer_flags, trial_precision
from grpo_ablate.trl_facts.fields import trl_default
from grpo_ablate.core.cost import full_run_steps, lr_schedule_of
from grpo_ablate.core.space import Rounds
from grpo_ablate.core.schedule import Schedule, prompts_per_round

from .builtin.model import builtin_model_path, is_builtin_model
from .builtin.tokenizer import dataset_characters, format_characters, load_builtin_tokenizer, unencodable_prompts
from .prompts import _load_source, load_prompt_sets
from grpo_ablate.contract import checkpoints
from .callbacks import MetricsRecorder, StopSwitch
from .checkpoint_callback import Checkpointer
from .evaluation import Evaluator
from .rewards import RewardContext, build_rewards, record_groups
from grpo_ablate.contract.spec import BudgetSpec, DataSpec, EvaluationSpec, ModelSpec, TrialSpec
from grpo_ablate.contract.files import trainer_dir
from .vllm_cpu import keep_weights_loadable
from grpo_ablate.core.attention import AUTO, flash_attn_imports, resolve_attn

__all__ = [
    "BuiltTrial",
    "build_config_kwargs",
    "build_trial",
    "load_model_and_tokenizer",
]


@dataclass
class BuiltTrial:
    """A ready-to-train trial and what the worker records about building it."""

    trainer: Any
    config: Any
    recorder: MetricsRecorder
    stopper: StopSwitch
    evaluator: Any  # trainer/evaluation.Evaluator, or None without an `evaluation:` section
    model_path: str
    reward_names: list[str]
    reward_weights: list[float]
    load_seconds: float
    build_seconds: float
    resume_from: str | None = None  # the checkpoint this run resumes (trainer.train(resume_from_checkpoint=...))


def _cuda() -> bool:
    return torch.cuda.is_available()


def mixed_precision(spec: TrialSpec, cuda: bool | None = None) -> str:
    """The trial's mixed precision (grpo_ablate/core/precision.py): the GRPOConfig flags and accelerate's
    ACCELERATE_MIXED_PRECISION (which DeepSpeed's bf16/fp16 follow) are both set from it. `cuda`: whether the
    trial's machine has CUDA (the dry run asks for the node's answer); None: this machine's."""
    return trial_precision(spec.trainer, os.environ.get(MIXED_PRECISION_ENV), cuda=_cuda() if cuda is None else cuda)


def claim_rendezvous_port(env: dict[str, str] | Any = os.environ) -> int | None:
    """A free MASTER_PORT of its own for a one-process trial, before colocated vLLM starts torch.distributed.

    TRL fills MASTER_PORT only when it is unset (or "auto"/"0"), trying 29500 first
    (trl/trainer/utils.py ensure_master_addr_port): two trials starting together both find 29500
    free and the second to bind it dies with EADDRINUSE. A port the kernel hands out (bind to 0)
    differs per process. Under torchrun/accelerate (WORLD_SIZE set) the launcher already gave the
    trial a free port; a port the user set is kept. Returns the port set, else None.
    """
    if env.get("WORLD_SIZE", "1") != "1" or env.get("MASTER_PORT", "").strip().lower() not in ("", "0", "auto"):
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env["MASTER_ADDR"] = env.get("MASTER_ADDR") or "127.0.0.1"
    env["MASTER_PORT"] = str(port)
    return port


# --------------------------------------------------------------------------------------------
# Model and tokenizer
# --------------------------------------------------------------------------------------------


def resolve_model_path(model: ModelSpec, data: DataSpec, log: Callable[[str], None] = print) -> str:
    """A hub id or local path as given; `builtin:*` resolved to its cached folder (built on first use)."""
    name = model.name_or_path
    if is_builtin_model(name):
        # over a user's dataset (no task): a tiny model that knows the dataset's characters and those its prompt
        # formatting adds (system prompt, chat template, separators): the CPU smoke test of a recipe
        chars = "" if data.task else "".join(sorted(set(dataset_characters(_load_source(data)))
                                                          | set(format_characters(data))))
        return os.fspath(builtin_model_path(name, data.task, log=log, dataset_chars=chars))
    return name


def load_model_and_tokenizer(model: ModelSpec, data: DataSpec, log: Callable[[str], None] = print,
                             path: str | None = None):
    """(model, tokenizer, path). The model is loaded here, not by TRL, so its time is measured. `path`: the model's
    folder when the caller resolved it already (resolve_model_path).

    dtype follows TRL's rule (float32 unless the study says otherwise); padding is on the left,
    which generation needs; a tokenizer without a pad token pads with its end token.
    """
    # lazy: model classes only when a model is built; trainer/dry_run.py imports this module
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = path or resolve_model_path(model, data, log)
    common: dict[str, Any] = {"trust_remote_code": model.trust_remote_code}
    if model.revision:
        common["revision"] = model.revision
    kwargs: dict[str, Any] = dict(common)
    dtype = model.dtype
    kwargs["dtype"] = "auto" if dtype == "auto" else getattr(torch, dtype or "float32")
    attn = _attn_implementation(model.attn_implementation, log)
    if attn:
        kwargs["attn_implementation"] = attn
    tokenizer = (load_builtin_tokenizer(path) if is_builtin_model(model.name_or_path)
                 else AutoTokenizer.from_pretrained(path, padding_side="left", **common))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    loaded = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    return loaded, tokenizer, path


def _attn_implementation(requested: str | None, log: Callable[[str], None]) -> str | None:
    """`auto` -> flash_attention_2 when flash_attn really imports here, else sdpa (grpo_ablate/core/attention.py)."""

    if requested != AUTO:
        return requested
    chosen = resolve_attn(requested, _cuda() and flash_attn_imports())
    log(f"model.attn_implementation auto: {chosen}")
    return chosen


# --------------------------------------------------------------------------------------------
# GRPOConfig
# --------------------------------------------------------------------------------------------


def _checkpointing_field() -> str:
    from trl import GRPOConfig  # lazy: TRL loads in the trial's timed build, not at import (trainer/dry_run.py)

    names = {f.name for f in dataclasses.fields(GRPOConfig)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def build_config_kwargs(spec: TrialSpec, *, world_size: int, reward_weights: list[float],
                        cuda: bool | None = None) -> dict[str, Any]:
    """GRPOConfig keyword arguments: the study's, verbatim, plus what a trial must own.

    `world_size` no longer changes them (the plan resolved the batch arithmetic for its world size;
    build_trial checks TRL agrees); kept for the dry run's call.

    Always: output_dir inside the trial folder, logging_steps=1 (metrics.jsonl is per step).
    With checkpoints (spec.checkpoint): save_strategy steps, every checkpoint whole (model and
    optimizer), older ones removed by the Checkpointer rather than by save_total_limit (which
    removes the old one before the new one is complete). Unless the study set them: report_to
    none, save_strategy no, no progress bar (the parent shows progress). bf16/fp16 from
    mixed_precision() (off without CUDA); use_cpu without CUDA (`cuda`: the trial machine's answer, for the dry run
    and validate's trial check planning a GPU node from a laptop; None: this machine's). Built-in model: no gradient
    checkpointing (it only slows a tiny model). vLLM mode from the hardware section; the plan's G
    (a schedule's first phase: trainer/scheduled.py changes it per round) and max_steps;
    reward_weights from the rewards when one is not 1.
    """
    kw = dict(spec.trainer)
    g = spec.num_generations
    if g is not None:
        kw["num_generations"] = g.phases[0] if isinstance(g, Schedule) else int(g)
    kw["output_dir"] = os.fspath(trainer_dir(spec.trial_dir))
    kw["logging_strategy"] = "steps"
    kw["logging_steps"] = 1
    kw.setdefault("report_to", "none")
    if _checkpointing(spec):
        # which steps save is the Checkpointer's decision (callbacks.py); save_steps is only a placeholder
        kw.update(save_strategy="steps", save_steps=1, save_total_limit=None, save_only_model=False)
    else:
        kw.setdefault("save_strategy", "no")
    kw.setdefault("disable_tqdm", True)
    cuda = _cuda() if cuda is None else cuda
    kw.update(trainer_flags(mixed_precision(spec, cuda)))
    if not cuda:
        kw["use_cpu"] = True
    if is_builtin_model(str(spec.model.name_or_path)):
        # Checkpointing only slows a tiny model; transformers >= 5.x names it activation_checkpointing
        # (gradient_checkpointing is its deprecated alias, which TRL still defaults to True).
        kw.pop("gradient_checkpointing", None)
        kw[_checkpointing_field()] = False
        kw.setdefault("ddp_find_unused_parameters", False)  # every parameter is used: skip DDP's extra graph walk
    vllm_mode = spec.hardware.vllm.mode
    if vllm_mode in ("colocate", "server"):
        kw.setdefault("use_vllm", True)
        kw.setdefault("vllm_mode", vllm_mode)
    if spec.max_steps is not None:
        kw["max_steps"] = spec.max_steps
    if "reward_weights" not in kw and any(w != 1.0 for w in reward_weights):
        kw["reward_weights"] = list(reward_weights)
    return kw


# --------------------------------------------------------------------------------------------
# The whole trial
# --------------------------------------------------------------------------------------------


def _checkpoints_asked(spec: TrialSpec) -> bool:
    """Checkpoints every so often (study.checkpoint_steps), or a prefix's final one (its branches start there)."""
    return spec.checkpoint is not None and (spec.checkpoint.every is not None or _final_asked(spec))


def _final_asked(spec: TrialSpec) -> bool:
    """A branching study's prefix: a checkpoint sealed at its last step, where every branch of its seed starts."""
    return spec.checkpoint is not None and spec.checkpoint.final


def _checkpointing(spec: TrialSpec) -> bool:
    """Whether the trial saves checkpoints for a retry: asked for, and not a G schedule, whose round
    state (phase, pass rates) a checkpoint does not hold. A schedule's trainer keeps the study's own
    save settings (else save_steps=1 with nobody to remove the old ones: a checkpoint every step)."""
    return _checkpoints_asked(spec) and not isinstance(spec.num_generations, Schedule)


def _check_rounds(spec: TrialSpec, config: Any) -> None:
    """The plan's generation cadence is the one TRL derived: else the plan was made for another
    launch shape (a world size other than hardware.num_processes) and its arithmetic is wrong."""
    built = Rounds(int(config.steps_per_generation), int(config.gradient_accumulation_steps), int(config.num_iterations or 1))
    if built != spec.rounds:
        raise ValueError(f"the trial plan's rounds {spec.rounds} differ from TRL's {built} at {config.world_size} "
                         f"process(es) (hardware.num_processes {spec.num_processes}); launch it with the plan's world size")


def _start_from(spec: TrialSpec, checkpointer: Any, log: Callable[[str], None]) -> str | None:
    """The branch point's folder, checked as a resume checks its own checkpoint before it is loaded.

    With the prefix spec's fingerprint (StartFrom.fingerprint): the manifest, every file's size and SHA-256, the
    step and the fingerprint (checkpoints.verify; a prefix whose tensors were zeroed in place, another seed's
    prefix copied over it, a prefix of an earlier study file all fail here): BranchPointInvalid. Without one (a
    folder another tool saved): a trainer checkpoint holding the plan's step.

    The trainer resumes its weights, optimizer, scheduler and RNG states; of the package's state
    only the data sampler's goes on (Checkpointer.branch_from). The branch's metrics, completions
    and seconds start at zero: its result is about its own steps, and the prefix's compute stays
    counted once, in the prefix's trial."""
    start = spec.start_from
    assert start is not None
    folder = Path(start.checkpoint)
    found = checkpoints.Checkpoint(folder, start.step)
    if start.fingerprint is not None:
        why = checkpoints.verify(found, start.fingerprint) if folder.is_dir() else f"{folder} is gone"
        if why is not None:
            raise checkpoints.BranchPointInvalid(f"the branch point cannot be trusted: {why}")
    else:
        state = folder / "trainer_state.json"
        if not state.is_file():
            raise ValueError(f"start_from.checkpoint {folder}: not a trainer checkpoint (no trainer_state.json)")
        held = json.loads(state.read_text()).get("global_step")
        if held != start.step:
            raise ValueError(f"start_from: {folder} holds step {held}, the plan says {start.step}")
    if checkpointer is not None and (folder / checkpoints.STATE_DIR / checkpoints.CLOCK_FILE).is_file():
        checkpointer.branch_from(found)
    log(f"starting from the branch point {folder} (step {start.step}" + (", verified" if start.fingerprint else "") + ")")
    return os.fspath(folder)


def build_trial(spec: TrialSpec, *, log: Callable[[str], None] = print, echo: bool = True) -> BuiltTrial:
    """Build the config, load the model and prompts, build the trainer.

    GRPOConfig comes first, before from_pretrained: a TrainingArguments with a ZeRO-3 DeepSpeed
    config (accelerate's plugin, `zero3_init_flag: true`) is what makes transformers load the
    model partitioned (zero.Init), each rank holding its shard rather than the whole model in
    host memory; created after the load, it is too late. A fresh GRPOConfig per trial, from the
    raw keyword arguments (facts.md). Timing: rewards, model and prompts are load_seconds; the
    config and the trainer build_seconds.
    """
    from trl import GRPOConfig, GRPOTrainer  # here: TRL loads inside the timed build (build_seconds)

    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    started = time.perf_counter()
    ctx = RewardContext(task=spec.data.task, max_completion_length=spec.trainer.get("max_completion_length") or trl_default("max_completion_length"))
    funcs, names, weights = build_rewards(spec.rewards, ctx)
    # before GRPOConfig: a built-in model built (once, cached) where no ZeRO-3 config is alive yet to partition it
    model_path = resolve_model_path(spec.model, spec.data, log)
    load_seconds = time.perf_counter() - started

    started = time.perf_counter()
    from .scheduled import ScheduledGRPOTrainer  # here: TRL's trainer modules load inside the timed build

    kwargs = build_config_kwargs(spec, world_size=world_size, reward_weights=weights)
    schedule = spec.num_generations if isinstance(spec.num_generations, Schedule) else None
    # accelerate's DeepSpeed plugin reads the precision from here, after the flags were decided from it
    os.environ[MIXED_PRECISION_ENV] = mixed_precision(spec)
    config = GRPOConfig(**kwargs)  # alive through the load below: transformers' ZeRO-3 check reads it
    _check_rounds(spec, config)
    build_seconds = time.perf_counter() - started

    started = time.perf_counter()
    model, tokenizer, path = load_model_and_tokenizer(spec.model, spec.data, log, path=model_path)
    # The same prompt set for every trial of a study: the trial's seed varies sampling, not data.
    dataset, held_out = load_prompt_sets(spec.data, spec.evaluation, tokenizer, log=log)
    if is_builtin_model(str(spec.model.name_or_path)):
        bad = unencodable_prompts(dataset["prompt"][:], tokenizer)  # the column read whole: iterating it reads row by row
        if bad:  # before training: generate would fail on an empty prompt, or train on <unk>
            raise ValueError(f"{spec.model.name_or_path} cannot encode these prompts ({'; '.join(bad)}); "
                             f"fix or filter those rows (data.dataset)")
    load_seconds += time.perf_counter() - started

    started = time.perf_counter()
    needed = prompts_per_round(config.generation_batch_size, schedule if schedule is not None else config.num_generations)
    if len(dataset) < needed:
        raise ValueError(
            f"the dataset has {len(dataset)} prompts but each generation round needs {needed} "
            f"(generation_batch_size {config.generation_batch_size} / num_generations {config.num_generations}); "
            "use more prompts (data.num_prompts / data.max_samples) or a smaller generation batch"
        )
    if config.reward_weights is not None and len(config.reward_weights) != len(funcs):
        raise ValueError(
            f"trainer.reward_weights has {len(config.reward_weights)} values for {len(funcs)} rewards {names}"
        )
    effective_weights = list(config.reward_weights) if config.reward_weights is not None else [1.0] * len(funcs)
    # groups.jsonl's recorder joins TRL's reward functions with weight 0 (rewards.record_groups: no reward changes)
    trl_funcs, config.reward_weights, groups = record_groups(funcs, names, effective_weights, config.generation_batch_size)
    recorder = MetricsRecorder(
        spec.trial_dir,
        reward_names=names,
        reward_weights=effective_weights,
        num_generations=config.num_generations,
        generation_batch_size=config.generation_batch_size,
        completions_per_step=config.per_device_train_batch_size * config.world_size * config.gradient_accumulation_steps,
        groups=groups,
        echo=echo,
    )
    stopper = StopSwitch(spec.trial_dir, max_tokens=spec.budget.tokens, max_seconds=spec.budget.seconds)
    evaluator = None
    if held_out is not None:
        evaluator = _evaluator(spec, config, held_out, tokenizer, funcs, effective_weights, recorder, stopper)
    if config.use_vllm and config.vllm_mode == "colocate":
        claim_rendezvous_port()  # TRL's own pick (29500 first) collides when trials run side by side
        keep_weights_loadable(log)  # vLLM's CPU build packs weights away from TRL's weight sync
    checkpointer = None
    if spec.checkpoint is not None and _checkpointing(spec):
        checkpointer = Checkpointer(spec.trial_dir, every=spec.checkpoint.every, recorder=recorder, stopper=stopper,
                                    evaluator=evaluator, round_steps=spec.rounds.period_steps,
                                    fingerprint=checkpoints.spec_fingerprint(json.loads(spec.to_json())),
                                    final=_final_asked(spec))
    elif _checkpoints_asked(spec):  # a schedule's round state (phase, pass rates) is not in a checkpoint
        log("checkpoints: off for a G schedule (its round state is not saved); a retried trial starts over")
    scheduled: dict[str, Any] = {"schedule": schedule, "rounds": spec.rounds, "events_dir": spec.trial_dir} if schedule else {}
    if schedule is not None and schedule.kind != "schedule":
        # dynamic sampling generates more than it trains on: a completions budget counts what it generated
        # (a max_steps budget too: it stands for max_steps x the completions a fixed-G step generates)
        if spec.completions:
            scheduled["completions_budget"] = int(spec.completions)
        if schedule.kind == "adaptive":
            prior = spec.advise_prior  # resolved by the parent from advise.json (study/trial_spec.py)
            scheduled["prior"] = prior
            log(f"per-prompt G {schedule.label}: prior of each prompt's pass rate "
                + (f"Beta({prior[0]:g}, {prior[1]:g}) from advise.json" if prior else "from the running pass rate (no advise.json fit)"))
    trainer = (ScheduledGRPOTrainer if schedule else GRPOTrainer)(
        **scheduled,
        model=model,
        reward_funcs=trl_funcs,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[recorder, stopper] + [c for c in (evaluator, checkpointer) if c is not None],
    )
    recorder.attach(trainer)
    _lr_schedule(trainer, spec.budget, spec.generated_per_step, len(dataset), log)
    if evaluator is not None:
        evaluator.attach(trainer)
    if config.disable_tqdm:
        # The printer dumps every step's full dict; the recorder's one-line echo is enough for log.txt.
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    resume = checkpointer.choose(log) if checkpointer is not None else None  # verified, else start over (said why)
    if resume is not None:
        log(f"resuming from {resume.path.name} (step {resume.step}); its metrics and clock continue")
    resume_from = os.fspath(resume.path) if resume is not None else None
    if resume_from is None and spec.start_from is not None:
        resume_from = _start_from(spec, checkpointer, log)
    build_seconds += time.perf_counter() - started
    return BuiltTrial(
        trainer=trainer,
        config=config,
        recorder=recorder,
        stopper=stopper,
        evaluator=evaluator,
        model_path=path,
        reward_names=names,
        reward_weights=effective_weights,
        load_seconds=load_seconds,
        build_seconds=build_seconds,
        resume_from=resume_from,
    )


def _lr_schedule(trainer: Any, budget: BudgetSpec, generated_per_step: float, prompts: int,
                 log: Callable[[str], None]) -> None:
    """budget.lr_schedule "prefix": the scheduler is built for the recipe's full run, and the trial stops at
    its own max_steps, so step k has the learning rate the full run has at step k (warmup included, as a
    fraction of the full run). "compressed" leaves transformers' schedule over the trial's own steps."""
    if lr_schedule_of(asdict(budget)) != "prefix":
        return
    full = full_run_steps(budget.full_run, generated_per_step, prompts)
    steps = trainer.args.max_steps
    if not full or not steps or steps <= 0:
        log("learning-rate schedule: compressed into the trial (the full run's length is not known)")
        return
    if full <= steps:
        return
    build = trainer.create_scheduler

    def create_scheduler(num_training_steps: int, optimizer: Any = None) -> Any:
        return build(num_training_steps=max(num_training_steps, full), optimizer=optimizer)

    trainer.create_scheduler = create_scheduler
    log(f"learning-rate schedule: the first {steps} of the full run's {full} steps (budget.lr_schedule: prefix)")


def _evaluator(spec: TrialSpec, config: Any, prompts: Any, tokenizer: Any, funcs: list, weights: list[float],
               recorder: MetricsRecorder, stopper: StopSwitch):
    given = spec.evaluation or EvaluationSpec()
    settings = replace(given, max_completion_length=given.max_completion_length or config.max_completion_length)
    return Evaluator(spec.trial_dir, prompts=prompts, tokenizer=tokenizer, reward_funcs=funcs, reward_weights=weights,
                     settings=settings, unit=spec.eval_budget.unit, total=spec.eval_budget.total, recorder=recorder,
                     stopper=stopper)

"""The callback that writes a trial's checkpoints and resumes one: sealed units (checkpoints.py), exact resumes.

    grpo-ablate run studies/tiny-cpu.yaml    # a trial killed after a checkpoint resumes there, bit for bit

What a resumed run's future depends on, and where each is kept:
- weights, optimizer, scheduler, the global RNGs (python, numpy, torch, CUDA): the trainer's own files;
- the data order: TRL's RepeatSampler draws one permutation per epoch from its own torch
  Generator, and a resumed trainer builds a fresh sampler whose generator starts at the seed, so a
  resume in epoch k > 0 would replay epoch 0's order. The clock keeps the generator's state at the
  start of the epoch the resumed run re-enters (`sampler_state`), put back at that epoch's begin;
- which groups go to groups.jsonl (the recorder's sampler), the completions, tokens and seconds
  counted, the evaluation points passed: the clock.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import torch
from torch.utils.data import Sampler
from transformers import TrainerCallback

from grpo_ablate.contract import checkpoints
from grpo_ablate.contract.cadence import AUTO_MIN_SECONDS, interval_steps
from grpo_ablate.contract.files import trainer_dir
from .collective import all_gather, from_rank0, rank_and_world

if TYPE_CHECKING:
    from .callbacks import MetricsRecorder, StopSwitch

__all__ = ["Checkpointer", "restore_failed"]


def _sampler_generator(loader: Any) -> "torch.Generator | None":
    """The torch Generator of the training data's sampler (TRL's RepeatSampler), however accelerate wrapped it."""
    seen: set[int] = set()
    todo = [loader]
    while todo:
        item = todo.pop(0)
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        generator = getattr(item, "generator", None)
        if isinstance(item, Sampler) and isinstance(generator, torch.Generator):
            return generator
        for name in ("batch_sampler", "sampler", "base_dataloader"):
            todo.append(getattr(item, name, None))
    return None


class Checkpointer(TrainerCallback):
    """Checkpoint at whole generation rounds and when the parent interrupts the trial; resume a checkpoint.

    The trainer writes its folder (save_strategy "steps") under a staging name; this callback
    decides when: every `interval` optimizer steps (cadence.interval_steps from the trial's
    max_steps), and at an interrupt (a stop the parent asked for, which queues the trial again),
    never inside a round nor at the last step (the trial is complete then), except with `final`:
    a branching study's prefix seals its last step, which every branch of its seed starts from. With "auto", a
    checkpoint is also skipped until `min_seconds` of training passed since the last one: a short
    trial saves none, a long one loses at most ~10% of itself. Rank 0 decides, every rank follows
    (saving is collective under ZeRO/FSDP). Once every rank has written its part, rank 0 seals the
    folder (checkpoints.seal: the per-step files, the clock, the manifest with the spec
    `fingerprint`, fsync, rename). Register it after the recorder, the stop switch and the
    evaluator: it reads what they decided for the step. Saving time is kept out of training time.

    `choose(log)` picks the checkpoint to resume (verified, else none: the reason is logged) and
    puts its clock back; `restored` turns true when the first step after the resume begins.
    """

    def __init__(self, trial_dir: str | Path, *, every: int | str | None, recorder: "MetricsRecorder", stopper: "StopSwitch",
                 fingerprint: str, evaluator: Any = None, round_steps: int = 1, min_seconds: float | None = None,
                 final: bool = False) -> None:
        self.trial_dir = Path(trial_dir)
        self.every = every
        self.recorder = recorder
        self.stopper = stopper
        self.evaluator = evaluator
        self.fingerprint = fingerprint
        self.round_steps = max(1, int(round_steps))
        self.min_seconds = (AUTO_MIN_SECONDS if every == "auto" else 0.0) if min_seconds is None else min_seconds
        self.final = final  # also seal the last step (a branching study's prefix: its branches start there)
        self.interval: int | None = None
        self.resumed_step: int | None = None
        self.restored = False  # a resumed run's first step began: every restore is behind it
        self.saved_at_seconds = 0.0  # training seconds at the last checkpoint (or the resumed one)
        self._logged_at: float | None = None
        self._generator: torch.Generator | None = None
        self._epoch_start_state: torch.Tensor | None = None
        self._resume_sampler: list[int] | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.interval = interval_steps(self.every, int(state.max_steps or 0), self.round_steps)
        state.save_steps = self.interval or 0

    def on_epoch_begin(self, args, state, control, train_dataloader=None, **kwargs):
        generator = _sampler_generator(train_dataloader)
        self._generator = generator
        if generator is None:
            return
        if self._resume_sampler is not None:  # the epoch a resumed run re-enters: its order as the first run drew it
            generator.set_state(torch.tensor(self._resume_sampler, dtype=torch.uint8))
            self._resume_sampler = None
        self._epoch_start_state = generator.get_state()

    def on_step_begin(self, args, state, control, **kwargs):
        if self.resumed_step is not None:
            self.restored = True

    def on_step_end(self, args, state, control, **kwargs):
        step, reason = state.global_step, self.stopper.stop_reason
        candidate = (self.interval is not None and step % self.round_steps == 0 and step < state.max_steps
                     and (step % self.interval == 0 or reason == "interrupted") and reason in (None, "interrupted"))
        save = 0
        if candidate:  # the same on every rank; the clock is rank 0's
            trained = self.recorder.train_seconds - self.saved_at_seconds
            save = from_rank0(int(trained >= self.min_seconds) if state.is_world_process_zero else 0)
        if self.final and step >= state.max_steps and reason in (None, "interrupted"):
            save = 1  # the prefix's last step: the shared state its branches start from, whatever it cost
        control.should_save = bool(save)
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        self._logged_at = time.perf_counter()

    def on_save(self, args, state, control, **kwargs):
        if self._logged_at is not None:  # the save's own time is not training time
            pause = time.perf_counter() - self._logged_at
            self.recorder.paused_seconds += pause
            self.stopper.paused_seconds += pause
            self._logged_at = None
        all_gather(None)  # every rank has written its part (ZeRO/FSDP shards) before the folder is sealed
        if state.is_world_process_zero:
            self.saved_at_seconds = self.recorder.train_seconds
            staging = trainer_dir(self.trial_dir) / f"checkpoint-{state.global_step}"
            checkpoints.seal(self.trial_dir, staging, step=state.global_step, fingerprint=self.fingerprint,
                             clock=self.clock(state.global_step, at_epoch_end=float(state.epoch or 0).is_integer()))
        all_gather(None)  # no rank goes on (and may be killed) believing a checkpoint exists before it is sealed

    def clock(self, step: int, *, at_epoch_end: bool = False) -> dict[str, Any]:
        r, e = self.recorder, self.evaluator
        # a resume re-enters the epoch this step is in (and replays its order), or, at an epoch's end, the next one
        sampler = self._generator.get_state() if at_epoch_end and self._generator is not None else self._epoch_start_state
        return {"step": step, "completions": r.completions_total, "tokens": r.tokens_total,
                "train_seconds": r.train_seconds, "stop_seconds": self.stopper.elapsed,
                "eval_point": getattr(e, "point", 0), "eval_seconds": getattr(e, "seconds", 0.0),
                "eval_thresholds_left": len(getattr(e, "thresholds", [])),
                "groups_rng": _jsonable(r._rng.getstate()),
                "sampler_state": None if sampler is None else sampler.tolist()}

    def choose(self, log: Callable[[str], None], *, rank: int | None = None) -> checkpoints.Checkpoint | None:
        """The verified checkpoint this trial resumes, its clock put back; None: the trial starts over (said in `log`).

        Rank 0 verifies and restores the files; the others take its step (one broadcast) and the clock.
        Any problem restoring the clock starts over as well: a resume never fails a trial.
        """
        rank = int(os.environ.get("RANK", "0")) if rank is None else rank
        grouped = rank_and_world()[1] > 1  # else (no process group yet) every rank verifies for itself
        found: checkpoints.Checkpoint | None = None
        if rank == 0 or not grouped:
            found, rejected = checkpoints.resumable(self.trial_dir, self.fingerprint)
        if rank == 0:
            for why in rejected:
                log(f"checkpoint not resumed: {why}")
            if found is None and rejected:
                log("no checkpoint passed its checks: the trial starts over from step 0")
            checkpoints.discard(self.trial_dir, keep=found)
        step = from_rank0(found.step if found is not None else -1) if grouped else (found.step if found else -1)
        if step < 0:
            return None
        found = found or checkpoints.Checkpoint(checkpoints.checkpoints_dir(self.trial_dir) / f"checkpoint-{step}", step)
        try:
            self.resume(found, files=rank == 0)
        except Exception as e:  # noqa: BLE001 - any failure to restore means start over
            log(f"checkpoint not resumed: {found.path.name}'s clock cannot be restored ({type(e).__name__}: {e}); starting over")
            self.forget(log=None)
            return None
        return found

    def forget(self, log: Callable[[str], None] | None) -> None:
        """Undo a resume (restoring failed): no clock carried, no checkpoint kept, no per-step rows left."""
        self.resumed_step = None
        self.restored = False
        self._resume_sampler = None
        self.saved_at_seconds = 0.0
        self.recorder.completions_total, self.recorder.tokens_total, self.recorder.resumed_seconds = 0, 0.0, 0.0
        self.stopper.resumed_seconds = 0.0
        checkpoints.discard(self.trial_dir)
        for name in checkpoints.CARRIED_FILES:
            (self.trial_dir / name).unlink(missing_ok=True)
        if log is not None:
            log("starting over")

    def branch_from(self, checkpoint: checkpoints.Checkpoint) -> None:
        """A branch starts from another trial's checkpoint (contract/spec.py's StartFrom): only the data sampler's
        state goes on, so the data order is the one a plain resume of that checkpoint would see. The branch's
        metrics, completions, tokens and seconds start at zero (its own steps; the prefix counts its own)."""
        sampler = checkpoint.clock.get("sampler_state")
        if sampler is not None and not (isinstance(sampler, list) and all(isinstance(b, int) and 0 <= b < 256 for b in sampler)):
            raise ValueError(f"{checkpoint.path}: sampler_state is not a list of bytes")
        self._resume_sampler = sampler

    def resume(self, checkpoint: checkpoints.Checkpoint, *, files: bool = True) -> None:
        """Put the clock of `checkpoint` back before training starts, and (`files`: rank 0) its per-step files."""
        clock = checkpoint.clock
        completions, tokens = int(clock["completions"]), float(clock["tokens"])
        seconds, stop_seconds = float(clock["train_seconds"]), float(clock["stop_seconds"])
        groups_rng = _tupled(clock["groups_rng"])
        sampler = clock.get("sampler_state")
        point, eval_seconds, left = int(clock["eval_point"]), float(clock["eval_seconds"]), int(clock["eval_thresholds_left"])
        if sampler is not None and not (isinstance(sampler, list) and all(isinstance(b, int) and 0 <= b < 256 for b in sampler)):
            raise ValueError("sampler_state is not a list of bytes")
        if files:
            checkpoints.restore_files(checkpoint, self.trial_dir)
        self.recorder.completions_total = completions
        self.recorder.tokens_total = tokens
        self.recorder.resumed_seconds = self.saved_at_seconds = seconds
        self.stopper.resumed_seconds = stop_seconds
        self.recorder._rng.setstate(groups_rng)  # which groups a round samples into groups.jsonl
        self._resume_sampler = sampler
        if self.evaluator is not None:
            self.evaluator.point, self.evaluator.seconds = point, eval_seconds
            del self.evaluator.thresholds[: max(0, len(self.evaluator.thresholds) - left)]
        self.resumed_step = checkpoint.step


def restore_failed(trainer: Any) -> "Checkpointer | None":
    """The trainer's Checkpointer when it resumed a checkpoint and failed before its first step (loading it); else None."""
    for callback in getattr(getattr(trainer, "callback_handler", None), "callbacks", []):
        if isinstance(callback, Checkpointer) and callback.resumed_step is not None and not callback.restored:
            return callback
    return None


def _jsonable(state: Any) -> Any:
    return [_jsonable(v) for v in state] if isinstance(state, tuple) else state


def _tupled(state: Any) -> Any:
    return tuple(_tupled(v) for v in state) if isinstance(state, list) else state


"""A GRPOTrainer whose num_generations follows a schedule (`4→8@40%`, `2→8@zero_std<0.3`), as one run.

    python -m grpo_ablate.trainer.worker runs/x/trials/00002/spec.json   # a spec whose num_generations is a schedule

Why a subclass rather than consecutive trainers: TRL reads G in three places only, all on the
trainer: the RepeatSampler (prompts per round = generation_batch_size / G, each repeated G
times), `_generate_and_score_completions` (the advantage grouping `rewards.view(-1, G)`), and
the vLLM path's prompt de-duplication. The generation buffer is refilled every round and its
size is the generation batch, which a schedule keeps. So one trainer can change G between
generation rounds by drawing each round's prompts with that round's G and setting
`self.num_generations` when it generates that round; model, optimizer, learning-rate schedule,
step counter, RNG streams and the metrics files simply go on. Consecutive trainers would have
to hand all of that over, and their samplers would restart the data order.

How: `ScheduledRepeatSampler` is TRL's RepeatSampler with G chosen per round (same seed, same
permutation, so a schedule whose phases share one G yields the very index stream of the fixed
run: tests/test_schedule_e2e.py checks identical rewards per step). The DataLoader reads the
sampler ahead of training, so the G of every round drawn is queued, and the trainer takes the
next one when it generates. A progress switch is a property of the round (its first step),
known in advance. A signal switch is decided after a logged step on rank 0 from TRL's
frac_reward_zero_std (already computed over all processes) and broadcast, so every process
queues the same G for the same round; it takes effect with the next round drawn after the
decision (one round later than the decision under the loader's read-ahead), and the event
records both steps. Each phase change is a line of events.jsonl (rank 0).
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any, Iterator

import torch
import torch.distributed as dist
from transformers import TrainerCallback
from trl import GRPOTrainer

from grpo_ablate.schedule import Schedule, parse_generations
from grpo_ablate.vocab import EVENTS_FILE

__all__ = ["ScheduleState", "ScheduledRepeatSampler", "ScheduledGRPOTrainer", "SignalSwitch", "split_schedule"]


def split_schedule(kwargs: dict[str, Any]) -> tuple[dict[str, Any], Schedule | None]:
    """GRPOConfig keywords with a schedule's first G in place of the schedule, and the schedule."""
    value = kwargs.get("num_generations")
    if value is None:
        return kwargs, None
    parsed = parse_generations(value)
    if not isinstance(parsed, Schedule):
        return {**kwargs, "num_generations": parsed}, None  # "8" from a label-typed value becomes 8
    return {**kwargs, "num_generations": parsed.phases[0]}, parsed


class ScheduleState:
    """What the sampler, the trainer and the signal callback share: the schedule and its progress.

    `micro_steps_per_round` (steps_per_generation x num_iterations) and `accumulation` turn a
    round's index into the optimizer step it starts at; `max_steps` places progress switches.
    """

    def __init__(self, schedule: Schedule, *, max_steps: int, micro_steps_per_round: int, accumulation: int) -> None:
        if schedule.uses_progress and max_steps <= 0:
            raise ValueError(f"schedule {schedule.label} switches by progress and needs max_steps (a step or completions budget)")
        self.schedule = schedule
        self.max_steps = max_steps
        self.micro_steps_per_round = micro_steps_per_round
        self.accumulation = accumulation
        self.rounds_drawn = 0
        self.phase_drawn = 0  # the phase of the last round the sampler drew
        self.fired: dict[int, tuple[int, str]] = {}  # signal switch index -> (decided after step, reason)
        self.queue: deque[tuple[int, int, str]] = deque()  # (phase, first step, reason) per drawn round
        self.phase_in_force = 0

    def round_start_step(self, k: int) -> int:
        """Optimizer steps completed when round k (0-based) starts training."""
        return k * self.micro_steps_per_round // self.accumulation

    def next_round(self) -> tuple[int, str]:
        """(phase, reason it was entered) of the next round to draw; changes nothing."""
        done = self.round_start_step(self.rounds_drawn)
        phase, reason = self.phase_drawn, ""
        while phase < len(self.schedule.switches):
            sw = self.schedule.switches[phase]
            if sw.kind == "progress" and done >= sw.at_step(self.max_steps):
                reason = (f"progress: {done} of {self.max_steps} optimizer steps done "
                          f"(switch at {sw.text} = after step {sw.at_step(self.max_steps)})")
            elif sw.kind == "signal" and phase in self.fired:
                after, why = self.fired[phase]
                reason = f"signal: {why}, decided after step {after}"
            else:
                break
            phase += 1
        return phase, reason

    def draw(self) -> int:
        """The G of the next round; queued with its first step for the trainer."""
        phase, reason = self.next_round()
        self.queue.append((phase, self.round_start_step(self.rounds_drawn) + 1, reason))
        self.rounds_drawn += 1
        self.phase_drawn = phase
        return self.schedule.phases[phase]


class ScheduledRepeatSampler(torch.utils.data.Sampler):
    """TRL's RepeatSampler (same permutation stream), with G chosen per generation round."""

    def __init__(self, data_source, state: ScheduleState, *, generation_batch_size: int, repeat_count: int,
                 shuffle: bool = True, seed: int | None = None) -> None:
        self.data_source = data_source
        self.state = state
        self.generation_batch_size = generation_batch_size
        self.repeat_count = repeat_count
        self.num_samples = len(data_source)
        self.shuffle = shuffle
        if shuffle:
            self.generator = torch.Generator()
            if seed is not None:
                self.generator.manual_seed(seed)

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            indexes = torch.randperm(self.num_samples, generator=self.generator).tolist()
        else:
            indexes = list(range(self.num_samples))
        at = 0
        while True:
            phase, _ = self.state.next_round()
            size = self.generation_batch_size // self.state.schedule.phases[phase]
            if at + size > len(indexes):
                return  # an incomplete round is dropped, as RepeatSampler drops its last chunk
            g = self.state.draw()
            chunk = indexes[at:at + size]
            at += size
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(g):
                        yield index

    def __len__(self) -> int:
        # Measured with the first phase's G: only the trainer's epoch arithmetic reads it.
        g = self.state.schedule.phases[0]
        size = self.generation_batch_size // g
        return (self.num_samples // size) * size * g * self.repeat_count


class ScheduledGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with num_generations taken, round by round, from a `ScheduleState`."""

    def __init__(self, *args: Any, schedule: Schedule, events_dir: str | Path, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        a = self.args
        self.schedule_state = ScheduleState(schedule, max_steps=int(a.max_steps or 0),
                                            micro_steps_per_round=a.steps_per_generation * self.num_iterations,
                                            accumulation=a.gradient_accumulation_steps)
        self.events_path = Path(events_dir) / EVENTS_FILE
        self.add_callback(SignalSwitch(self.schedule_state))

    def get_train_dataloader(self):
        if not hasattr(self.train_dataset, "__len__"):  # TRL streams iterable datasets without a sampler
            raise ValueError("a num_generations schedule needs a map-style (sized) training dataset")
        return super().get_train_dataloader()

    def _get_train_sampler(self, dataset=None):
        return ScheduledRepeatSampler(
            dataset if dataset is not None else self.train_dataset,
            self.schedule_state,
            generation_batch_size=self.args.generation_batch_size,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            shuffle=self.shuffle_dataset,
            seed=self.args.seed,
        )

    def _prepare_inputs(self, generation_batch):
        if self.model.training:
            generate_every = self.args.steps_per_generation * self.num_iterations
            if self._step % generate_every == 0 or self._buffered_inputs is None:
                self._enter_round()
        return super()._prepare_inputs(generation_batch)

    def _enter_round(self) -> None:
        s = self.schedule_state
        if not s.queue:
            return  # nothing drawn ahead (cannot happen with the sampler above): keep the G in force
        phase, first_step, reason = s.queue.popleft()
        previous = s.phase_in_force
        self.num_generations = s.schedule.phases[phase]
        s.phase_in_force = phase
        if self.state.global_step == 0 and first_step == 1 and not reason:
            self._event({"event": "phase", "step": 1, "phase": 0, "num_generations": self.num_generations,
                         "schedule": s.schedule.label, "reason": "start"})
        elif phase != previous:
            record = {"event": "phase", "step": self.state.global_step + 1, "phase": phase,
                      "num_generations": self.num_generations, "from": s.schedule.phases[previous],
                      "schedule": s.schedule.label, "reason": reason}
            if phase - 1 in s.fired:
                record["decided_after"] = s.fired[phase - 1][0]
            self._event(record)

    def _event(self, record: dict[str, Any]) -> None:
        if not self.accelerator.is_main_process:
            return
        self.events_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.events_path, "a") as f:
            f.write(json.dumps(record) + "\n")
        print("[grpo-ablate] " + json.dumps(record), flush=True)


class SignalSwitch(TrainerCallback):
    """Decide signal switches after each logged step: on rank 0, broadcast to every process.

    The window holds the phase's own logged frac_reward_zero_std values; the switch of the phase
    in force fires once their mean over the last `window` is below the threshold.
    """

    def __init__(self, state: ScheduleState) -> None:
        self.state = state
        self.window: list[float] = []
        self.window_phase = 0

    def on_log(self, args, state, control, logs=None, **kwargs):
        s = self.state
        if all(sw.kind != "signal" for sw in s.schedule.switches):
            return control  # the same on every process: no collective needed
        phase = s.phase_in_force
        if phase != self.window_phase:
            self.window, self.window_phase = [], phase
        decision = 0
        why = ""
        if phase < len(s.schedule.switches) and phase not in s.fired:
            sw = s.schedule.switches[phase]
            value = (logs or {}).get("frac_reward_zero_std")
            if sw.kind == "signal" and value is not None and not any(k.startswith("eval_") for k in logs or {}):
                self.window.append(float(value))
                recent = self.window[-sw.window:]
                mean = sum(recent) / len(recent)
                if len(recent) >= sw.window and mean < sw.value:
                    decision = 1
                    why = f"zero-spread share {mean:.3f} over the last {sw.window} steps < {sw.value:g}"
        decision = _from_rank0(decision)
        if decision and phase not in s.fired:
            s.fired[phase] = (state.global_step, why or "decided on rank 0")
        return control


def _from_rank0(value: int) -> int:
    """Rank 0's value on every process (one collective per logged step; none without a process group)."""
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return value
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    t = torch.tensor([value], dtype=torch.int32, device=device)
    dist.broadcast(t, src=0)
    return int(t.item())

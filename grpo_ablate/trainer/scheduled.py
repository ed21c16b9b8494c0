"""A GRPOTrainer that chooses G per generation round: a schedule (`4→8@40%`, `2→8@zero_std<0.3`),
dynamic sampling (`dynamic:8`) or per-prompt G (`adaptive:8[2-16]`), as one run.

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

One mechanism for the three: the sampler draws each round with the round's G (`ScheduleState`;
for dynamic and per-prompt G a one-phase schedule at the label's G), and a `RoundPolicy`
decides, when the round is generated, how many completions each prompt gets:
- `RoundPolicy` (fixed G, schedules): the drawn G for every prompt; TRL's own code runs untouched;
- `PerPromptPolicy`: the round's prompts (gathered from every process) are re-divided, g_i in
  [g_min, g_max] with the same total (trainer/g_policy.py `allocate`, decided on rank 0 and
  broadcast), generated with TRL's num_generations set to 1 (so TRL neither groups nor
  de-duplicates), then advantages are recomputed within each group at its own size;
- `DynamicPolicy`: groups with zero reward spread are dropped and a fresh draw of prompts is
  generated (every process takes part in every extra round, decided by the largest shortfall
  over processes) until each process's batch is full or the cap is reached; then the rest is
  filled with dropped groups (zero advantage: they change nothing but keep TRL's batch shape).
Every generated completion is counted (`round_stats`, metrics.jsonl's `completions`), and a
completions budget stops the run on what was generated, dropped groups included.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any, Iterator

import torch
from accelerate.utils import broadcast_object_list, gather_object
from transformers import TrainerCallback
from trl import GRPOTrainer

from grpo_ablate.core.schedule import Dynamic, PerPrompt, Schedule, prompts_per_round
from grpo_ablate.core.space import Rounds
from grpo_ablate.core.vocab import EVENTS_FILE

from . import trl_adapter
from .collective import from_rank0, max_over_processes, sum_over_processes
from .g_policy import (PromptPosterior, allocate, group_advantages, merge_rows, prompt_key,
                       zero_spread_groups)

__all__ = ["ScheduleState", "ScheduledRepeatSampler", "ScheduledGRPOTrainer", "SignalSwitch",
           "RoundPolicy", "DynamicPolicy", "PerPromptPolicy", "CompletionsBudget", "policy_for"]


class ScheduleState:
    """What the sampler, the trainer and the signal callback share: the schedule and its progress.

    `rounds` (space.Rounds, TRL's generation cadence) turns a round's index into the optimizer
    step it starts at; `max_steps` places progress switches.
    """

    def __init__(self, schedule: Schedule, *, max_steps: int, rounds: Rounds) -> None:
        if schedule.uses_progress and max_steps <= 0:
            raise ValueError(f"schedule {schedule.label} switches by progress and needs max_steps (a step or completions budget)")
        self.schedule = schedule
        self.max_steps = max_steps
        self.rounds = rounds
        self.rounds_drawn = 0
        self.phase_drawn = 0  # the phase of the last round the sampler drew
        self.fired: dict[int, tuple[int, str]] = {}  # signal switch index -> (decided after step, reason)
        self.queue: deque[tuple[int, int, str]] = deque()  # (phase, first step, reason) per drawn round
        self.phase_in_force = 0

    def round_start_step(self, k: int) -> int:
        """Optimizer steps completed when round k (0-based) starts training."""
        return self.rounds.round_start_step(k)

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
            size = prompts_per_round(self.generation_batch_size, self.state.schedule.phases[phase])
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
        size = prompts_per_round(self.generation_batch_size, g)
        return (self.num_samples // size) * size * g * self.repeat_count


class RoundPolicy:
    """Every prompt of a round gets the round's G (fixed G and schedules): nothing to decide."""

    kind = "schedule"

    def __init__(self, value: Schedule) -> None:
        self.value = value


class DynamicPolicy(RoundPolicy):
    """Drop zero-spread groups; refill with fresh prompts, at most `extra_rounds` more rounds."""

    kind = "dynamic"

    def __init__(self, value: Dynamic) -> None:
        super().__init__(value)
        self.extra_rounds = value.extra_rounds


class PerPromptPolicy(RoundPolicy):
    """g_i per prompt from its Beta posterior (trainer/g_policy.py), same total per round."""

    kind = "adaptive"

    def __init__(self, value: PerPrompt, prior: tuple[float, float] | None = None) -> None:
        super().__init__(value)
        self.low, self.high = value.low, value.high
        self.posterior = PromptPosterior(prior=prior)

    def sizes(self, keys: list[str], total: int) -> list[int]:
        return allocate([self.posterior.belief(k) for k in keys], total, self.low, self.high)


def policy_for(value: Schedule, prior: tuple[float, float] | None = None) -> RoundPolicy:
    if isinstance(value, Dynamic):
        return DynamicPolicy(value)
    if isinstance(value, PerPrompt):
        return PerPromptPolicy(value, prior)
    return RoundPolicy(value)


class ScheduledGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with num_generations taken, round by round, from a `ScheduleState`, and each
    round's completions per prompt decided by a `RoundPolicy`."""

    def __init__(self, *args: Any, schedule: Schedule, rounds: Rounds, events_dir: str | Path,
                 prior: tuple[float, float] | None = None, completions_budget: int | None = None, **kwargs: Any) -> None:
        """`schedule` and `rounds` (TRL's generation cadence) come from the trial plan (contract/spec.py)."""
        super().__init__(*args, **kwargs)
        a = self.args
        self.schedule_state = ScheduleState(schedule, max_steps=int(a.max_steps or 0), rounds=rounds)
        self.events_path = Path(events_dir) / EVENTS_FILE
        self.g_policy = policy_for(schedule, prior)
        self.round_stats: dict[str, Any] | None = None  # the last generated round, for metrics.jsonl
        self.completions_generated = 0  # every training completion generated (all processes), dropped ones too
        self._last_rewards = None
        if self.g_policy.kind != "schedule":
            if self.multi_objective_aggregation != "sum_then_normalize":
                raise ValueError(f"num_generations {schedule.label} needs multi_objective_aggregation=sum_then_normalize "
                                 f"(got {self.multi_objective_aggregation})")
            if self.use_vllm or getattr(self, "rollout_func", None) is not None or getattr(self, "environment_factories", None):
                raise ValueError(f"num_generations {schedule.label} supports the transformers generation path only "
                                 "(no vLLM, rollout_func or environments)")
        local = a.generation_batch_size // self.accelerator.num_processes
        if isinstance(self.g_policy, DynamicPolicy) and local % int(schedule) != 0:
            raise ValueError(f"num_generations {schedule.label}: each process's share of the generation batch ({local}) "
                             f"must hold whole groups of {int(schedule)}")
        self._refill_order: list[int] = []
        self._refill_gen = torch.Generator()
        self._refill_gen.manual_seed(int(a.seed) + 1)  # not the sampler's stream: refills never replay its order
        self.add_callback(SignalSwitch(self.schedule_state))
        self.completions_budget = int(completions_budget) if completions_budget else None
        if self.completions_budget:
            self.add_callback(CompletionsBudget(self, self.completions_budget))

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

    # ------------------------------------------------------------ per-round policies
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards = rewards  # (all processes' completions, reward functions): the policies regroup it
        return rewards

    def _total_rewards(self) -> torch.Tensor:
        """Each completion's weighted reward, NaN where every reward function returned None (as TRL)."""
        rpf = self._last_rewards
        assert rpf is not None, "_calculate_rewards runs first"
        rewards = (rpf * self.reward_weights.to(rpf.device).unsqueeze(0)).nansum(dim=1)
        rewards[torch.isnan(rpf).all(dim=1)] = torch.nan
        return rewards

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        if isinstance(self.g_policy, PerPromptPolicy):
            return self._per_prompt_round(inputs)
        if isinstance(self.g_policy, DynamicPolicy):
            return self._dynamic_round(inputs)
        out = super()._generate_and_score_completions(inputs)
        self.completions_generated += self.args.generation_batch_size
        return out

    def _per_prompt_round(self, inputs):
        g, n_local = self.num_generations, len(inputs)
        world, rank = self.accelerator.num_processes, self.accelerator.process_index
        everything = gather_object(list(inputs)) if world > 1 else list(inputs)
        rows = everything[::g]  # the sampler repeats each prompt g times in a row
        keys = [prompt_key(r["prompt"]) for r in rows]
        policy = self.g_policy
        sizes = [policy.sizes(keys, len(everything)) if self.accelerator.is_main_process else None]
        if world > 1:
            broadcast_object_list(sizes, from_process=0)
        sizes = list(sizes[0])
        regrouped = [dict(row) for row, k in zip(rows, sizes) for _ in range(k)]
        mine = regrouped[rank * n_local:(rank + 1) * n_local]
        self.num_generations = 1  # TRL generates one completion per row and does not group them
        try:
            out = super()._generate_and_score_completions(mine)
        finally:
            self.num_generations = g
        rewards = self._total_rewards()
        advantages, zero = group_advantages(rewards, sizes, self.scale_rewards)
        out["advantages"] = advantages[rank * n_local:(rank + 1) * n_local]
        self._metrics["train"]["frac_reward_zero_std"][-1] = zero.float().mean().item()
        estimated = [round(policy.posterior.mean(k), 3) for k in keys]  # what the allocation saw
        at = 0
        for key, k in zip(keys, sizes):
            policy.posterior.observe(key, rewards[at:at + k].tolist())
            at += k
        zeros = zero_spread_groups(rewards, sizes)
        self._round_done(len(everything), 0, sizes, informative=sum(not z for z in zeros),
                         alloc=[[p, s] for p, s in zip(estimated, sizes)])
        return out

    def _refill_prompts(self, count: int) -> list[int]:
        """The next `count` prompt indexes of the refill stream (the same on every process)."""
        out: list[int] = []
        while len(out) < count:
            if not self._refill_order:
                self._refill_order = torch.randperm(len(self.train_dataset), generator=self._refill_gen).tolist()
            out.append(self._refill_order.pop(0))
        return out

    def _dynamic_round(self, inputs):
        g, n_local = self.num_generations, len(inputs)
        world, rank = self.accelerator.num_processes, self.accelerator.process_index
        batch = n_local * world
        out = super()._generate_and_score_completions(inputs)
        generated, extra = batch, 0
        keep: list[tuple[dict, list[int]]] = []
        spare: list[tuple[dict, list[int]]] = []
        have = 0

        def sort(scored: dict, rewards: torch.Tensor) -> None:
            nonlocal have
            zeros = zero_spread_groups(rewards[rank * n_local:(rank + 1) * n_local], [g] * (n_local // g))
            for j, z in enumerate(zeros):
                rows = list(range(j * g, (j + 1) * g))
                if not z and have < n_local:
                    keep.append((scored, rows))
                    have += g
                else:
                    spare.append((scored, rows))

        sort(out, self._total_rewards())
        budget = self.completions_budget
        while (extra < self.g_policy.extra_rounds
               and (budget is None or self.completions_generated + generated + batch <= budget)  # never past the budget
               and max_over_processes(n_local - have) > 0):
            chunk = self._refill_prompts(batch // g)[rank * (n_local // g):(rank + 1) * (n_local // g)]
            fresh = [dict(self.train_dataset[i]) for i in chunk for _ in range(g)]
            sort(super()._generate_and_score_completions(fresh), self._total_rewards())
            generated += batch
            extra += 1
        informative = sum_over_processes(have // g)
        for piece in spare:  # short after the cap: dropped groups fill in (zero advantage: no gradient)
            if have >= n_local:
                break
            keep.append(piece)
            have += g
        trained_from_first = all(scored is out for scored, _ in keep) and [r for _, rows in keep for r in rows] == list(range(n_local))
        # Decided over every process: num_items_in_batch counts all processes' tokens, so when any process
        # trains on a joined batch, every process recounts (one gather each, the same on every process).
        if max_over_processes(int(not trained_from_first)):
            if not trained_from_first:
                out = merge_rows(keep, pad_token_id=trl_adapter.pad_token_id(self))
            mask = out["completion_mask"] if out.get("tool_mask") is None else out["completion_mask"] * out["tool_mask"]
            out["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
        self._round_done(generated, generated - batch, [g] * (batch // g), informative=informative, extra_rounds=extra)
        return out

    def _round_done(self, generated: int, dropped: int, sizes: list[int], *, informative: int, **more: Any) -> None:
        self.completions_generated += generated
        self.round_stats = {
            "completions_generated": generated,
            "completions_dropped": dropped,
            "informative_groups": informative,
            "groups": len(sizes),
            "g_mean": round(sum(sizes) / len(sizes), 4),
            "g_min": min(sizes),
            "g_max": max(sizes),
            "g_sizes": sizes,
            **more,
        }

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
        decision = from_rank0(decision)
        if decision and phase not in s.fired:
            s.fired[phase] = (state.global_step, why or "decided on rank 0")
        return control


class CompletionsBudget(TrainerCallback):
    """Stop once the run has generated `budget` training completions, dropped ones included.

    Every process counts the same global figure, so every process stops at the same step.
    """

    def __init__(self, trainer: "ScheduledGRPOTrainer", budget: int) -> None:
        self.trainer = trainer
        self.budget = budget

    def on_step_end(self, args, state, control, **kwargs):
        if self.trainer.completions_generated >= self.budget:
            control.should_training_stop = True
        return control

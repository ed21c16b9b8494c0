"""A schedule of num_generations over one run: small G early, larger G later, as one value of G.

    python -c "from grpo_ablate.core.schedule import parse_generations as p; print(p('4->8@40%').phases)"

Syntax (the label, `->` or `→` between phases, `@` before the condition that starts a phase):
- by progress: `4→8@40%`: G=4 for the first 40 % of the trial's optimizer steps, then G=8;
- by signal: `2→8@zero_std<0.3`: G=2 until the share of zero-spread groups (TRL's
  frac_reward_zero_std), averaged over the last 5 logged steps of the phase, falls below 0.3;
  `2→8@zero_std<0.3[3]` averages over 3 steps instead;
- more phases chain: `2→4@30%→8@60%`.

Two more values choose G per round rather than per phase (trainer/scheduled.py applies all three):
- `dynamic:8` (or `dynamic:8[3]`): DAPO's dynamic sampling at G=8, at most 2 (3) extra
  generation rounds per step to replace groups whose rewards have zero spread;
- `adaptive:8[2-16]`: per-prompt G, batch/8 prompts per round sharing the batch's completions,
  2 to 16 each, chosen from each prompt's estimated pass rate.

Equal budget: every phase keeps the arm's generation batch, so per optimizer step a schedule
arm generates and trains on as many completions as a fixed-G arm. Studies compare arms at
`budget.completions` (or `max_steps`, the same thing per step); a `budget.tokens` stop works for
every arm too, but progress switches need a step count, so they require a step budget.

A `Schedule` is an `int` whose value is its final G, so code that only needs a number for G
(a plot's axis, the zero-spread formula) places it where the run ends; its identity (==, hash,
str, the arm's key) is the whole schedule, and it sorts after the fixed G of its first phase.
Stdlib only: the vocabulary, the config and the trainer core all import it.

Two ways in, two ways out. Text (`parse_generations`, the label syntax above) is read only by the
study-file loader (config/); `generations_text` writes a label for display and keys. Between
processes (the trial plan, contract/spec.py) a G travels as data: `generations_data` /
`generations_from_data`, an int or `{"kind", "label", ...numbers}` whose label is only for
the reader of spec.json (a hand edit that makes it disagree with the numbers is refused).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Switch", "Schedule", "Dynamic", "PerPrompt", "parse_generations", "generations_text", "generations_data",
           "generations_from_data", "prompts_per_round", "DEFAULT_WINDOW", "ZERO_STD", "DEFAULT_EXTRA_ROUNDS"]

DEFAULT_WINDOW = 5  # logged steps a signal condition averages over when the label gives none
ZERO_STD = "zero_std"  # the signal: TRL's frac_reward_zero_std (share of groups with no reward spread)

_ARROW = re.compile(r"\s*(?:->|→)\s*")
_PROGRESS = re.compile(r"^(?P<p>\d+(?:\.\d+)?)%$")
_SIGNAL = re.compile(r"^zero_std\s*<\s*(?P<t>\d*\.?\d+)(?:\[(?P<w>\d+)\])?$")


@dataclass(frozen=True)
class Switch:
    """The condition that ends one phase and starts the next."""

    kind: str  # "progress" | "signal"
    value: float  # progress: percent of the optimizer steps; signal: the threshold
    window: int = DEFAULT_WINDOW  # signal only: logged steps averaged

    @property
    def text(self) -> str:
        if self.kind == "progress":
            return f"{self.value:g}%"
        window = "" if self.window == DEFAULT_WINDOW else f"[{self.window}]"
        return f"{ZERO_STD}<{self.value:g}{window}"

    def at_step(self, max_steps: int) -> int:
        """Progress: the optimizer steps run before the switch (the next phase trains from the step after)."""
        return max(0, round(self.value / 100 * max_steps))

    def describe(self) -> str:
        if self.kind == "progress":
            return f"after {self.value:g}% of the optimizer steps"
        return f"when the share of zero-spread groups over the last {self.window} logged steps falls below {self.value:g}"


class Schedule(int):
    """num_generations that changes during a run; `int(s)` is the final G.

    Also the base of the other policies that choose G per generation round (`Dynamic`,
    `PerPrompt`, below): each is one value of num_generations with one label, and every
    reader that treats "a G that is not a plain int" (labels, slugs, feasibility of every
    phase, the trainer choosing `ScheduledGRPOTrainer`) treats all three alike. `kind` tells
    them apart where it matters (the trainer's per-round policy, `plan`'s words).
    """

    kind = "schedule"
    phases: tuple[int, ...]
    switches: tuple[Switch, ...]

    def __new__(cls, phases: tuple[int, ...], switches: tuple[Switch, ...]) -> "Schedule":
        if len(phases) < 2 or len(switches) != len(phases) - 1:
            raise ValueError("a schedule needs at least two phases and one switch between each pair")
        obj = super().__new__(cls, phases[-1])
        obj.phases = tuple(int(g) for g in phases)
        obj.switches = tuple(switches)
        return obj

    # ---- identity
    @property
    def label(self) -> str:
        """The one name shown everywhere (params, dashboard, report, exports): `4→8@40%`."""
        out = str(self.phases[0])
        for g, sw in zip(self.phases[1:], self.switches):
            out += f"→{g}@{sw.text}"
        return out

    @property
    def ascii(self) -> str:
        return self.label.replace("→", "->")

    @property
    def slug(self) -> str:
        """File-name safe: `4to8at40pct`."""
        text = self.ascii.replace("->", "to").replace("@", "at").replace("%", "pct").replace("<", "lt")
        return re.sub(r"[^A-Za-z0-9._-]", "", text.replace("[", "w").replace("]", ""))

    def __str__(self) -> str:
        return self.label

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        """f"{s:>12}" pads the label, as tables print a G."""
        return format(self.label, spec)

    def _ident(self) -> tuple[Any, ...]:
        return (self.phases, self.switches)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schedule) and self._ident() == other._ident()

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(("schedule",) + self._ident())

    # ---- order: after the fixed G of the first phase, schedules among themselves by label
    def _sort_key(self) -> tuple[int, int, str]:
        return (self.phases[0], 1, self.label)

    @staticmethod
    def _key_of(x: object) -> tuple[int, int, str]:
        if isinstance(x, Schedule):
            return x._sort_key()
        return (int(x), 0, "")  # type: ignore[call-overload]

    def __lt__(self, other: object) -> bool:
        return self._sort_key() < self._key_of(other)

    def __le__(self, other: object) -> bool:
        return self._sort_key() <= self._key_of(other)

    def __gt__(self, other: object) -> bool:
        return self._sort_key() > self._key_of(other)

    def __ge__(self, other: object) -> bool:
        return self._sort_key() >= self._key_of(other)

    def __reduce__(self):  # pickling (multiprocessing, deepcopy) keeps the schedule
        return (Schedule, (self.phases, self.switches))

    def __deepcopy__(self, _memo: dict) -> "Schedule":  # immutable: a copy is the schedule itself
        return self

    def __copy__(self) -> "Schedule":
        return self

    # ---- what the trainer and the checks need
    @property
    def uses_progress(self) -> bool:
        return any(s.kind == "progress" for s in self.switches)

    @property
    def smallest(self) -> int:
        return min(self.phases)

    def describe(self) -> str:
        """In words, for `plan`."""
        parts = [f"G={self.phases[0]}"]
        for g, sw in zip(self.phases[1:], self.switches):
            parts.append(f"then G={g} {sw.describe()}")
        return ", ".join(parts)

    @classmethod
    def parse(cls, text: str) -> "Schedule":
        parts = _ARROW.split(text.strip())
        if len(parts) < 2:
            raise ValueError(f"not a schedule (expected like '4->8@40%' or '2->8@zero_std<0.3'): {text!r}")
        try:
            phases = [int(parts[0])]
        except ValueError:
            raise ValueError(f"schedule {text!r}: the first phase must be a number of generations, got {parts[0]!r}") from None
        switches: list[Switch] = []
        last_progress = 0.0
        for part in parts[1:]:
            g_text, sep, cond = part.partition("@")
            if not sep:
                raise ValueError(f"schedule {text!r}: phase {part!r} needs a condition after '@' (like 8@40% or 8@zero_std<0.3)")
            try:
                phases.append(int(g_text))
            except ValueError:
                raise ValueError(f"schedule {text!r}: {g_text!r} is not a number of generations") from None
            cond = cond.strip()
            if m := _PROGRESS.match(cond):
                p = float(m["p"])
                if not 0 < p < 100 or p <= last_progress:
                    raise ValueError(f"schedule {text!r}: progress switches must increase within (0%, 100%), got {cond}")
                last_progress = p
                switches.append(Switch("progress", p))
            elif m := _SIGNAL.match(cond):
                t, w = float(m["t"]), int(m["w"] or DEFAULT_WINDOW)
                if not 0 < t <= 1 or w < 1:
                    raise ValueError(f"schedule {text!r}: {cond} needs a threshold in (0, 1] and a window >= 1")
                switches.append(Switch("signal", t, w))
            else:
                raise ValueError(f"schedule {text!r}: unknown condition {cond!r}; use a progress like 40% "
                                 f"or a signal like {ZERO_STD}<0.3 (optionally {ZERO_STD}<0.3[3] for a 3-step window)")
        return cls(tuple(phases), tuple(switches))


DEFAULT_EXTRA_ROUNDS = 2  # dynamic sampling's cap on extra generation rounds per step when the label gives none
_DYNAMIC = re.compile(r"^dynamic:(?P<g>\d+)(?:\[(?P<r>\d+)\])?$")
_PER_PROMPT = re.compile(r"^adaptive:(?P<g>\d+)\[(?P<lo>\d+)-(?P<hi>\d+)\]$")


class _Policy(Schedule):
    """A one-phase `Schedule` whose G per prompt the trainer decides each round (no switches)."""

    _params: tuple[int, ...]  # G, then the policy's own numbers (extra rounds; the G range)

    def __new__(cls, g: int, *rest: int) -> "_Policy":
        obj = int.__new__(cls, int(g))
        obj.phases = (int(g),)
        obj.switches = ()
        obj._params = (int(g), *map(int, rest))
        return obj

    def _ident(self) -> tuple[Any, ...]:
        return (self.kind, self._params)

    def __reduce__(self):
        return (type(self), self._params)

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]", "", self.label.replace(":", "").replace("[", "_").replace("]", ""))


class Dynamic(_Policy):
    """DAPO's dynamic sampling at G: zero-spread groups are dropped and more prompts generated
    until the batch is full, at most `extra_rounds` extra generation rounds per step.

    Label `dynamic:8` (cap 2) or `dynamic:8[3]`. Every generated completion counts against the
    budget, the dropped ones too.
    """

    kind = "dynamic"

    def __new__(cls, g: int, extra_rounds: int = DEFAULT_EXTRA_ROUNDS) -> "Dynamic":
        if int(g) < 2 or int(extra_rounds) < 0:
            raise ValueError(f"dynamic sampling needs G >= 2 and extra rounds >= 0, got G={g}, extra rounds {extra_rounds}")
        return super().__new__(cls, g, extra_rounds)  # type: ignore[return-value]

    @property
    def extra_rounds(self) -> int:
        return self._params[1]

    @property
    def label(self) -> str:
        cap = "" if self.extra_rounds == DEFAULT_EXTRA_ROUNDS else f"[{self.extra_rounds}]"
        return f"dynamic:{self.phases[0]}{cap}"

    def describe(self) -> str:
        return (f"G={self.phases[0]} with dynamic sampling: groups whose rewards are all equal are dropped and "
                f"new prompts generated to refill the batch, at most {self.extra_rounds} extra round(s) per step; "
                "dropped completions count against the budget (so it trains on fewer)")


class PerPrompt(_Policy):
    """Per-prompt G: each round keeps the generation batch (prompts = batch / `mean`) and gives
    prompt i g_i in [low, high] completions, chosen to maximise the expected informative groups.

    Label `adaptive:8[2-16]`.
    """

    kind = "adaptive"

    def __new__(cls, g: int, low: int, high: int) -> "PerPrompt":
        if not 2 <= int(low) <= int(g) <= int(high):
            raise ValueError(f"adaptive:{g}[{low}-{high}] needs 2 <= g_min <= mean G <= g_max")
        return super().__new__(cls, g, low, high)  # type: ignore[return-value]

    @property
    def low(self) -> int:
        return self._params[1]

    @property
    def high(self) -> int:
        return self._params[2]

    @property
    def label(self) -> str:
        return f"adaptive:{self.phases[0]}[{self.low}-{self.high}]"

    def describe(self) -> str:
        return (f"per-prompt G: batch / {self.phases[0]} prompts per round, each given {self.low} to {self.high} "
                "completions (same total) where its estimated pass rate makes a mixed group most likely")



def prompts_per_round(generation_batch_size: int, num_generations: int) -> int:
    """The distinct prompts a generation round draws, at most, over a run: the batch over G, whole groups.

    The one owner of this count (the feasible space's prompts_per_generation, the probe's and the trial's
    refusal of a training set that cannot fill a round, the G-per-round sampler's round size). A plain G
    draws batch / G each round; a schedule batch / the G of its phase, so at most batch / its smallest
    phase; dynamic sampling and per-prompt G draw batch / their G (per-prompt G shares the round's
    completions among those prompts; a refill round draws that many again from the same set).
    """
    g = num_generations.smallest if isinstance(num_generations, Schedule) else int(num_generations)
    return generation_batch_size // max(1, g)

def parse_generations(value: object) -> int:
    """A value of num_generations: a plain int (also "8", 8.0) or a Schedule (from its label)."""
    if isinstance(value, Schedule):
        return value
    if isinstance(value, bool):
        raise ValueError(f"not a number of generations: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d+", text):
            return int(text)
        if text.startswith(("dynamic", "adaptive")):
            if m := _DYNAMIC.match(text.replace(" ", "")):
                return Dynamic(int(m["g"]), int(m["r"] or DEFAULT_EXTRA_ROUNDS))
            if m := _PER_PROMPT.match(text.replace(" ", "")):
                return PerPrompt(int(m["g"]), int(m["lo"]), int(m["hi"]))
            raise ValueError(f"not a G policy: {text!r}; use dynamic:8 (or dynamic:8[3] for 3 extra rounds) "
                             "or adaptive:8[2-16] (mean G 8, each prompt 2 to 16)")
        return Schedule.parse(text)
    raise ValueError(f"not a number of generations or a schedule: {value!r}")


def generations_text(value: int) -> int | str:
    """The codec's other half: a plain int as is, a schedule as its label (JSON, Optuna, CSV)."""
    return value.label if isinstance(value, Schedule) else int(value)


def generations_data(value: int) -> int | dict[str, Any]:
    """A G as JSON data, never as text to parse: a plain int, or the schedule's numbers by kind.

    `{"kind": "schedule", "label": "4→8@40%", "phases": [4, 8], "switches": [{"kind": "progress", "value": 40.0,
    "window": 5}]}`, `{"kind": "dynamic", "label": "dynamic:8", "g": 8, "extra_rounds": 2}`,
    `{"kind": "adaptive", "label": "adaptive:8[2-16]", "g": 8, "low": 2, "high": 16}`.
    """
    if isinstance(value, Dynamic):
        return {"kind": value.kind, "label": value.label, "g": value.phases[0], "extra_rounds": value.extra_rounds}
    if isinstance(value, PerPrompt):
        return {"kind": value.kind, "label": value.label, "g": value.phases[0], "low": value.low, "high": value.high}
    if isinstance(value, Schedule):
        return {"kind": value.kind, "label": value.label, "phases": list(value.phases),
                "switches": [{"kind": sw.kind, "value": sw.value, "window": sw.window} for sw in value.switches]}
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"num_generations must be an int or a schedule object, got {value!r}")
    return int(value)


def generations_from_data(data: object) -> int:
    """`generations_data`'s inverse; a ValueError names what is wrong (a spec.json edited by hand)."""
    if isinstance(data, bool):
        raise ValueError(f"num_generations: not a number of generations: {data!r}")
    if isinstance(data, int):
        return data
    if not isinstance(data, dict):
        raise ValueError(f"num_generations: expected an int or a schedule object ({{\"kind\": ...}}), got {data!r}")
    kind = data.get("kind")
    try:
        value: Schedule
        if kind == "dynamic":
            value = Dynamic(int(data["g"]), int(data["extra_rounds"]))
        elif kind == "adaptive":
            value = PerPrompt(int(data["g"]), int(data["low"]), int(data["high"]))
        elif kind == "schedule":
            value = Schedule(tuple(int(g) for g in data["phases"]),
                             tuple(Switch(str(sw["kind"]), float(sw["value"]), int(sw.get("window", DEFAULT_WINDOW)))
                                   for sw in data["switches"]))
        else:
            raise ValueError(f"unknown kind {kind!r} (schedule, dynamic or adaptive)")
        if any(sw.kind not in ("progress", "signal") for sw in value.switches):
            raise ValueError("a switch's kind is progress or signal")
    except (KeyError, TypeError) as e:
        raise ValueError(f"num_generations {kind}: missing or bad field {e}") from None
    label = data.get("label")
    if label is not None and label != value.label:
        raise ValueError(f"num_generations: the label {label!r} says another schedule than its numbers ({value.label}); "
                         "edit the numbers (the label is only for reading)")
    return value

"""A schedule of num_generations over one run: small G early, larger G later, as one value of G.

    python -c "from grpo_ablate.schedule import parse_generations as p; print(p('4->8@40%').phases)"

Syntax (the label, `->` or `→` between phases, `@` before the condition that starts a phase):
- by progress: `4→8@40%`: G=4 for the first 40 % of the trial's optimizer steps, then G=8;
- by signal: `2→8@zero_std<0.3`: G=2 until the share of zero-spread groups (TRL's
  frac_reward_zero_std), averaged over the last 5 logged steps of the phase, falls below 0.3;
  `2→8@zero_std<0.3[3]` averages over 3 steps instead;
- more phases chain: `2→4@30%→8@60%`.

Equal budget: every phase keeps the arm's generation batch, so per optimizer step a schedule
arm generates and trains on as many completions as a fixed-G arm. Studies compare arms at
`budget.completions` (or `max_steps`, the same thing per step); a `budget.tokens` stop works for
every arm too, but progress switches need a step count, so they require a step budget.

A `Schedule` is an `int` whose value is its final G, so code that only needs a number for G
(a plot's axis, the zero-spread formula) places it where the run ends; its identity (==, hash,
str, the arm's key) is the whole schedule, and it sorts after the fixed G of its first phase.
Stdlib only: the vocabulary, the config and the trainer core all import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Switch", "Schedule", "parse_generations", "generations_text", "DEFAULT_WINDOW", "ZERO_STD"]

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
    """num_generations that changes during a run; `int(s)` is the final G."""

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

    def __deepcopy__(self, memo: dict) -> "Schedule":
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
        return Schedule.parse(text)
    raise ValueError(f"not a number of generations or a schedule: {value!r}")


def generations_text(value: int) -> int | str:
    """The codec's other half: a plain int as is, a schedule as its label (JSON, Optuna, CSV)."""
    return value.label if isinstance(value, Schedule) else int(value)

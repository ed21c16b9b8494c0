"""The screen's drop rule: which of a study's arms the screen shows dominated before any training, and why.

    python -c "from grpo_ablate.preflight.screen_rule import SIGNAL_RATIO, RULES; print(RULES, SIGNAL_RATIO)"

Pure: plain values in (one Point per screened configuration), the drops out. The screen stage
(preflight/screen.py) feeds it what advise and the probe measured; the decision-quality benchmark can feed
it a table's predictions and replay the confirm stage on the arms it keeps.

A configuration's predicted learning signal is the prompts per optimizer step whose group has reward spread:
(prompts per step) x (1 - zero-spread share), the zero-spread share from the starting model's per-prompt
success on the study's own prompts (advise); the probe gives its seconds per step (hence per device-hour).
The rules, each a reason on the report page:
- `infeasible`: the hardware's batch arithmetic refuses the arm (it cannot start);
- `out_of_memory`: the probe ran out of memory at the arm's batch;
- `dominated`: another arm the screen keeps predicts at least SIGNAL_RATIO times its learning signal per step,
  and is not far slower (below SLOWER_RATIO times its seconds per step): far fewer prompts with a gradient, for
  no gain in speed;
- `slower` (measured, not used): far slower (SLOWER_RATIO times another kept arm's seconds per step in the
  probe) for no predicted gain (no more learning signal per step than that arm);
- `no_spread` (measured, not used): NO_SPREAD_SHARE or more of the arm's groups predicted without spread.
The baseline (the recipe's own configuration) leaves only for the first two: the answer is stated against it.

Which rules may drop an arm is measured, not assumed (benchmarks/screen.py against the committed many-seed
tables of benchmarks/data/): a rule is in RULES only where every arm it dropped on those tables trained to
within min_effect (0.02) of an arm the rule kept, or worse, and it never dropped the arm training ranked first. `dominated` agreed at every ratio tried (1.25 to
3); SIGNAL_RATIO is 1.5, not 1.25, for a margin over advise's own error (its predicted zero-spread shares
missed the trained ones by about 0.05 a point on addition_mixed: benchmarks/advise.py), which moves a signal
ratio by some 10-20%. `slower` is not used: the tables train at equal steps and cannot test its timing, and
the probe's two-step timings on the shared CPU differed between arms doing the same work by up to 2.6x. The
zero-spread share alone disagreed: at a fixed generation batch a small G with 93% of its groups without spread
still sees the most prompts with a gradient (the screen's own prediction ranks it first), and it trained first
or level with the first (addition_rare): `no_spread` dropped the arm training ranked first, so it drops nothing. The figures are in docs/screen.md, with the command.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from grpo_ablate.core.schedule import prompts_per_round

__all__ = ["Point", "Drop", "drops", "kept", "signal_per_step", "SIGNAL_RATIO", "SLOWER_RATIO", "NO_SPREAD_SHARE", "RULES",
           "ALL_RULES"]

SIGNAL_RATIO = 1.5  # `dominated`: another kept arm predicts this many times its learning signal per step
SLOWER_RATIO = 1.5  # "far slower": this many times another arm's seconds per step in the probe
NO_SPREAD_SHARE = 0.9  # `no_spread`: this share of groups or more predicted without reward spread
ALL_RULES = ("infeasible", "out_of_memory", "dominated", "slower", "no_spread")
RULES = ("infeasible", "out_of_memory", "dominated")  # those whose agreement with training was shown


def signal_per_step(generation_batch_size: int, num_generations: int, zero_spread: float,
                    steps_per_generation: float = 1.0) -> float:
    """Prompts per optimizer step whose group has reward spread: (batch / G) x (1 - zero-spread) per step (the
    prompts a round draws: schedule.prompts_per_round)."""
    return prompts_per_round(generation_batch_size, num_generations) * (1.0 - zero_spread) / steps_per_generation


@dataclass(frozen=True)
class Point:
    """One screened configuration. `candidate`: an arm of the study (only those can be dropped); `baseline`: the
    recipe's own; `infeasible` / `out_of_memory`: why it cannot run; `signal_per_step`: predicted prompts per
    optimizer step with a gradient; `seconds_per_step`: the probe's, when it timed this configuration."""

    key: str
    label: str
    num_generations: int
    temperature: float
    candidate: bool = True
    baseline: bool = False
    infeasible: str | None = None
    out_of_memory: str | None = None
    zero_spread: float | None = None
    signal_per_step: float | None = None
    seconds_per_step: float | None = None

    @property
    def signal_per_hour(self) -> float | None:
        """Predicted prompts with a gradient per device-hour (per step / the probe's seconds per step)."""
        if self.signal_per_step is None or not self.seconds_per_step:
            return None
        return self.signal_per_step * 3600.0 / self.seconds_per_step


@dataclass(frozen=True)
class Drop:
    """Why an arm leaves before training: the rule, the sentence for the page, and the arm that dominates it."""

    rule: str
    reason: str
    by: str | None = None


def _far_slower(p: Point, other: Point) -> float | None:
    """How many times other's seconds per step p's are, when the probe timed both and it is SLOWER_RATIO or more."""
    if not p.seconds_per_step or not other.seconds_per_step:
        return None
    times = p.seconds_per_step / other.seconds_per_step
    return times if times >= SLOWER_RATIO else None


def drops(points: Sequence[Point], *, rules: Iterable[str] = RULES, ratio: float = SIGNAL_RATIO) -> dict[str, Drop]:
    """The candidate arms the screen drops, by key, each with its reason.

    `infeasible` and `out_of_memory` first (the baseline too: it cannot run); then, among the arms left, an arm
    (never the baseline) that another left arm dominates (`dominated`: `ratio` times its signal per step, not far
    slower; the most dominating arm is named) or outpaces (`slower`); `no_spread` drops a non-baseline arm with
    NO_SPREAD_SHARE or more of its groups predicted without spread. Arms with no prediction are kept (nothing
    shows them dominated)."""
    use = set(rules)
    unknown = use - set(ALL_RULES)
    if unknown:
        raise ValueError(f"unknown screen rule(s) {sorted(unknown)}; known: {list(ALL_RULES)}")
    if ratio < 1.0:
        raise ValueError(f"a dominance ratio must be at least 1, got {ratio}")
    out: dict[str, Drop] = {}
    for p in points:
        if not p.candidate:
            continue
        if "infeasible" in use and p.infeasible:
            out[p.key] = Drop("infeasible", f"{p.label}: not feasible on this hardware: {p.infeasible}")
        elif "out_of_memory" in use and p.out_of_memory:
            out[p.key] = Drop("out_of_memory", f"{p.label}: ran out of memory in the probe: {p.out_of_memory}")
    left = [p for p in points if p.candidate and p.key not in out]
    for p in left:
        if p.baseline or p.signal_per_step is None:
            continue
        others = [o for o in left if o.key != p.key and o.signal_per_step is not None]
        if "no_spread" in use and p.zero_spread is not None and p.zero_spread >= NO_SPREAD_SHARE:
            out[p.key] = Drop("no_spread", f"{p.label}: {p.zero_spread:.0%} of its groups are predicted to have no "
                                           f"reward spread (no gradient)")
            continue
        mine = p.signal_per_step
        if "dominated" in use:
            better = [(theirs / mine if mine > 0 else math.inf, o) for o in others
                      if (theirs := o.signal_per_step or 0.0) > 0 and _far_slower(o, p) is None
                      and (mine <= 0 or theirs / mine >= ratio)]
            if better:
                times, o = max(better, key=lambda b: b[0])
                how = "none" if times == math.inf else f"1/{times:.2f}"
                out[p.key] = Drop("dominated", (
                    f"{p.label}: predicted {how} of the prompts with reward spread per step of {o.label} "
                    f"({_fmt(p.signal_per_step)} against {_fmt(o.signal_per_step)}), which is not far slower; the "
                    f"screen drops below 1/{ratio:g}, where its drops agreed with training on the CPU tasks"), by=o.key)
                continue
        if "slower" in use:
            faster = [(t, o) for o in others if (t := _far_slower(p, o)) is not None
                      and (o.signal_per_step or 0) >= p.signal_per_step]
            if faster:
                times, o = max(faster, key=lambda f: f[0])
                out[p.key] = Drop("slower", (
                    f"{p.label}: {times:.1f}x the seconds per step of {o.label} in the probe "
                    f"({p.seconds_per_step:.3g} s against {o.seconds_per_step:.3g} s) for no more predicted prompts "
                    f"with reward spread per step ({_fmt(p.signal_per_step)} against {_fmt(o.signal_per_step)})"),
                    by=o.key)
    return out


def _fmt(v: float | None) -> str:
    return "-" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:.2f}")


def kept(points: Sequence[Point], dropped: Mapping[str, Drop]) -> list[str]:
    """The candidate arms left for training, in the order given."""
    return [p.key for p in points if p.candidate and p.key not in dropped]

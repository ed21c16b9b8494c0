"""Warnings and notes: problems worth a person's attention, each stated with the numbers behind it.

Warnings consult the answer (`report.verdict.Verdict.recommended`): advice to change G is given
only when it points the way the answer does, so the page makes one recommendation. A finding's
`suggests` records the change it advises (knob, "lower" | "higher"), and `consistent` checks it.

    python -c "from grpo_ablate import load_study; from grpo_ablate.report.data import collect; \
[print(w.kind, w.message) for w in collect(load_study('studies/tiny-cpu.yaml')).warnings]"
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from grpo_ablate.report.arms import ArmSummary
from grpo_ablate.stats.zero_spread import zero_spread
from grpo_ablate.report.records import TrialRecord
from grpo_ablate.report.text import clip
from grpo_ablate.core.vocab import Arm, Outcome

__all__ = ["Finding", "find_warnings", "consistent", "NEAR_DUPLICATE_DISTINCT_FRAC", "TRUNCATED_CLIPPED_RATIO",
           "ZERO_SPREAD_FRACTION", "LOW_TEMPERATURE"]

# Each threshold is the point past which the data says the trial wasted its budget.
NEAR_DUPLICATE_DISTINCT_FRAC = 0.5  # under half of a group's completions distinct: G is buying duplicates
TRUNCATED_CLIPPED_RATIO = 0.5  # most completions cut at max_completion_length: rewards judge cut-offs
ZERO_SPREAD_FRACTION = 0.5  # most groups with equal rewards: most prompts give no gradient
LOW_TEMPERATURE = 0.7  # below this, duplicates are the sampler's doing rather than the model's certainty


@dataclass(frozen=True)
class Finding:
    """A warning the data supports, with the trials that show it."""

    kind: str  # near_duplicates | truncated | zero_spread | timing_noise | oom | failed | interrupted | running | single_seed | no_baseline | unreadable
    message: str
    trials: tuple[int, ...] = ()
    severity: str = "warning"  # warning | info
    arm: Arm | None = None  # the configuration it is about
    suggests: tuple[tuple[str, str], ...] = ()  # (knob, "lower" | "higher") the message advises for `arm`

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity, "message": self.message, "trials": list(self.trials),
                "suggests": [list(s) for s in self.suggests]}


def consistent(finding: Finding, recommended: Arm | None) -> bool:
    """Whether the finding's advice points from its arm towards the recommended arm (or advises nothing)."""
    if recommended is None or finding.arm is None:
        return True
    for knob, way in finding.suggests:
        mine, theirs = getattr(finding.arm, knob), getattr(recommended, knob)  # a schedule compares by its final G
        if (way == "lower" and not theirs < mine) or (way == "higher" and not theirs > mine):
            return False
    return True


def _g_advice(a: Arm, way: str, recommended: Arm | None, plain: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Advice to move G `way`, unless the answer recommends otherwise; then the answer's choice is named."""
    if recommended is None:
        return plain, (("num_generations", way),)
    g, rg = a.num_generations, recommended.num_generations
    agrees = rg < g if way == "lower" else rg > g
    if agrees:
        return plain + f" The answer above recommends G={rg}.", (("num_generations", way),)
    if recommended == a:
        return (" The answer above still recommends this configuration on its measured result; treat this as a cost "
                "to watch rather than a reason to change G."), ()
    return (f" The answer above recommends {recommended.label}, which already accounts for this measured result."), ()


def find_warnings(records: Sequence[TrialRecord], arms: Sequence[ArmSummary], bad_lines: int = 0,
                  success_p: Mapping[Arm, float] | None = None, recommended: Arm | None = None,
                  extra: Sequence[Finding] = (), learned_nothing: bool = False) -> list[Finding]:
    """Every finding, warnings about the arms first, then about trials, then notes.

    `success_p` is each arm's own success rate (report.groups.success_rates_by_arm), what its
    zero-spread share is judged against. `recommended` is the answer's configuration: G advice
    never points away from it. `learned_nothing`: the answer says the study cannot rank G, so no
    warning advises changing G. `extra` (e.g. the timing-noise warning) goes after the arms' warnings.
    """
    out: list[Finding] = []
    for a in arms:
        d = a.metrics.get("distinct_frac")
        if d is not None and d.mean is not None and d.mean < NEAR_DUPLICATE_DISTINCT_FRAC:
            head = f"{a.title}: only {d.mean * 100:.0f}% of each group's completions are distinct on average"
            if a.config.temperature < LOW_TEMPERATURE:
                advice, sug = _g_advice(a.config, "lower", recommended,
                                        " Raising the temperature or lowering num_generations would turn duplicates "
                                        "into contrast.")
                advice = (f"; temperature {a.config.temperature:g} is low for G={a.config.num_generations}: "
                          f"duplicates add cost, not contrast." + advice)
            else:
                advice, sug = _g_advice(a.config, "lower", recommended,
                                        " Raise the temperature or use a smaller G (with short exact answers some "
                                        "repetition is expected as the model learns).")
                advice = (f" at temperature {a.config.temperature:g}: the G={a.config.num_generations} samples mostly "
                          f"repeat each other, so a larger G buys duplicates rather than contrast." + advice)
            out.append(Finding("near_duplicates", head + advice, a.trials, arm=a.config, suggests=sug))
    for a in arms:
        c = a.metrics.get("completions_clipped_ratio")
        if c is not None and c.mean is not None and c.mean > TRUNCATED_CLIPPED_RATIO:
            out.append(Finding(
                "truncated",
                f"{a.title}: {c.mean * 100:.0f}% of completions were cut off at max_completion_length; "
                f"the reward is judging unfinished answers (raise trainer.max_completion_length).",
                a.trials,
            ))
    for a in arms:
        z = a.metrics.get("frac_reward_zero_std")
        if z is not None and z.mean is not None and z.mean > ZERO_SPREAD_FRACTION:
            expect = ""
            p = (success_p or {}).get(a.config)
            if p is not None and 0 <= p <= 1:
                expect = (f" (a binary reward at this configuration's success rate {p:.2f} predicts "
                          f"{zero_spread(a.config.num_generations, p) * 100:.0f}%)")
            if learned_nothing:
                advice, sug = (" The answer above explains why this study cannot rank G: change the prompts, the "
                               "budget or the model first."), ()
            else:
                advice, sug = _g_advice(a.config, "higher", recommended,
                                        " A larger num_generations, or easier/harder prompts, would give more groups "
                                        "some spread.")
            out.append(Finding(
                "zero_spread",
                f"{a.title}: {z.mean * 100:.0f}% of groups had no reward spread{expect}; those prompts give "
                f"zero advantage and no gradient." + advice,
                a.trials, arm=a.config, suggests=sug,
            ))
    out += list(extra)
    ooms = [r for r in records if r.outcome == Outcome.OOM.value and r.config is not None]
    if ooms:
        out.append(_oom_finding(records, ooms))
    by_reason: dict[str, list[TrialRecord]] = defaultdict(list)
    for r in records:
        if r.outcome == Outcome.FAILED.value:
            by_reason[r.reason or "no reason recorded"].append(r)
    for reason, rs in sorted(by_reason.items(), key=lambda kv: kv[1][0].number):
        which = ", ".join(f"#{r.number}" + (f" ({r.config.label})" if r.config else "") for r in rs)
        out.append(Finding("failed", f"{len(rs)} trial(s) failed: {which}. Reason: {clip(' '.join(reason.split()), 400)}",
                           tuple(r.number for r in rs)))
    # interrupted trials are queued again by the study, running ones belong to live workers: news, not faults
    for outcome, text in ((Outcome.INTERRUPTED, "were interrupted (a resumed study retries them)"),
                          (Outcome.RUNNING, "were still running when this report was written"),
                          (Outcome.QUEUED, "were queued and not run yet (a resumed study runs them)")):
        rs = [r for r in records if r.outcome == outcome.value]
        if rs:
            out.append(Finding(outcome.value, f"{len(rs)} trial(s) {text}: " + ", ".join(f"#{r.number}" for r in rs) + ".",
                               tuple(r.number for r in rs), severity="info"))
    ran = [a for a in arms if a.n > 0]
    if ran and all(a.n == 1 for a in ran) and len(ran) > 1:
        out.append(Finding(
            "single_seed",
            "Every configuration ran one seed: differences between them may be seed noise. "
            "Add seeds (study.seeds) before trusting a small difference.",
            severity="info",
        ))
    if ran and not any(a.is_baseline for a in arms):
        out.append(Finding("no_baseline", "The baseline configuration was not run: no deltas vs baseline.",
                           severity="info"))
    if bad_lines:
        out.append(Finding("unreadable", f"{bad_lines} line(s) of trial metrics/groups files were unreadable "
                           f"(usually a trial stopped mid-write) and were skipped.", severity="info"))
    return out


def _oom_finding(records: Sequence[TrialRecord], ooms: Sequence[TrialRecord]) -> Finding:
    """Where memory ran out, whether that configuration is at the edge (some seeds fit) or beyond it."""
    def size(c: Arm) -> tuple[int, int]:
        return (c.generation_batch_size, c.num_generations)

    oom_arms = sorted({r.config for r in ooms if r.config is not None}, key=size)
    first = oom_arms[0]
    parts = []
    for c in oom_arms:
        n_oom = sum(1 for r in ooms if r.config == c)
        n_all = sum(1 for r in records if r.config == c)
        edge = " (other seeds fit: at the edge of memory)" if any(
            r.config == c and r.outcome == Outcome.COMPLETED.value for r in records) else ""
        parts.append(f"{c.label}: {n_oom} of {n_all} trial(s){edge}")
    msg = (f"Out of memory began at num_generations={first.num_generations} with generation batch "
           f"{first.generation_batch_size}. " + "; ".join(parts) + ".")
    clean = [r.config for r in records if r.outcome == Outcome.COMPLETED.value and r.config is not None
             and r.config not in oom_arms]
    if clean:
        big = max(clean, key=size)
        msg += f" The largest configuration that never ran out of memory: {big.label}."
    return Finding("oom", msg, tuple(r.number for r in ooms))

"""The screen: a study stage that costs no training, then the arms it shows dominated leave the plan.

    grpo-ablate screen study.yaml          # `run` starts with it when the study has a `screen:` section

Two cheap, nearly noise-free looks at the study's own prompts and hardware, where trained held-out reward is
expensive and noisy: the probe (preflight/probe.py: a few real optimizer steps per arm on the study's hardware:
fits or out of memory, seconds per step, peak memory) and advise (preflight/advise.py: the starting model's
per-prompt success on the study's training prompts, so each G's share of groups without reward spread, over
the screen's whole range of G, e.g. 2-64). From these, each configuration's predicted learning signal (prompts
per step whose group has spread) per step and per device-hour, and the drop rule (preflight/screen_rule.py,
measured against training on the CPU tasks) decides which of the study's arms leave before training, each with
its reason. screen.json (files/screen_file.py) keeps it all; the plan (plan/cells.py) then trains the arms it
kept, the price counts what it spent, the report shows it as its own section.

It runs before the study's first trial: the probe it runs may take out-of-memory pairs out of the study's space,
which a started study must not see change (`grpo-ablate probe`'s rule).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Callable, Mapping

from grpo_ablate.config import Problem, StudyError
from grpo_ablate.config.hardware import space_for
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.screen_file import Screen, ScreenDrop, ScreenRow, save_screen
from grpo_ablate.preflight.advise import Advice, run_advise
from grpo_ablate.preflight.probe import run_probe
from grpo_ablate.preflight.screen_rule import RULES, SIGNAL_RATIO, Point, drops, kept
from grpo_ablate.plan.cells import ablation_arms, baseline_arm
from grpo_ablate.study.owner import check_output_dir, claim_output_dir
from grpo_ablate.study.setup import started_study
from grpo_ablate.core.vocab import Arm

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig
    from grpo_ablate.files.probe_file import Probe

__all__ = ["run_screen", "screen_before_training", "screen_text", "screened_study", "candidate_arms"]


def candidate_arms(study: "StudyConfig") -> list[Arm]:
    """The study's arms, as the ablation plans them (the baseline first): the ones the screen may drop."""
    searched = study.temperatures() if isinstance(study.temperatures(), list) else None
    temps = [float(t) for t in searched] if isinstance(searched, list) else None
    return [arm for arm, _ in ablation_arms(study.space, baseline_arm(study), temps)]


def screened_study(study: "StudyConfig") -> "StudyConfig":
    """The study with the screen's range of G and its temperatures as its search, for advise's predictions."""
    screen = study.file.screen
    assert screen is not None
    update: dict[str, object] = {}
    if screen.generations:
        update["num_generations"] = sorted(set(screen.generations) | {int(g) for g in study.generations()})
    if screen.temperatures:
        update["temperature"] = sorted(set(screen.temperatures))
    if not update:
        return study
    file = study.file.model_copy(update={"search": study.search.model_copy(update=update)})
    return dataclasses.replace(study, file=file, space=space_for(file))


def run_screen(study: "StudyConfig", *, log: Callable[[str], None] = print) -> Screen:
    """Probe the study's arms, advise over the screen's range, apply the drop rule; write and return screen.json."""
    screen = study.file.screen
    assert screen is not None, "run_screen needs a study with a `screen:` section"
    started = time.perf_counter()
    arms = candidate_arms(study)
    log(f"screen: probing {len({(a.num_generations, a.generation_batch_size) for a in arms})} configuration(s) of the "
        f"study's arms ({screen.probe_steps} step(s) each), then advise over G {screen.generations or 'the study'}'s")
    probe = run_probe(study, steps=screen.probe_steps, log=log)
    wide = screened_study(study)
    advice = run_advise(wide, k=screen.k, num_prompts=screen.prompts, seed=0,
                        temperatures=list(screen.temperatures) if screen.temperatures else None, log=log)
    rows = _rows(study, wide, arms, advice, probe)
    points = [Point(r.key, r.label, r.num_generations, r.temperature, candidate=r.candidate, baseline=r.baseline,
                    infeasible=r.infeasible, out_of_memory=r.out_of_memory, zero_spread=r.zero_spread,
                    signal_per_step=r.signal_per_step, seconds_per_step=r.seconds_per_step) for r in rows]
    dropped = drops(points)
    labels = {r.key: r.label for r in rows}
    result = Screen(
        owner=Owner.of(study), rows=rows,
        dropped=[ScreenDrop(key=k, label=labels[k], rule=d.rule, reason=d.reason, by=d.by) for k, d in dropped.items()],
        kept=[a.key for a in arms if a.key in set(kept(points, dropped))], confirm=screen.confirm, rules=list(RULES), ratio=SIGNAL_RATIO,
        seconds=round(time.perf_counter() - started, 2), gpus=int(study.hardware.gpus or 0),
        notes=_notes(rows, dropped, advice))
    save_screen(study.output_dir, result)
    return result


def screen_before_training(study: "StudyConfig", source: str, *, log: Callable[[str], None]) -> Screen:
    """Run the study's screen where it may run (a `screen:` section, a study not yet started), claiming its
    output folder first; StudyError else. `grpo-ablate screen` and `run` (before its first trial) call it."""
    if study.file.screen is None:
        raise StudyError([Problem(path="screen", message=(
            "the study has no screen: section; add `screen: {}` (the defaults) to screen its arms before training"))],
            source)
    check_output_dir(study)
    if (started := started_study(study)) is not None:
        raise StudyError([Problem(path="screen", message=(
            f"{started}: the screen's probe would change its feasible space under it; screen before the study's "
            "first `run`, or screen a new study.name (--set study.name=...)"))], source)
    claim_output_dir(study)
    return run_screen(study, log=log)


def _rows(study: "StudyConfig", wide: "StudyConfig", arms: list[Arm], advice: Advice, probe: "Probe") -> list[ScreenRow]:
    """One row per screened (G, batch, temperature): advise's prediction with the probe's pace where it timed it;
    the study's arms marked, an arm the probe saw run out of memory kept with its reason; G values the hardware
    refuses, with why."""
    base = baseline_arm(study).key
    keys = {a.key for a in arms}
    rows: dict[str, ScreenRow] = {}
    for p in advice.predictions:
        arm = Arm(p.num_generations, p.generation_batch_size, p.temperature)
        point = probe.point(p.num_generations, p.generation_batch_size)
        timed = point.seconds_per_step if point is not None and point.fits else None
        rows[arm.key] = ScreenRow(
            key=arm.key, label=arm.label, num_generations=arm.num_generations, temperature=arm.temperature,
            generation_batch_size=arm.generation_batch_size, candidate=arm.key in keys, baseline=arm.key == base,
            zero_spread=p.zero_spread, signal_per_step=p.informative_groups_per_step, seconds_per_step=timed,
            signal_per_hour=(round(p.informative_groups_per_step * 3600 / timed, 1) if timed else None),
            peak_memory_mb=point.peak_memory_mb if point is not None and point.fits else None)
    for arm in arms:
        if arm.key in rows:
            continue
        point = probe.point(arm.num_generations, arm.generation_batch_size)
        oom = (point.reason or "out of memory") if point is not None and point.outcome == "oom" else None
        rows[arm.key] = ScreenRow(key=arm.key, label=arm.label, num_generations=arm.num_generations,
                                  temperature=arm.temperature, generation_batch_size=arm.generation_batch_size,
                                  candidate=True, baseline=arm.key == base, out_of_memory=oom,
                                  infeasible=None if oom or point is not None else "no prediction (advise left it out)")
    refused: dict[int, str] = {}
    for r in wide.space.rejected:
        if isinstance(r.num_generations, int) and r.num_generations not in {p.num_generations for p in wide.space.feasible}:
            refused.setdefault(r.num_generations, r.reason)
    for g, reason in sorted(refused.items()):
        for t in advice.temperatures:
            key = f"G{g}|T{t:g}"
            rows[key] = ScreenRow(key=key, label=f"G={g}, T={t:g}", num_generations=g, temperature=t, infeasible=reason)
    return sorted(rows.values(), key=lambda r: (r.temperature, r.num_generations, r.generation_batch_size or 0))


def _notes(rows: list[ScreenRow], dropped: Mapping[str, object], advice: Advice) -> list[str]:
    """What the page says beside the table: advise's "G will not help here", and a configuration outside the
    study's arms that the screen predicts far ahead of every arm it keeps (not trained: the study's arms are
    fixed when it is priced)."""
    notes = [advice.answer] if advice.answer else []
    kept_rows = [r for r in rows if r.candidate and r.key not in dropped]
    unit = "signal_per_hour" if all(r.signal_per_hour is not None for r in kept_rows) else "signal_per_step"
    best = max((getattr(r, unit) or 0.0 for r in kept_rows), default=0.0)
    for r in rows:
        mine = getattr(r, unit)
        if not r.candidate and mine is not None and best > 0 and mine >= SIGNAL_RATIO * best:
            notes.append(f"{r.label} is not an arm of this study and is predicted {mine / best:.1f}x the learning "
                         f"signal of the best arm the screen keeps: add it to search.num_generations (a new study) "
                         f"to train it")
    return notes


def screen_text(screen: Screen) -> str:
    """The screen as the console prints it: the table, each drop with its reason, what the confirm stage trains."""
    lines = [f"screen: {len(screen.rows)} configuration(s) screened in {screen.seconds:.0f} s (no training); rules "
             f"{', '.join(screen.rules)} (dominated: below 1/{screen.ratio:g} of another arm's learning signal per step)"]
    lines.append(f"  {'configuration':<28} {'arm':<5} {'zero-spread':>11} {'signal/step':>11} {'s/step':>7} "
                 f"{'signal/h':>9}  verdict")
    drops_by = {d.key: d for d in screen.dropped}

    def f(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    for r in screen.rows:
        verdict = ("dropped: " + drops_by[r.key].rule if r.key in drops_by else "kept" if r.candidate
                   else f"not feasible: {r.infeasible}" if r.infeasible else "")
        lines.append(f"  {r.label:<28} {'base' if r.baseline else 'yes' if r.candidate else '':<5} "
                     f"{f(r.zero_spread, '.3f'):>11} {f(r.signal_per_step, '.2f'):>11} {f(r.seconds_per_step, '.2f'):>7} "
                     f"{f(r.signal_per_hour, ',.0f'):>9}  {verdict}")
    for d in screen.dropped:
        lines.append(f"dropped {d.reason}")
    lines += [f"note: {n}" for n in screen.notes]
    if not screen.confirm:
        lines.append("The study is the screen alone (screen.confirm: false): no arm is trained; the screen predicts, "
                     "it does not decide.")
    else:
        lines.append(f"confirm stage: {len(screen.kept)} arm(s) to train: {', '.join(screen.kept)}")
    return "\n".join(lines)

"""`grpo-ablate probe STUDY`: each G's largest generation batch that fits, from a few real steps.

Practitioners find capacity by hand: smallest G first, the largest generation batch that does
not run out of memory, then larger G with the batch shrunk to fit. This does the same with real
trials (launch/, `steps` optimizer steps each) on the study's own model, data,
rewards and hardware, in <output_dir>/probe/. Only feasible batches are tried; each G's batch is
bisected, for a larger G below the previous G's largest fit; no point runs twice. Out of memory means
CUDA's error on GPUs and hardware.memory_limit_mb on CPU (trainer/memory_cap.py). A point that
fails otherwise (a reward that raises, a timeout, too few prompts for the batch, a full disk) is
recorded with its reason and bounds the search like an out-of-memory point, but is not one:
probe.json keeps it as `failed`, and the study's space does not leave pairs out for it. The
probe holds a host CPU slot while it runs (launch/devices.py).

    grpo-ablate probe studies/tiny-cpu.yaml [--steps 2]
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from grpo_ablate.config import Problem, StudyError
from grpo_ablate.config.hardware import batch_shape
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.probe_file import Probe, ProbePoint, probe_table, save_probe
from grpo_ablate.launch import LauncherPool, run_trial
from grpo_ablate.launch.devices import cpu_slot
from grpo_ablate.plan.cells import baseline_arm
from grpo_ablate.core.schedule import prompts_per_round
from grpo_ablate.core.space import feasible_space
from grpo_ablate.study.trial_spec import build_spec
from grpo_ablate.contract.files import read_peak_memory
from grpo_ablate.core.vocab import METRICS_FILE, PROBE_FILE, Arm, Cell, Outcome

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["candidate_batches", "failed_points", "measure_point", "run_probe"]

PROBE_DIR = "probe"
STARTUP_ESTIMATE_S = 10.0  # process start + imports + model load, when no probe point measured it


def candidate_batches(study: "StudyConfig") -> dict[int, list[int]]:
    """Each feasible G's feasible generation batches, ascending (the study's list, else `auto`'s)."""
    batches: Any = study.search.generation_batch_size
    if batches in (None, "probed"):
        batches = "auto" if batches == "probed" else None
    space = feasible_space(batch_shape(study.file), study.generations(), batches, study.search.max_generation_batch_size)
    out: dict[int, list[int]] = {}
    for p in space.feasible:
        out.setdefault(p.num_generations, []).append(p.generation_batch_size)
    return {g: sorted(set(b)) for g, b in sorted(out.items())}


def _read_rows(trial_dir: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        for line in (trial_dir / METRICS_FILE).read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    except OSError:
        pass
    return rows


def _timing(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Seconds per step (TRL's `step_time`), split into generation and training.

    The recorder times each round's rollout (`generation_seconds`: generate, score, reference
    log-probs); training is the rest of the step. Rows without it (written by an earlier version)
    fall back to steps that generated minus steps that only trained, when the generation batch
    spans several optimizer steps.
    """
    times = [float(r["step_time"]) for r in rows if r.get("step_time") is not None]
    if not times:
        return {"seconds_per_step": None, "generation_seconds_per_step": None, "training_seconds_per_step": None,
                "samples_per_second": None, "tokens_per_second": None}
    total = sum(times)
    samples = sum(float(r.get("completions") or 0) for r in rows)
    tokens = sum(float(r.get("completion_tokens") or 0) for r in rows)
    per_step = total / len(times)
    gen_s = train_s = None
    timed = [float(r["generation_seconds"]) for r in rows if r.get("step_time") is not None
             and r.get("generation_seconds") is not None]
    if len(timed) == len(times):
        gen_s = min(per_step, sum(timed) / len(times))
        train_s = per_step - gen_s
    else:
        gen = [float(r["step_time"]) for r in rows if r.get("step_time") is not None and r.get("completions")]
        train = [float(r["step_time"]) for r in rows if r.get("step_time") is not None and not r.get("completions")]
        if gen and train:
            train_s = statistics.fmean(train)
            gen_s = max(0.0, statistics.fmean(gen) - train_s) * len(gen) / len(times)
    return {"seconds_per_step": round(per_step, 4), "generation_seconds_per_step": None if gen_s is None else round(gen_s, 4),
            "training_seconds_per_step": None if train_s is None else round(train_s, 4),
            "samples_per_second": round(samples / total, 2) if total > 0 else None,
            "tokens_per_second": round(tokens / total, 2) if total > 0 else None}


def measure_point(study: "StudyConfig", num_generations: int, generation_batch_size: int, trial_dir: Path, *, steps: int,
                  pool: "LauncherPool | None" = None, env: dict[str, str] | None = None) -> ProbePoint:
    """Run one real trial of `steps` optimizer steps at (G, batch) and measure it.

    With the launcher chosen for it (launch/registry.py), from `pool` when given
    (the probe's pool: each point in a fresh fork of the warm session's template).
    `env`: the trial's extra environment (the threads of the host CPU slot the probe holds).
    """
    known = study.data.num_prompts if study.data.task else study.data.max_samples  # None: the dataset's size is unknown here
    needed = prompts_per_round(generation_batch_size, num_generations)  # over every process
    if known is not None and known < needed:  # the trainer would wait for a round it can never fill, until the timeout
        return ProbePoint(num_generations=num_generations, generation_batch_size=generation_batch_size, fits=False,
                          outcome=Outcome.FAILED.value, reason=(
                              f"the training set has {known} prompt(s); a generation round at this batch needs {needed}"))
    temperature = study.fixed_temperature() if study.temperatures() is None else _first_temperature(study)
    cell = Cell(Arm(num_generations, generation_batch_size, temperature), study.study.seeds[0], "probe")
    spec = build_spec(study, cell, trial_dir, env, probe_steps=steps)  # the cell's batch, exactly `steps` steps
    started = time.perf_counter()
    result = pool.for_spec(spec).run(spec) if pool is not None else run_trial(spec)
    wall = time.perf_counter() - started
    rows = _read_rows(trial_dir)
    memory = read_peak_memory(trial_dir)
    cuda = [float(r["peak_memory_mb"]) for r in rows if r.get("peak_memory_mb") is not None] if memory.get("peak_cuda_mb") else []
    peak = max(cuda) if cuda else memory.get("peak_rss_mb")
    if result.outcome is Outcome.OOM and peak is None:
        peak = result.to_dict().get("peak_rss_mb")
    return ProbePoint(
        num_generations=num_generations, generation_batch_size=generation_batch_size,
        fits=result.outcome is Outcome.COMPLETED, outcome=result.outcome.value, reason=result.reason,
        peak_memory_mb=None if peak is None else round(float(peak), 1), memory_kind="cuda" if cuda else "rss",
        engine_memory_mb=max((float(r["engine_memory_mb"]) for r in rows if r.get("engine_memory_mb") is not None), default=None),
        steps=len([r for r in rows if r.get("step_time") is not None]), wall_seconds=round(wall, 2), **_timing(rows),
    )


def _first_temperature(study: "StudyConfig") -> float:
    t = study.temperatures()
    if isinstance(t, list):
        return float(max(t))  # the hottest decodes the longest completions: the memory bound
    return float(t.high)  # type: ignore[union-attr]


def run_probe(study: "StudyConfig", *, steps: int = 2, log: Callable[[str], None] = print, keep_trials: bool = False) -> Probe:
    """Bisect each G's generation batch; write and return probe.json's content.

    Each point runs in a fresh fork of one pre-imported template where the trial allows it
    (launch/template.py), so imports are paid once and nothing a point left behind (a
    CUDA allocator that ran out included) reaches the next; where no template serves (a visible
    GPU), each point is a process of its own.
    """
    candidates = candidate_batches(study)
    if not candidates:
        raise StudyError([Problem(path="search.num_generations", message=(
            "no feasible (num_generations, generation_batch_size) pair to probe; see `grpo-ablate plan`"))])
    root = study.output_dir / PROBE_DIR
    started = time.perf_counter()
    probe = Probe(owner=Owner.of(study), points=[], memory_limit_mb=study.hardware.memory_limit_mb, steps_per_point=steps)
    seen: dict[tuple[int, int], ProbePoint] = {}

    pool = LauncherPool(probe=True)

    def fits(g: int, b: int, threads: dict[str, str]) -> bool:
        if (g, b) not in seen:
            try:
                point = measure_point(study, g, b, root / f"G{g}-B{b}", steps=steps, pool=pool, env=threads or None)
            except Exception as e:  # noqa: BLE001 - the probe's own trouble at this point (a full disk...): its outcome
                point = ProbePoint(num_generations=g, generation_batch_size=b, fits=False, outcome=Outcome.FAILED.value,
                                   reason=f"{type(e).__name__}: {e}"[:500])
            seen[(g, b)] = point
            probe.points.append(point)
            if point.fits or point.outcome == Outcome.OOM.value:
                log(f"probe G={g:<3} batch={b:<5} {'fits' if point.fits else point.outcome.upper():<8} "
                    f"peak {point.peak_memory_mb or 0:.0f} MiB, {point.seconds_per_step or 0:.2f} s/step "
                    f"({point.wall_seconds or 0:.0f} s)")
            else:  # not evidence about memory; the search treats it as a bound and goes on
                log(f"probe G={g:<3} batch={b:<5} {point.outcome.upper():<8} {point.reason or 'no reason recorded'}")
        return seen[(g, b)].fits

    with cpu_slot(study.world_size) as threads, pool:
        _bisect(candidates, lambda g, b: fits(g, b, threads))
    probe.processes = pool.processes_started
    probe.total_seconds = round(time.perf_counter() - started, 2)
    probe.one_trial_estimate_s = _one_trial_estimate(study, probe)
    try:
        save_probe(study.output_dir, probe)
    except OSError as e:
        for line in probe_table(probe).splitlines():
            log(line)
        raise StudyError([Problem(path="", message=(
            f"cannot write {study.output_dir / PROBE_FILE} ({e.strerror or e}); what was measured is printed above: "
            "free some space (or fix the folder's permissions) and run the probe again"))]) from None
    if not keep_trials:
        shutil.rmtree(root, ignore_errors=True)
    return probe


def failed_points(probe: Probe) -> list[ProbePoint]:
    """Points that neither fit nor ran out of memory (a reward that raised, a timeout, a full disk...)."""
    return [p for p in probe.points if not p.fits and p.outcome != Outcome.OOM.value]


def _bisect(candidates: dict[int, list[int]], fits: Callable[[int, int], bool]) -> None:
    """Each G's largest fitting batch, asking `fits` as few times as the bisection allows."""
    previous_best: int | None = None
    for g, batches in candidates.items():
        lo, hi = -1, len(batches)  # batches[lo] fits (or none), batches[hi] runs out (or none)
        if previous_best is not None:
            # Generation memory follows the batch's completions, not G: a larger G fits no larger
            # batch than the last G did, so the search starts at the last fit and looks below it.
            hi = next((i for i, b in enumerate(batches) if b > previous_best), len(batches))
            start = max((i for i, b in enumerate(batches) if b <= previous_best), default=0)
            if fits(g, batches[start]):
                lo = start
            else:
                hi = start
        while hi - lo > 1:
            mid = (lo + hi + 1) // 2
            if fits(g, batches[mid]):
                lo = mid
            else:
                hi = mid
        previous_best = batches[lo] if lo >= 0 else previous_best


def _one_trial_estimate(study: "StudyConfig", probe: Probe) -> float | None:
    """One full trial at the baseline G's largest fit: start-up + the budget's steps at its pace.

    The start-up is the probe's own: a point that started a process paid it on top of its steps
    (the largest such overhead seen), else STARTUP_ESTIMATE_S.
    """
    best = probe.best()
    if not best:
        return None
    g = baseline_arm(study).num_generations
    point = best.get(g) or best[min(best, key=lambda x: abs(x - g))]
    overheads = [p.wall_seconds - p.steps * p.seconds_per_step for p in probe.points
                 if p.fits and p.wall_seconds is not None and p.seconds_per_step is not None]
    startup = max(overheads) if overheads else STARTUP_ESTIMATE_S
    steps = study.budget.max_steps or 100
    return round(startup + steps * (point.seconds_per_step or 0.0), 1)

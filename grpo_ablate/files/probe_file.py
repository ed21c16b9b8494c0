"""probe.json: what `grpo-ablate probe` measured, and the search space it leaves the study.

Pure data, no torch: config (space_for), plan and study setup read it, through one reader that
refuses a truncated, mistyped or foreign file (files/owned.py): an out-of-memory pair the probe
saw must never quietly become feasible again.

    python -c "from grpo_ablate.files.probe_file import probe_path; print(probe_path('runs/tiny-cpu'))"
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from grpo_ablate.core.bounds import BatchSize, Generations, Megabytes, Rate, Seconds, Steps
from grpo_ablate.files.owned import STRICT, Owner, read_owned, write_json
from grpo_ablate.core.space import FeasibleSpace, Rejection
from grpo_ablate.core.vocab import PROBE_FILE

__all__ = ["ProbePoint", "Probe", "host_peak_mb", "load_probe", "probe_path", "probed_space", "probe_table", "save_probe", "PROBE_FIX"]

PROBE_FIX = "delete it, then rerun `grpo-ablate probe STUDY` to measure again (every command reads it first)"


@dataclass
class ProbePoint:
    """One (G, generation batch) the probe ran for a few optimizer steps."""

    __pydantic_config__ = STRICT

    num_generations: Generations  # every number here within bounds.py's range: no G=0, no NaN seconds
    generation_batch_size: BatchSize
    fits: bool
    outcome: str
    reason: str | None = None
    peak_memory_mb: Megabytes | None = None
    memory_kind: str = "rss"  # "cuda" on GPUs, "rss" (the trial's process tree) on CPU
    engine_memory_mb: Megabytes | None = None  # a colocated vLLM engine's pool, apart from the trainer's peak above
    steps: Steps = 0
    seconds_per_step: Seconds | None = None
    generation_seconds_per_step: Seconds | None = None
    training_seconds_per_step: Seconds | None = None
    samples_per_second: Rate | None = None
    tokens_per_second: Rate | None = None
    wall_seconds: Seconds | None = None

    @property
    def label(self) -> str:
        return f"{self.num_generations}x{self.generation_batch_size}"


@dataclass
class Probe:
    """probe.json. `owner` and `points` are required: a file without them is not a probe's."""

    __pydantic_config__ = STRICT

    owner: Owner
    points: list[ProbePoint]
    total_seconds: Seconds = 0.0
    one_trial_estimate_s: Seconds | None = None
    memory_limit_mb: Megabytes | None = None
    steps_per_point: Steps = 2
    processes: Steps = 0  # processes the points ran in: 1 when they shared a session and none ran out of memory on CPU

    @property
    def study(self) -> str:
        return self.owner.study

    def best(self) -> dict[int, ProbePoint]:
        """Each G's largest fitting batch."""
        out: dict[int, ProbePoint] = {}
        for p in self.points:
            if p.fits and (p.num_generations not in out or p.generation_batch_size > out[p.num_generations].generation_batch_size):
                out[p.num_generations] = p
        return out

    def ooms(self) -> list[ProbePoint]:
        """Points that ran out of memory: a point that failed otherwise (outcome "failed") says nothing of memory."""
        return [p for p in self.points if not p.fits and p.outcome == "oom"]

    def point(self, num_generations: int, generation_batch_size: int) -> ProbePoint | None:
        return next((p for p in self.points if p.num_generations == num_generations
                     and p.generation_batch_size == generation_batch_size), None)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["best"] = {str(g): p.generation_batch_size for g, p in sorted(self.best().items())}
        return out


def probe_path(output_dir: str | os.PathLike[str]) -> Path:
    return Path(output_dir) / PROBE_FILE


def load_probe(output_dir: str | os.PathLike[str], owner: Owner) -> Probe | None:
    """The study's probe.json, None when there is none; a StudyError (exit 2, with the path and the
    fix) when it is truncated, mistyped, or was written for another study, model or hardware."""
    return read_owned(probe_path(output_dir), Probe, owner, PROBE_FIX)


def host_peak_mb(points: Sequence[ProbePoint], num_generations: Any, generation_batch_size: int | None) -> float | None:
    """The host memory (MB) the probe measured for a trial's shape: the largest process-tree peak among the points of
    its G that fit, of its generation batch when it names one (else any); None without one. Host (rss, CPU) points
    only: on GPUs the probe measures CUDA memory, which says nothing of the host's."""
    peaks = [float(p.peak_memory_mb) for p in points if p.fits and p.memory_kind == "rss" and p.peak_memory_mb is not None
             and p.num_generations == num_generations
             and (generation_batch_size is None or p.generation_batch_size == generation_batch_size)]
    return max(peaks) if peaks else None


def save_probe(output_dir: str | os.PathLike[str], probe: Probe) -> Path:
    return write_json(probe_path(output_dir), probe.to_dict())


def probed_space(space: FeasibleSpace, probe: Probe, *, largest_only: bool) -> FeasibleSpace:
    """The space without the pairs the probe saw run out of memory, nor any at or above one.

    `largest_only` (search.generation_batch_size: probed) keeps each G's largest fitting batch;
    a G whose every probed batch ran out of memory is rejected.
    """
    best = probe.best()
    oom = {(p.num_generations, p.generation_batch_size): p for p in probe.ooms()}
    feasible = []
    rejected = list(space.rejected)
    for pair in space.feasible:
        key = (pair.num_generations, pair.generation_batch_size)
        # The probe's own rule: memory grows with the batch and G, so a pair at or above an OOM pair is out too.
        above = next((p for (g, b), p in oom.items() if g <= key[0] and b <= key[1]), None)
        if key in oom:
            rejected.append(Rejection(*key, f"the probe ran out of memory at this pair: {oom[key].reason or 'oom'}"))
        elif above is not None:
            rejected.append(Rejection(*key, f"at or above the pair {above.label} that ran out of memory in the probe"))
        elif not largest_only or (pair.num_generations in best and best[pair.num_generations].generation_batch_size == key[1]):
            feasible.append(pair)
    for g in space.generations:
        if largest_only and g not in best:
            rejected.append(Rejection(g, None, "the probe found no generation batch that fits in memory for this G"))
    return replace(space, feasible=tuple(feasible), rejected=tuple(rejected), batch_searched=True)


def probe_table(probe: Probe) -> str:
    """For each G, the largest batch that fits and its throughput; then the probe's cost."""
    lines = [f"{'G':>4} {'largest batch':>13} {'peak MiB':>9} {'s/step':>7} {'gen s':>6} {'train s':>7} "
             f"{'samples/s':>9} {'tokens/s':>9} {'OOM at':>8}"]
    best = probe.best()
    gens = sorted({p.num_generations for p in probe.points})
    for g in gens:
        ooms = sorted(p.generation_batch_size for p in probe.ooms() if p.num_generations == g)
        oom = str(ooms[0]) if ooms else "-"
        p = best.get(g)
        if p is None:
            lines.append(f"{g:>4} {'none fits':>13} {'':>9} {'':>7} {'':>6} {'':>7} {'':>9} {'':>9} {oom:>8}")
            continue

        def f(v: float | None, spec: str) -> str:
            return "-" if v is None else format(v, spec)

        lines.append(f"{g:>4} {p.generation_batch_size:>13} {f(p.peak_memory_mb, '.0f'):>9} {f(p.seconds_per_step, '.2f'):>7} "
                     f"{f(p.generation_seconds_per_step, '.2f'):>6} {f(p.training_seconds_per_step, '.2f'):>7} "
                     f"{f(p.samples_per_second, '.1f'):>9} {f(p.tokens_per_second, '.0f'):>9} {oom:>8}")
    estimate = f"{probe.one_trial_estimate_s:.0f} s" if probe.one_trial_estimate_s else "unknown"
    processes = f" in {probe.processes} process(es)" if probe.processes else ""
    lines.append(f"probe: {len(probe.points)} point(s) x {probe.steps_per_point} step(s){processes} in "
                 f"{probe.total_seconds:.0f} s; one full trial is estimated at {estimate}")
    return "\n".join(lines)

"""The study's objectives, and the trials no other beats on all of them (the Pareto front)."""

from __future__ import annotations

from typing import Sequence

from grpo_ablate.records.trial_record import StudyAttrs
from grpo_ablate.core.vocab import metric

__all__ = ["study_objectives", "pareto_front"]


def study_objectives(study: StudyAttrs, fallback: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(metric, direction) pairs the study recorded, else `fallback`.

    A stored objective without a direction takes the registry's.
    """
    out = [(m, d or metric(m).direction or "maximize") for m, d in study.objectives]
    return out or list(fallback)


def pareto_front(points: Sequence[tuple[int, Sequence[float]]], directions: Sequence[str]) -> set[int]:
    """Numbers of the non-dominated points (no other point at least as good everywhere, better somewhere)."""
    signs = [1.0 if d == "maximize" else -1.0 for d in directions]
    scored = [(n, [s * v for s, v in zip(signs, vals)]) for n, vals in points]
    front = set()
    for n, v in scored:
        dominated = any(
            all(o >= x for o, x in zip(ov, v)) and any(o > x for o, x in zip(ov, v))
            for m, ov in scored if m != n
        )
        if not dominated:
            front.add(n)
    return front

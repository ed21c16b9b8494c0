"""The study's objectives, and the trials no other beats on all of them (the Pareto front)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from grpo_ablate.vocab import metric

__all__ = ["study_objectives", "pareto_front"]


def study_objectives(user_attrs: Mapping[str, Any], fallback: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(metric, direction) pairs from the study's "objectives" attr, else `fallback`.

    A stored objective without a direction takes the registry's.
    """
    objs = user_attrs.get("objectives")
    out: list[tuple[str, str]] = []
    if isinstance(objs, list):
        for o in objs:
            if isinstance(o, dict) and o.get("metric"):
                m = str(o["metric"])
                out.append((m, str(o.get("direction") or metric(m).direction or "maximize")))
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

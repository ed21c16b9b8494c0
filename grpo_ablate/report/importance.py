"""Parameter importances: how much of each objective's variation each searched parameter explains.

Optuna's own evaluator, over completed trials within the memory limit only.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Sequence

import optuna

if TYPE_CHECKING:
    from optuna.trial import FrozenTrial

__all__ = ["param_importances"]


def param_importances(frozen: Sequence["FrozenTrial"], feasible: set[int],
                      objectives: Sequence[tuple[str, str]]) -> tuple[dict[str, dict[str, float]], str | None]:
    """Importances per objective over the trials numbered in `feasible`; (importances, why-not note).

    OOM trials are COMPLETE with a violated constraint; their objective values are not results,
    so the feasible trials are copied into an in-memory study per objective.
    """
    trials = [t for t in frozen if t.number in feasible and t.values is not None]
    varying = {k for t in trials for k in t.params if len({repr(u.params.get(k)) for u in trials}) > 1}
    if len(trials) < 3 or not varying:
        return {}, "needs at least 3 completed trials with a parameter that varies"
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the scratch studies are not news
    try:
        return _importances(trials, varying, objectives)
    finally:
        optuna.logging.set_verbosity(verbosity)


def _importances(trials: Sequence["FrozenTrial"], varying: set[str],
                 objectives: Sequence[tuple[str, str]]) -> tuple[dict[str, dict[str, float]], str | None]:
    out: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    for i, (name, direction) in enumerate(objectives):
        st = optuna.create_study(direction=optuna.study.StudyDirection[direction.upper()])
        for t in trials:
            if i >= len(t.values):
                continue
            st.add_trial(optuna.trial.create_trial(
                params=t.params, distributions=t.distributions, value=t.values[i],
            ))
        try:
            with warnings.catch_warnings(record=True) as caught:  # the evaluator's caveats belong on the page,
                warnings.simplefilter("always")  # not as stray UserWarnings at the end of `run`
                imp = optuna.importance.get_param_importances(st, params=sorted(varying))
        except Exception as e:  # evaluator limits (too few distinct values, ...) are not report errors
            notes.append(f"{name}: {type(e).__name__}: {e}")
            continue
        notes += [f"{name}: {w.message}" for w in caught if issubclass(w.category, UserWarning)]
        out[name] = {k: float(v) for k, v in imp.items()}
    return out, ("; ".join(notes) or None)

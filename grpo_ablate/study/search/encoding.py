"""How an arm becomes Optuna params, so that samplers see the structure of the space.

    from grpo_ablate.study.search.encoding import suggest_arm, encode_arm, ORDINAL

Each param name is spelled once, in the trial-record schema (trial_record.py: G_RANK_PARAM, LABEL_PARAM,
G_PARAM, TEMPERATURE_PARAM, batch_param), which also reads a trial's arm back from its params
(`arm_fields`, `trial_arm`): what a trial stores is the record's, how an arm is drawn is this module's.
Three encodings:
- ORDINAL (the adaptive samplers' default): G is an ordinal rank over the feasible Gs
  (`num_generations_rank`, an int; feasible Gs are usually log-spaced, so the rank is their log
  scale), and the generation batch is conditional on G (`generation_batch_size|G=8`, drawn only
  from the batches feasible for that G). Only feasible pairs can be proposed.
- LABEL (the old one): one categorical over "GxB" labels ("8x64"), with no order.
- PLAN (grid and ablation studies, whose trials are all queued): G as its text
  (`num_generations`, a schedule's label included) when every G has one feasible batch, which
  keeps the dashboard's plots clean; the LABEL param when batches are searched too.
A categorical's text is only ever looked up in the study's feasible space (which the loader
built), never parsed back into a G.
ORDINAL and LABEL are compared by benchmarks/search_efficiency.py.
Temperature is a float when the study gives a range, a categorical when it gives a list.
Seeds are never params: they are replicates, carried by a queued cell (study/ledger.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_ablate.records.trial_record import G_PARAM, G_RANK_PARAM, LABEL_PARAM, TEMPERATURE_PARAM, batch_param
from grpo_ablate.core.vocab import Arm, generations_text, pair_label
from grpo_ablate.config import FloatRange

if TYPE_CHECKING:  # for annotations only: optuna loads in the functions that use it; a space is handed in
    import optuna

    from grpo_ablate.core.space import FeasibleSpace

__all__ = ["ORDINAL", "LABEL", "PLAN", "DEFAULT_ENCODING", "suggest_arm", "encode_arm"]

ORDINAL = "ordinal"
LABEL = "label"
PLAN = "plan"
DEFAULT_ENCODING = ORDINAL  # benchmarks/search_efficiency.py: tied with LABEL within noise, more right answers


def _batches(space: "FeasibleSpace", g: int) -> list[int]:
    return sorted(p.generation_batch_size for p in space.feasible if p.num_generations == g)


def _distributions(space: "FeasibleSpace", temps: Any, encoding: str, g: int) -> dict[str, "optuna.distributions.BaseDistribution"]:
    # lazy: Optuna only while a study runs; every command imports study/
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution


    out: dict[str, Any] = {}
    gens = list(space.generations)
    if encoding == LABEL or (encoding == PLAN and space.batch_choice):
        out[LABEL_PARAM] = CategoricalDistribution([p.label for p in space.feasible])
    elif encoding == PLAN:
        out[G_PARAM] = CategoricalDistribution([generations_text(x) for x in space.generations])
    else:
        if len(gens) > 1:
            out[G_RANK_PARAM] = IntDistribution(0, len(gens) - 1)
        bs = _batches(space, g)
        if len(bs) > 1:
            out[batch_param(g)] = CategoricalDistribution(bs)
    if isinstance(temps, FloatRange):
        out[TEMPERATURE_PARAM] = FloatDistribution(temps.low, temps.high, log=temps.log)
    elif isinstance(temps, list):
        out[TEMPERATURE_PARAM] = CategoricalDistribution([float(x) for x in temps])
    return out


def suggest_arm(trial: "optuna.Trial", space: "FeasibleSpace", temps: Any, fixed_temperature: float,
                encoding: str = DEFAULT_ENCODING) -> Arm:
    """Draw one feasible arm through `trial` (the real sampler decides every value)."""

    if encoding == LABEL or (encoding == PLAN and space.batch_choice):
        label = str(trial.suggest_categorical(LABEL_PARAM, [p.label for p in space.feasible]))
        pair = space.by_label(label)
        g, b = pair.num_generations, pair.generation_batch_size
    elif encoding == PLAN:
        by_text = {generations_text(x): x for x in space.generations}  # the choice's own G, looked up, not parsed
        choice = trial.suggest_categorical(G_PARAM, list(by_text))
        assert isinstance(choice, (int, str))
        found = space.pair(by_text[choice])
        assert found is not None  # every choice is a feasible G
        g, b = found.num_generations, found.generation_batch_size
    else:
        gens = list(space.generations)
        g = gens[trial.suggest_int(G_RANK_PARAM, 0, len(gens) - 1)] if len(gens) > 1 else gens[0]
        bs = _batches(space, g)
        b = int(trial.suggest_categorical(batch_param(g), bs)) if len(bs) > 1 else bs[0]  # type: ignore[arg-type]
    if isinstance(temps, FloatRange):
        t = trial.suggest_float(TEMPERATURE_PARAM, temps.low, temps.high, log=temps.log)
    elif isinstance(temps, list):
        t = float(trial.suggest_categorical(TEMPERATURE_PARAM, [float(x) for x in temps]))  # type: ignore[arg-type]
    else:
        t = fixed_temperature
    return Arm(g, b, float(t))


def encode_arm(arm: Arm, space: "FeasibleSpace", temps: Any, encoding: str = DEFAULT_ENCODING
               ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(params, distributions) that make `suggest_arm` return this arm; None when it is not feasible here."""

    if space.pair(arm.num_generations, arm.generation_batch_size) is None:
        return None
    dists = _distributions(space, temps, encoding, arm.num_generations)
    params: dict[str, Any] = {}
    for name in dists:
        if name == LABEL_PARAM:
            params[name] = pair_label(arm.num_generations, arm.generation_batch_size)
        elif name == G_PARAM:
            params[name] = generations_text(arm.num_generations)
        elif name == G_RANK_PARAM:
            params[name] = list(space.generations).index(arm.num_generations)
        elif name == TEMPERATURE_PARAM:
            params[name] = float(arm.temperature)
        else:
            params[name] = arm.generation_batch_size
    if isinstance(temps, FloatRange) and not (temps.low <= arm.temperature <= temps.high):
        return None
    if isinstance(temps, list) and float(arm.temperature) not in [float(x) for x in temps]:
        return None
    return params, dists

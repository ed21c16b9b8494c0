"""How an arm becomes Optuna params, so that samplers see the structure of the space.

    from grpo_ablate.search.encoding import suggest_arm, encode_arm, ORDINAL

Two encodings, compared by benchmarks/search_efficiency.py:
- ORDINAL (the default): G is an ordinal rank over the feasible Gs (`num_generations_rank`,
  an int; feasible Gs are usually log-spaced, so the rank is their log scale), and the
  generation batch is conditional on G (`generation_batch_size|G=8`, drawn only from the
  batches feasible for that G). Only feasible pairs can be proposed.
- LABEL (the old one): one categorical over "GxB" labels ("8x64"), with no order.
Temperature is a float when the study gives a range, a categorical when it gives a list.
Seeds are never params of adaptive searches: they are replicates (see `replicate_seed`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from grpo_ablate.vocab import Arm, pair_label

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.space import FeasibleSpace

__all__ = ["ORDINAL", "LABEL", "ENCODINGS", "DEFAULT_ENCODING", "G_RANK", "batch_param", "suggest_arm",
           "encode_arm", "replicate_seed"]

ORDINAL = "ordinal"
LABEL = "label"
ENCODINGS = (ORDINAL, LABEL)
DEFAULT_ENCODING = ORDINAL  # benchmarks/search_efficiency.py: tied with LABEL within noise, more right answers
G_RANK = "num_generations_rank"
LABEL_PARAM = "generation"

Temperatures = "FloatRange | list[float] | None"


def batch_param(num_generations: int) -> str:
    """The conditional batch param: its name carries G, so each G has its own feasible list."""
    return f"generation_batch_size|G={num_generations}"


def _batches(space: "FeasibleSpace", g: int) -> list[int]:
    return sorted(p.generation_batch_size for p in space.feasible if p.num_generations == g)


def _distributions(space: "FeasibleSpace", temps: Any, encoding: str, g: int) -> dict[str, "optuna.distributions.BaseDistribution"]:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from grpo_ablate.config import FloatRange

    out: dict[str, Any] = {}
    gens = list(space.generations)
    if encoding == LABEL:
        out[LABEL_PARAM] = CategoricalDistribution([p.label for p in space.feasible])
    else:
        if len(gens) > 1:
            out[G_RANK] = IntDistribution(0, len(gens) - 1)
        bs = _batches(space, g)
        if len(bs) > 1:
            out[batch_param(g)] = CategoricalDistribution(bs)
    if isinstance(temps, FloatRange):
        out["temperature"] = FloatDistribution(temps.low, temps.high, log=temps.log)
    elif isinstance(temps, list):
        out["temperature"] = CategoricalDistribution([float(x) for x in temps])
    return out


def suggest_arm(trial: "optuna.Trial", space: "FeasibleSpace", temps: Any, fixed_temperature: float,
                encoding: str = DEFAULT_ENCODING) -> Arm:
    """Draw one feasible arm through `trial` (the real sampler decides every value)."""
    from grpo_ablate.config import FloatRange

    if encoding == LABEL:
        label = str(trial.suggest_categorical(LABEL_PARAM, [p.label for p in space.feasible]))
        pair = space.by_label(label)
        g, b = pair.num_generations, pair.generation_batch_size
    else:
        gens = list(space.generations)
        g = gens[trial.suggest_int(G_RANK, 0, len(gens) - 1)] if len(gens) > 1 else gens[0]
        bs = _batches(space, g)
        b = int(trial.suggest_categorical(batch_param(g), bs)) if len(bs) > 1 else bs[0]  # type: ignore[arg-type]
    if isinstance(temps, FloatRange):
        t = trial.suggest_float("temperature", temps.low, temps.high, log=temps.log)
    elif isinstance(temps, list):
        t = float(trial.suggest_categorical("temperature", [float(x) for x in temps]))  # type: ignore[arg-type]
    else:
        t = fixed_temperature
    return Arm(g, b, float(t))


def encode_arm(arm: Arm, space: "FeasibleSpace", temps: Any, encoding: str = DEFAULT_ENCODING
               ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(params, distributions) that make `suggest_arm` return this arm; None when it is not feasible here."""
    from grpo_ablate.config import FloatRange

    if space.pair(arm.num_generations, arm.generation_batch_size) is None:
        return None
    dists = _distributions(space, temps, encoding, arm.num_generations)
    params: dict[str, Any] = {}
    for name in dists:
        if name == LABEL_PARAM:
            params[name] = pair_label(arm.num_generations, arm.generation_batch_size)
        elif name == G_RANK:
            params[name] = list(space.generations).index(arm.num_generations)
        elif name == "temperature":
            params[name] = float(arm.temperature)
        else:
            params[name] = arm.generation_batch_size
    if isinstance(temps, FloatRange) and not (temps.low <= arm.temperature <= temps.high):
        return None
    if isinstance(temps, list) and float(arm.temperature) not in [float(x) for x in temps]:
        return None
    return params, dists


def replicate_seed(seeds: Sequence[int], replicates_so_far: int) -> int:
    """The seed of an arm's next replicate: its first seed, then the next, round and round."""
    return int(seeds[replicates_so_far % len(seeds)])

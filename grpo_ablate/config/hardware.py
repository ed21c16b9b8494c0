"""A study's launch shape: the world size of one trial and the batch arithmetic TRL will do.

    grpo-ablate plan studies/openr1-1.5b-numina-8gpu.yaml   # "7 training process(es) x 16 per device"

The world size comes from hardware.num_processes; else, with vLLM in server mode, from the GPUs
per trial less the server's (overriding the accelerate config's num_processes, as
`accelerate launch --num_processes 7` does in Open R1's launch); else the accelerate config's
num_processes; else the GPUs per trial; else 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from grpo_ablate.core.errors import StudyError
from grpo_ablate.config.schema import IntRange, StudyFile
from grpo_ablate.trl_facts.fields import trl_default
from grpo_ablate.config.yaml_io import read_yaml_file
from grpo_ablate.core.schedule import parse_generations
from grpo_ablate.core.space import BatchShape, FeasibleSpace, Rejection, feasible_space
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.probe_file import load_probe, probed_space

__all__ = ["accelerate_processes", "world_size", "world_size_reason", "batch_shape", "trainer_batch_shape", "space_for",
           "read_generations"]


def accelerate_processes(path: str) -> int | None:
    """num_processes of an accelerate config file; None when unreadable or unset."""
    try:
        cfg = read_yaml_file(Path(path), what="accelerate config")
    except StudyError:
        return None
    n = cfg.get("num_processes") if isinstance(cfg, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def world_size(sf: StudyFile) -> int:
    """Training processes per trial (see the module docstring for the order)."""
    return _world(sf)[0]


def world_size_reason(sf: StudyFile) -> str:
    """Where the world size came from, in words, for `plan`."""
    return _world(sf)[1]


def _world(sf: StudyFile) -> tuple[int, str]:
    hw = sf.hardware
    if hw.num_processes:
        return hw.num_processes, f"{hw.num_processes} training process(es) from hardware.num_processes"
    from_file = accelerate_processes(hw.accelerate_config) if hw.accelerate_config else None
    if hw.gpus and hw.vllm.mode == "server":
        n = max(1, hw.gpus - hw.vllm.server_gpus)
        text = (f"{n} training process(es) = hardware.gpus {hw.gpus} - vllm.server_gpus {hw.vllm.server_gpus} "
                f"(the vLLM server's)")
        if from_file is not None and from_file != n:
            text += (f"; this overrides num_processes: {from_file} in {Path(str(hw.accelerate_config)).name}, "
                     f"as `accelerate launch --num_processes {n}` does")
        return n, text
    if from_file:
        return from_file, f"{from_file} training process(es) from num_processes in {Path(str(hw.accelerate_config)).name}"
    if hw.gpus:
        return hw.gpus, f"{hw.gpus} training process(es), one per GPU (hardware.gpus)"
    return 1, "1 training process (set hardware.num_processes or gpus for more)"


def batch_shape(sf: StudyFile) -> BatchShape:
    """What TRL's divisibility rules read, from the study's trainer section and world size."""
    return trainer_batch_shape(sf.trainer, world_size(sf))


def trainer_batch_shape(t: Mapping[str, Any], world: int) -> BatchShape:
    """The batch shape of GRPOConfig keyword arguments: one rule for the study and the trial
    process (trainer/build.py). A value that is not a positive int is unset: TRL's default."""

    def positive(key: str) -> int | None:
        v = t.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

    def num(key: str) -> int:
        return positive(key) or int(trl_default(key))

    eval_strategy = t.get("eval_strategy", "no")
    eval_on = bool(t.get("do_eval")) or (eval_strategy not in (None, "no"))
    return BatchShape(
        world_size=world,
        per_device_train_batch_size=num("per_device_train_batch_size"),
        gradient_accumulation_steps=num("gradient_accumulation_steps"),
        steps_per_generation=positive("steps_per_generation"),
        eval_enabled=eval_on and eval_strategy != "no",
        per_device_eval_batch_size=num("per_device_eval_batch_size"),
        num_generations_eval=positive("num_generations_eval"),
        num_iterations=num("num_iterations"),
    )


def read_generations(values: Iterable[Any]) -> tuple[list[int], list[Rejection]]:
    """The study file's values of num_generations as values (ints, schedule objects), and a rejection
    with the parser's reason for each label that does not read. G is read from text only in config/."""
    out: list[int] = []
    unreadable: list[Rejection] = []
    for value in values:
        try:
            out.append(parse_generations(value))
        except ValueError as e:
            unreadable.append(Rejection(str(value), None, str(e)))
    return out, unreadable


def space_for(sf: StudyFile) -> FeasibleSpace:
    """The feasible (num_generations, generation_batch_size) pairs of the study's search."""
    search = sf.search
    g = search.num_generations
    gens, unreadable = read_generations(range(g.low, g.high + 1, g.step) if isinstance(g, IntRange) else g)
    batches: Any = search.generation_batch_size
    if batches is None and "generation_batch_size" in sf.trainer:
        batches = [sf.trainer["generation_batch_size"]]
    space = feasible_space(batch_shape(sf), gens, "auto" if batches == "probed" else batches, search.max_generation_batch_size,
                           unreadable)
    return _with_probe(sf, space, batches)


def _with_probe(sf: StudyFile, space: FeasibleSpace, batches: Any) -> FeasibleSpace:
    """With a probe.json in the study's folder: its OOM pairs out; `probed` keeps each G's largest fit.

    Out of the space, an OOM pair is never proposed, planned or launched, whatever the sampler;
    this holds for TRL's own batch too (the probe then tried each G at that batch).
    """

    probe = load_probe(sf.study.output_dir or Path("runs") / sf.study.name, Owner.of(sf))
    return space if probe is None else probed_space(space, probe, largest_only=batches == "probed")

"""How a recipe's run was sharded: the accelerate config an Open R1 recipe trains under (DeepSpeed ZeRO-2/3),
and a note when a multi-process study would launch plain DDP instead.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from grpo_ablate.config.recipes.file import Recipe, RecipeNote
from grpo_ablate.config.recipes.stack import is_open_r1, recipe_stack

__all__ = ["sharding_note", "recipe_accelerate_config"]


def sharding_note(recipe: Recipe, hardware: Any) -> RecipeNote | None:
    """A multi-process study without an accelerate config launches plain DDP, where a recipe was
    trained sharded (Open R1's under DeepSpeed ZeRO-2/3): say so, and name a config lying near the recipe."""
    hw = hardware if isinstance(hardware, dict) else {}
    processes = [v for v in (hw.get("gpus"), hw.get("num_processes")) if isinstance(v, int) and not isinstance(v, bool)]
    if hw.get("accelerate_config") or not processes or max(processes) < 2:
        return None
    near = sorted({str(p) for parent in list(recipe.path.resolve().parents)[:4]
                   for folder in ("accelerate_configs", "accelerate") for p in (parent / folder).glob("zero*.yaml")})
    where = f" (e.g. {near[0]})" if near else ""
    return RecipeNote(f"{recipe.path.name}: names no accelerate config, so trials launch as plain DDP (each process holds "
                      f"the whole model and optimizer state); recipes like Open R1's train under DeepSpeed ZeRO-2/3: "
                      f"set hardware.accelerate_config{where}")


# Open R1 trains its recipes under DeepSpeed (recipes/accelerate_configs/zero2.yaml, zero3.yaml for its 7B+
# models); this repository carries configs of the same stages for a node whose 8th GPU serves vLLM.
_BUNDLED_ACCELERATE = Path(__file__).resolve().parents[3] / "sweeps" / "accelerate"


_LARGE_MODEL = re.compile(r"(?<![0-9.])([0-9]+(?:\.[0-9]+)?)\s*[bB](?![a-zA-Z])")


def recipe_accelerate_config(recipe: Path, values: dict[str, Any]) -> tuple[Path, str] | None:
    """The accelerate config an Open R1 recipe trains under, for a multi-GPU study: ZeRO-3 for a model of 7B
    parameters or more (by its name), else ZeRO-2; the file of that name near the recipe (an Open R1
    checkout's recipes/accelerate_configs/), else this repository's sweeps/accelerate/. (path, why)."""
    if not is_open_r1(recipe_stack(values)):
        return None
    size = _LARGE_MODEL.search(str(values.get("model_name_or_path") or "").split("/")[-1])
    stage = "zero3" if size and float(size.group(1)) >= 7 else "zero2"
    why = (f"Open R1 trains {'7B+ models' if stage == 'zero3' else 'its smaller models'} under DeepSpeed "
           f"{stage.replace('zero', 'ZeRO-')} (its recipes/accelerate_configs/{stage}.yaml)")
    for parent in list(recipe.resolve().parents)[:4]:
        for folder in ("accelerate_configs", "accelerate"):
            if (parent / folder / f"{stage}.yaml").is_file():
                return parent / folder / f"{stage}.yaml", why
    bundled = _BUNDLED_ACCELERATE / f"{stage}.yaml"
    return (bundled, why) if bundled.is_file() else None

"""grpo-ablate: decide GRPO's num_generations, temperature and generation batch on real runs.

    grpo-ablate plan studies/tiny-cpu.yaml    # which pairs TRL accepts here, and why not the rest
    grpo-ablate run studies/tiny-cpu.yaml     # the Optuna study of real GRPO trials, then the report

The public API is small: load a study, compute its feasible space, run it, report it.
Heavy libraries (torch, trl) are imported only by the trial process; validation reads
GRPOConfig's field names once in a child process and caches them.
"""

import importlib
from typing import TYPE_CHECKING, Any

from grpo_ablate.core.errors import StudyError
from grpo_ablate.core.space import BatchShape, FeasiblePair, FeasibleSpace, Rejection, check_pair, feasible_space

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig, load_study

# Loaded on first use: every `import grpo_ablate.<x>` runs this file, the trial process's included, and the trial
# imports nothing of the study file's code (config/, its pydantic schema; tests/test_layering.py).
_FROM_CONFIG = ("StudyConfig", "load_study")

__version__ = "0.1.0"

__all__ = [
    "BatchShape",
    "FeasiblePair",
    "FeasibleSpace",
    "Rejection",
    "StudyConfig",
    "StudyError",
    "check_pair",
    "feasible_space",
    "load_study",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _FROM_CONFIG:
        return getattr(importlib.import_module("grpo_ablate.config"), name)
    raise AttributeError(f"module 'grpo_ablate' has no attribute {name!r}")

"""grpo-ablate: decide GRPO's num_generations, temperature and generation batch on real runs.

    grpo-ablate plan studies/tiny-cpu.yaml    # which pairs TRL accepts here, and why not the rest
    grpo-ablate run studies/tiny-cpu.yaml     # the Optuna study of real GRPO trials, then the report

The public API is small: load a study, compute its feasible space, run it, report it.
Heavy libraries (torch, trl) are imported only by the trial process; validation reads
GRPOConfig's field names once in a child process and caches them.
"""

from grpo_ablate.config import Study, StudyError, load_study
from grpo_ablate.space import BatchShape, FeasiblePair, FeasibleSpace, Rejection, check_pair, feasible_space

__version__ = "0.1.0"

__all__ = [
    "BatchShape",
    "FeasiblePair",
    "FeasibleSpace",
    "Rejection",
    "Study",
    "StudyError",
    "check_pair",
    "feasible_space",
    "load_study",
    "__version__",
]

"""`python -m grpo_ablate.launch <trial_dir>/spec.json`: re-run one trial from its spec, as a study would."""

from __future__ import annotations

import json
import sys

from grpo_ablate.contract.spec import TrialSpec
from grpo_ablate.core.vocab import Outcome

from .registry import run_trial


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m grpo_ablate.launch <trial_dir>/spec.json", file=sys.stderr)
        return 2
    spec = TrialSpec.load(argv[0])
    result = run_trial(spec, on_progress=lambda row: print(json.dumps({k: row.get(k) for k in ("step", "train_seconds", "reward")})))
    print(json.dumps({k: v for k, v in result.to_dict().items() if k != "log_tail"}, indent=2, default=str))
    return 0 if result.outcome is Outcome.COMPLETED else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""`grpo-ablate advise STUDY [--k 16] [--prompts 64] [--seed 0] [--enqueue]`: which G pays off,
predicted from samples of the starting model (no training); the prediction is
preflight/advise.py's, this prints it and, with --enqueue, seeds the study with the shortlist.
"""

from __future__ import annotations

import argparse
import sys

from grpo_ablate.plan.cells import baseline_arm
from grpo_ablate.plan.cells import completions_per_trial
from grpo_ablate.core.bounds import flag_value
from grpo_ablate.commands.common import add_study, EXIT_OK, EXIT_USAGE, err, load
from grpo_ablate.preflight.advise import advise_text, run_advise
from grpo_ablate.study.owner import claim_output_dir
from grpo_ablate.study.setup import describe_study, enqueue_shortlist, open_study, space_changed
from grpo_ablate.records.trial_record import study_attrs

__all__ = ["add_parser", "run"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`advise`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("advise", help="predict which G pays off from samples of the starting model (no training)")
    add_study(p)
    p.add_argument("--k", type=flag_value("num_generations"), default=16, help="completions sampled per prompt (>= 2)")
    p.add_argument("--prompts", type=flag_value("prompts"), default=64, help="training prompts sampled")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, action="append", help="a candidate temperature (default: the study's)")
    p.add_argument("--enqueue", action="store_true", help="seed the study with the shortlist, best first")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    study = load(args)
    claim_output_dir(study)  # advise.json (and --enqueue's trials) belong to this study's folder
    advice = run_advise(study, k=args.k, num_prompts=args.prompts, seed=args.seed, temperatures=args.temperature,
                        log=lambda m: print(m, file=sys.stderr, flush=True))
    print(advise_text(advice))
    if args.enqueue:
        ostudy, created = open_study(study, completions_per_trial(study))
        if created:
            describe_study(ostudy, study, baseline_arm(study))
        elif (changed := space_changed(study_attrs(ostudy), study)) is not None:
            err(changed)
            return EXIT_USAGE
        print(f"enqueued {enqueue_shortlist(ostudy, study, advice.shortlist)} trial(s) from the shortlist")
    return EXIT_OK

"""`grpo-ablate advise STUDY [--k 16] [--prompts 64] [--seed 0] [--enqueue]`: which G pays off,
predicted from samples of the starting model (no training); the prediction is
preflight/advise.py's, this prints it and, with --enqueue, seeds the study with the shortlist.
"""

from __future__ import annotations

import argparse
import sys

from grpo_ablate.commands.common import EXIT_OK, EXIT_USAGE, err, load
from grpo_ablate.preflight.advise import advise_text, run_advise
from grpo_ablate.study.owner import claim_output_dir
from grpo_ablate.study.setup import describe_study, enqueue_shortlist, open_study, space_changed
from grpo_ablate.trial_record import study_attrs

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    study = load(args)
    claim_output_dir(study)  # advise.json (and --enqueue's trials) belong to this study's folder
    advice = run_advise(study, k=args.k, num_prompts=args.prompts, seed=args.seed, temperatures=args.temperature,
                        log=lambda m: print(m, file=sys.stderr, flush=True))
    print(advise_text(advice))
    if args.enqueue:
        ostudy, created = open_study(study)
        if created:
            describe_study(ostudy, study)
        elif (changed := space_changed(study_attrs(ostudy), study)) is not None:
            err(changed)
            return EXIT_USAGE
        print(f"enqueued {enqueue_shortlist(ostudy, study, advice.shortlist)} trial(s) from the shortlist")
    return EXIT_OK

"""`grpo-ablate run STUDY [--workers 2] [--n-trials N] [--storage URL] [--warm-start OTHER]`: run
(or resume) the study (study/runner.py `run_study`), then write the report and say how it ended.

Exit status: 0 done (also when the user's own n_trials left planned cells queued: a note names them);
1 the study stopped on failures (or every trial failed or ran out of memory, or a grid/ablation's
cells are still queued for another reason when it ends), or a study that exists
never got its plan queued; 2 the study cannot start here (`StudyRun.refused`); 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys

from grpo_ablate.core.bounds import flag_value
from grpo_ablate.commands.common import add_study, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, err, load, set_value
from grpo_ablate.config import StudyConfig, StudyError
from grpo_ablate.files.reader import Owner
from grpo_ablate.files.screen_file import load_screen
from grpo_ablate.preflight.screen import screen_before_training, screen_text
from grpo_ablate.study.setup import describe_study, open_study, started_study
from grpo_ablate.plan.run_plan import StudyPlan, resolve_plan
from grpo_ablate.report import write_report
from grpo_ablate.report.publish import say_answer
from grpo_ablate.plan.price import price_line, tunes_a_run
from grpo_ablate.study.runner import StudyRun, run_study

__all__ = ["add_parser", "run", "exit_status"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`run`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("run", help="run (or resume) the Optuna study of real GRPO trials, then write the report")
    add_study(p)
    p.add_argument("--n-trials", type=flag_value("trials"), help="total trials of the study (finished ones count)")
    p.add_argument("--workers", type=flag_value("workers"), help="parallel trial processes on this machine")
    p.add_argument("--storage", help="Optuna storage URL (e.g. postgresql://user@host/db) shared by many machines")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report at the end")
    p.add_argument("--warm-start", metavar="OTHER_STUDY",
                   help="seed a new study from a finished one: its study file, or its name (see --warm-start-storage)")
    p.add_argument("--warm-start-storage", metavar="URL",
                   help="the storage of --warm-start given as a name (default: this study's storage)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    extra = []
    if args.n_trials is not None:
        extra.append(f"study.n_trials={args.n_trials}")
    if args.workers is not None:
        extra.append(f"study.workers={args.workers}")
    if args.storage:
        extra.append(set_value("study.storage", args.storage))
    study = load(args, extra)
    if study.file.screen is not None and load_screen(study.output_dir, Owner.of(study)) is None \
            and started_study(study) is None:  # the screen first: it may drop arms (and the probe change the space)
        print(screen_text(screen_before_training(study, args.study, log=_stderr)), flush=True)
        study = load(args, extra)
    try:
        plan = resolve_plan(study)  # once, every file it needs read here: the run, its price and its end read this one
    except StudyError as e:  # a branch point that cannot be placed; a file of the folder that is not this study's
        err(str(e))
        return EXIT_USAGE
    if study.file.screen is not None and study.is_planned and not plan.cells:
        return _screen_only(study, plan, args.no_report)
    line = price_line(study, plan.estimate, plan.price)  # the study's price in units of the run it tunes (plan/price.py); refuses a share of none
    if tunes_a_run(study):  # a study of no particular run (the demo) has nothing to be priced against
        print(line, flush=True)
    result = run_study(study, plan, say=lambda m: print(m, flush=True),
                       warn=lambda m: print(m, file=sys.stderr, flush=True),
                       warm_start=args.warm_start, warm_start_storage=args.warm_start_storage)
    if result.refused is not None:
        err(result.refused)
        return EXIT_USAGE
    if result.unplanned is not None:
        err(result.unplanned)
        return EXIT_FAILED
    if not args.no_report:
        _report(study)
    return exit_status(study, result, plan)


def _screen_only(study: StudyConfig, plan: StudyPlan, no_report: bool) -> int:
    """The study is the screen alone, or the screen left fewer than two arms to compare: nothing is trained. The
    study is recorded in its storage (so the report, which presents the screen as a screen, has a study to read)."""
    ostudy, created = open_study(study, plan.completions)
    if created:
        describe_study(ostudy, study, plan.baseline)
    why = ("the study is the screen alone (screen.confirm: false)" if study.file.screen and not study.file.screen.confirm
           else "the screen left fewer than two arms to compare")
    print(f"Nothing to train: {why}. The screen predicts; it does not decide.", flush=True)
    if not no_report:
        try:
            print(f"Report: {write_report(study)['html']}")
        except Exception as e:  # noqa: BLE001 - the screen is safe in screen.json; `grpo-ablate report` redoes it
            err(f"the report could not be written ({type(e).__name__}: {e}); "
                f"retry with: grpo-ablate report {study.path or '<study.yaml>'}")
    return EXIT_OK


def _report(study: StudyConfig) -> None:
    try:
        say_answer(write_report(study))  # the report's answer, in its words, and its path
    except Exception as e:  # noqa: BLE001 - the study is safe in storage; `grpo-ablate report` redoes it
        err(f"the report could not be written ({type(e).__name__}: {e}); "
            f"retry with: grpo-ablate report {study.path or '<study.yaml>'}")


def exit_status(study: StudyConfig, result: StudyRun, plan: StudyPlan) -> int:
    """What the run's end means for the user: said on the console, and the exit status. `plan`: the run's (its
    cells tell the user's own n_trials apart from an incomplete plan)."""
    if result.interrupted:
        print("Interrupted: run the same command again to finish the study (nothing finished is lost or repeated).")
        return EXIT_INTERRUPTED
    if result.stopped is not None:
        err(f"the study stopped: {result.stopped}")
        return EXIT_FAILED
    if result.failed_reasons:
        failed = result.failed_reasons
        err(f"every trial of the study failed ({len(failed)}); the reasons:\n  " + "\n  ".join(failed[:5]))
        return EXIT_FAILED
    if result.nothing_fit is not None:
        err(result.nothing_fit)
        return EXIT_FAILED
    if result.stop_reason:
        print(f"Stopped: {result.stop_reason}")
    left = result.queued
    planned = {c.key for c in plan.cells} if study.is_planned else set()
    if left and study.is_planned and not result.stop_reason and study.study.n_trials and set(left) <= planned:
        # only the user's own limit (--n-trials / study.n_trials) left them: what was asked for ran; not a failure
        print(f"Note: study.n_trials={study.study.n_trials} reached; {len(left)} planned trial(s) are still queued "
              f"({_listed(left)}): raise it (e.g. --n-trials N) and run the same command again to run them")
        return EXIT_OK
    if left and study.is_planned and not result.stop_reason:  # the plan's results are incomplete: not a success
        err(f"the study ended with {len(left)} queued trial(s) that never ran ({_listed(left)}): "
            f"{_why_queued(study, left, planned)}")
        return EXIT_FAILED
    if left:  # an adaptive sampler's queued hints (warm start, advise), or a stop the line above explained
        print(f"Note: {len(left)} queued trial(s) did not run ({_listed(left)}): "
              + ("run the same command again to run them" if result.stop_reason else _why_queued(study, left, planned)))
    return EXIT_OK


def _listed(cells: list[str], limit: int = 5) -> str:
    return ", ".join(cells[:limit]) + (f" and {len(cells) - limit} more" if len(cells) > limit else "")


def _why_queued(study: StudyConfig, left: list[str], planned: set[str]) -> str:
    """Why queued trials outlived the run: the user's trial limit, trials the file no longer plans, or (all of them
    in the plan) trials another run queued after this one's last look, as a retry of a trial it took over."""
    if study.study.n_trials:
        return (f"study.n_trials={study.study.n_trials} was reached first; raise it (e.g. --n-trials N) and run "
                "the same command again to run them")
    if study.is_planned and set(left) <= planned:
        return ("they are part of this study file's plan and were queued after this run found nothing left to start "
                "(by another run of the study, e.g. the retry of a trial it took over); run the same command again "
                "to run them")
    return ("they are no longer part of this study file's plan (an edited file, or an advise.json that is missing "
            "or unreadable); restore it, or start a new study.name")


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)

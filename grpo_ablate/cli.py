"""The `grpo-ablate` command: one subcommand per job, each returning an exit code.

    grpo-ablate validate studies/tiny-cpu.yaml
    grpo-ablate plan studies/tiny-cpu.yaml [--json]
    grpo-ablate run studies/tiny-cpu.yaml [--workers 2] [--n-trials N] [--storage URL] [--set key=value]
    grpo-ablate run-one studies/tiny-cpu.yaml --set num_generations=4 --set temperature=0.9
    grpo-ablate report studies/tiny-cpu.yaml [--out report.html]
    grpo-ablate compare runs/a/summary.json runs/b/summary.json [--tolerance reward_per_hour=0.1]
    grpo-ablate dashboard studies/tiny-cpu.yaml [--port 8080]
    grpo-ablate init --from RECIPE --gpus N [--vllm server|colocate] [--out study.yaml] [--force]
    grpo-ablate probe studies/tiny-cpu.yaml [--steps 2]
    grpo-ablate advise studies/tiny-cpu.yaml [--k 16] [--prompts 64] [--seed 0] [--enqueue]

Exit codes: 0 success, 1 the job ran and failed (or compare found a regression), 2 bad input
(an invalid study, a malformed `--set`, a missing file or unusable path: one line on stderr),
130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from grpo_ablate.config import Study

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _add_study(p: argparse.ArgumentParser) -> None:
    p.add_argument("study", help="the study file (YAML)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a study key (dotted path, e.g. study.n_trials=4; bare GRPOConfig keys go to trainer, "
                        "num_generations/temperature/generation_batch_size to search); repeatable")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpo-ablate", description="Decide GRPO's num_generations on real runs.")
    parser.add_argument("--version", action="version", version=f"grpo-ablate {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="check a study file; every problem at once")
    _add_study(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("plan", help="the feasible (num_generations, generation batch) pairs on this hardware")
    _add_study(p)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("run", help="run (or resume) the Optuna study of real GRPO trials, then write the report")
    _add_study(p)
    p.add_argument("--n-trials", type=int, help="total trials of the study (finished ones count)")
    p.add_argument("--workers", type=int, help="parallel trial processes on this machine")
    p.add_argument("--storage", help="Optuna storage URL (e.g. postgresql://user@host/db) shared by many machines")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report at the end")
    p.add_argument("--warm-start", metavar="OTHER_STUDY",
                   help="seed a new study from a finished one: its study file, or its name (see --warm-start-storage)")
    p.add_argument("--warm-start-storage", metavar="URL",
                   help="the storage of --warm-start given as a name (default: this study's storage)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("run-one", help="one trial without Optuna, e.g. --set num_generations=4")
    _add_study(p)
    p.add_argument("--trial-dir", help="where the trial writes (default <output_dir>/run-one/<date-time>)")
    p.set_defaults(func=cmd_run_one)

    p = sub.add_parser("report", help="write the HTML ablation report and CSV/JSON exports")
    _add_study(p)
    p.add_argument("--out", help="the HTML file (default <output_dir>/report.html)")
    p.add_argument("--storage", help="read the study from this storage URL")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="deltas between two studies; non-zero exit on a regression")
    p.add_argument("a", help="the accepted baseline: a summary.json, a run folder or a study file")
    p.add_argument("b", help="the candidate: a summary.json, a run folder or a study file")
    p.add_argument("--tolerance", action="append", default=[], metavar="METRIC=FRACTION",
                   help="allowed relative worsening, e.g. reward_per_hour=0.1; repeatable")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("dashboard", help="optuna-dashboard on the study's storage and artifacts")
    _add_study(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--storage", help="read the study from this storage URL")
    p.set_defaults(func=cmd_dashboard)

    p = sub.add_parser("init", help="write a commented study file from a recipe (or a few answers), then plan it")
    p.add_argument("--from", dest="recipe", help="an Open R1 or `trl grpo` recipe file, used as published")
    p.add_argument("--gpus", type=int, help="GPUs per trial (0: CPU)")
    p.add_argument("--vllm", choices=["none", "server", "colocate"], default="none",
                   help="vLLM generation: server takes one GPU of each trial's block")
    p.add_argument("--model", help="without --from: a hub id or local folder")
    p.add_argument("--dataset", help="without --from: a hub id or a data file")
    p.add_argument("--task", help="without --from: a built-in offline task instead of a dataset")
    p.add_argument("--name", help="the study name (default from the recipe and the hardware)")
    p.add_argument("--out", default="study.yaml", help="the study file to write (default study.yaml)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=cmd_init)
    p = sub.add_parser("probe", help="each G's largest generation batch that fits, from a few real optimizer steps")
    _add_study(p)
    p.add_argument("--steps", type=int, default=2, help="optimizer steps per probed point")
    p.add_argument("--keep", action="store_true", help="keep the probe's trial folders (<output_dir>/probe/)")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("advise", help="predict which G pays off from samples of the starting model (no training)")
    _add_study(p)
    p.add_argument("--k", type=int, default=16, help="completions sampled per prompt (>= 2)")
    p.add_argument("--prompts", type=int, default=64, help="training prompts sampled")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, action="append", help="a candidate temperature (default: the study's)")
    p.add_argument("--enqueue", action="store_true", help="seed the study with the shortlist, best first")
    p.set_defaults(func=cmd_advise)
    return parser


def _version() -> str:
    from grpo_ablate import __version__

    return __version__


def _load(args: argparse.Namespace, extra: Sequence[str] = ()) -> "Study":
    from grpo_ablate.config import load_study

    return load_study(args.study, list(args.sets) + list(extra))


def _set(key: str, value: str) -> str:
    """An override from a command-line option, quoted so YAML keeps it a string (URLs hold `#`, `: `)."""
    return f"{key}={json.dumps(value)}"


def _check_sets(args: argparse.Namespace) -> None:
    """Every `--set` parses, before any command acts on one (run-one splits them itself)."""
    from grpo_ablate.config import Problem, StudyError, apply_overrides

    try:
        apply_overrides({}, list(args.sets))
    except ValueError as e:
        raise StudyError([Problem(path="--set", message=str(e))], args.study) from None


def _check_out(out: "str | os.PathLike[str]", flag: str) -> None:
    """Refuse an output file whose folder cannot be written, before any work (one line, exit 2)."""
    from pathlib import Path

    from grpo_ablate.config import Problem, StudyError
    from grpo_ablate.config.places import writable_dir_problem

    path = Path(out)
    problem = writable_dir_problem(path.parent) if not path.is_dir() else f"{path} is a folder; name a file"
    if problem:
        raise StudyError([Problem(path=flag, message=f"cannot write {path}: {problem}")])


def _err(msg: str) -> None:
    print(f"grpo-ablate: {msg}", file=sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    from grpo_ablate.config.recipes import RecipeNote

    from grpo_ablate.planview import limits_json

    study = _load(args)
    for w in study.warnings:
        print(f"{'note' if isinstance(w, RecipeNote) else 'warning'}: {w}", file=sys.stderr)
    if (late := limits_json(study)["timeout_warning"]) is not None:  # a timeout below the per-trial estimate
        print(f"warning: {late}", file=sys.stderr)
    from grpo_ablate.storage import mask_url

    n = len(study.space.feasible)
    print(f"OK: {args.study} (study {study.study.name!r}, {n} feasible pair(s), sampler {study.sampler_kind}, "
          f"storage {mask_url(study.storage_url)})")
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    from grpo_ablate.planview import plan_json, plan_text

    study = _load(args)
    if args.json:
        print(json.dumps(plan_json(study)))
    else:
        print(plan_text(study))
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from grpo_ablate.study import run_study

    extra = []
    if args.n_trials is not None:
        extra.append(f"study.n_trials={args.n_trials}")
    if args.workers is not None:
        extra.append(f"study.workers={args.workers}")
    if args.storage:
        extra.append(_set("study.storage", args.storage))
    study = _load(args, extra)
    return run_study(study, write_report=not args.no_report, warm_start=args.warm_start,
                     warm_start_storage=args.warm_start_storage)


def cmd_run_one(args: argparse.Namespace) -> int:
    from grpo_ablate.run_one import run_one

    _check_sets(args)
    return run_one(args.study, list(args.sets), trial_dir=args.trial_dir)


def cmd_report(args: argparse.Namespace) -> int:
    from grpo_ablate.report import write_report
    from grpo_ablate.report.publish import say_answer
    from grpo_ablate.study.owner import check_output_dir

    extra = [_set("study.storage", args.storage)] if args.storage else []
    study = _load(args, extra)
    if args.out is None or os.path.abspath(os.path.dirname(args.out) or ".") == os.path.abspath(study.output_dir):
        check_output_dir(study)  # report.html and summary.json of another study would replace the owner's
    _check_out(args.out or study.output_dir / "report.html", "--out")
    paths = write_report(study, out=args.out)
    say_answer(paths)  # the answer run prints, in the report's words, and the report's path
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from grpo_ablate.compare import compare_main

    return compare_main(args.a, args.b, args.tolerance, as_json=args.json)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from grpo_ablate.dashboard import serve

    extra = [_set("study.storage", args.storage)] if args.storage else []
    study = _load(args, extra)
    return serve(study, host=args.host, port=args.port)


def cmd_init(args: argparse.Namespace) -> int:
    from pathlib import Path

    from grpo_ablate.config import load_study
    from grpo_ablate.init import InitAnswers, ask_missing, write_study
    from grpo_ablate.planview import plan_text

    _check_out(args.out, "--out")
    answers = InitAnswers(recipe=Path(args.recipe) if args.recipe else None, model=args.model, dataset=args.dataset,
                          task=args.task, gpus=args.gpus or 0, vllm=args.vllm, name=args.name)
    out = write_study(ask_missing(answers), Path(args.out), force=args.force)
    print(f"wrote {out}\n")
    print(plan_text(load_study(out)))
    return EXIT_OK


def cmd_probe(args: argparse.Namespace) -> int:
    from grpo_ablate.config import Problem, StudyError
    from grpo_ablate.files.probe_file import probe_table
    from grpo_ablate.preflight.probe import failed_points, run_probe
    from grpo_ablate.study.owner import check_output_dir, claim_output_dir
    from grpo_ablate.study.setup import started_study

    if args.steps < 1:
        raise StudyError([Problem(path="--steps", message=f"must be >= 1, got {args.steps}")], args.study)
    study = _load(args)
    check_output_dir(study)
    if (started := started_study(study)) is not None:  # refused up front, not after the probe's work
        raise StudyError([Problem(path="study.name", message=(
            f"{started}: a probe now would change its feasible space, and `run` would then refuse the study. "
            "Probe before the study's first `run` or `advise --enqueue`, or probe for a new study.name "
            "(--set study.name=...)"))], args.study)
    claim_output_dir(study)
    probe = run_probe(study, steps=args.steps, keep_trials=args.keep, log=lambda m: print(m, file=sys.stderr))
    print(probe_table(probe))
    if probe.ooms():
        print(f"{len(probe.ooms())} pair(s) ran out of memory: the study's space leaves them out, and every pair "
              "at or above them (see `grpo-ablate plan`)")
    failed = failed_points(probe)
    for p in failed:
        _err(f"probe point G={p.num_generations} batch={p.generation_batch_size} {p.outcome}: {p.reason}")
    if failed:
        _err(f"{len(failed)} probe point(s) failed for reasons other than memory (above); what was measured is in "
             "probe.json: fix the cause and probe again")
    return EXIT_OK if probe.best() and not failed else EXIT_FAILED


def cmd_advise(args: argparse.Namespace) -> int:
    from grpo_ablate.preflight.advise import advise_text, run_advise
    from grpo_ablate.study.owner import claim_output_dir

    study = _load(args)
    claim_output_dir(study)  # advise.json (and --enqueue's trials) belong to this study's folder
    advice = run_advise(study, k=args.k, num_prompts=args.prompts, seed=args.seed, temperatures=args.temperature,
                        log=lambda m: print(m, file=sys.stderr, flush=True))
    print(advise_text(advice))
    if args.enqueue:
        from grpo_ablate.study.setup import describe_study, enqueue_shortlist, open_study, space_changed

        ostudy, created = open_study(study)
        if created:
            describe_study(ostudy, study)
        elif (changed := space_changed(ostudy, study)) is not None:
            print(f"grpo-ablate: {changed}", file=sys.stderr)
            return EXIT_USAGE
        print(f"enqueued {enqueue_shortlist(ostudy, study, advice.shortlist)} trial(s) from the shortlist")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    from grpo_ablate.config import StudyError

    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except StudyError as e:
        _err(str(e))
        return EXIT_USAGE
    except FileNotFoundError as e:
        _err(f"file not found: {e.filename or e}")
        return EXIT_USAGE
    except BrokenPipeError:  # `grpo-ablate plan ... | head`: the reader left; nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as e:
        if e.filename is None:  # not about a path the user can change: a real failure, with its traceback
            raise
        # a folder or file that cannot be used: read-only file system, no permission, a name too long
        _err(f"cannot use {e.filename}: {e.strerror or e}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())

"""`grpo-ablate run-one STUDY --set num_generations=4 --set temperature=0.9`: one trial, no Optuna.

The same trial process a study runs (the same spec, from study/trial_spec.py's `build_spec`,
and the same files in the trial folder), started directly: to try a setting before a sweep, to reproduce one trial, or to debug a reward.
Progress shows on the console; the headline metrics print as a table at the end.

Bare `num_generations`, `temperature` and `generation_batch_size` pick this trial's values
(one each); everything else is an ordinary study override (`trainer.learning_rate=1e-4`,
`budget.max_steps=20`, bare GRPOConfig keys go to the trainer section). Unset values come from
the study's baseline, then the default-arm rule the ablation's baseline uses (plan.baseline_arm).

Ctrl-C stops the trial after its current step (interrupted, exit 130); a second Ctrl-C ends it now.
Exit status: 0 completed, 1 failed/oom, 2 a study that does not validate, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from grpo_ablate.commands.common import add_study, check_sets, load_study
from grpo_ablate.config import StudyError
from grpo_ablate.config.load import parse_override
from grpo_ablate.plan.cells import baseline_arm
from grpo_ablate.report.text import fmt
from grpo_ablate.launch.devices import cpu_slot
from grpo_ablate.study.owner import claim_output_dir
from grpo_ablate.study.trial_spec import build_spec
from grpo_ablate.launch import run_trial
from grpo_ablate.launch.watch import request_stop
from grpo_ablate.contract.result import TrialResult
from grpo_ablate.contract.spec import TrialSpec
from grpo_ablate.core.vocab import HEADLINE_METRICS, METRICS, TRIAL_KEYS, Cell, Outcome

__all__ = ["add_parser", "run", "run_one", "print_result"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`run-one`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("run-one", help="one trial without Optuna, e.g. --set num_generations=4")
    add_study(p)
    p.add_argument("--trial-dir", help="where the trial writes (default <output_dir>/run-one/<date-time>)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """`grpo-ablate run-one`."""
    check_sets(args)
    return run_one(args.study, list(args.sets), trial_dir=args.trial_dir)


def _split_sets(sets: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """Separate this trial's values (bare G/temperature/batch/seed) from ordinary overrides.

    In a study, `--set num_generations=[2, 4]` changes the search; for one trial a single value
    is meant, so a scalar is pinned in the search as a one-value list (it must still be feasible).
    """
    overrides: list[str] = []
    chosen: dict[str, Any] = {}
    for item in sets:
        key = item.partition("=")[0].strip()
        value = parse_override(item)[1]  # ValueError (one line) for a malformed value
        if key in TRIAL_KEYS and not isinstance(value, (list, dict)):
            chosen[key] = value
            shown = json.dumps(value)  # a flow value YAML reads back as written (`dynamic:2[3]` is a string)
            if key in ("num_generations", "generation_batch_size"):
                overrides.append(f"search.{key}=[{shown}]")
            elif key == "temperature":
                overrides.append(f"search.temperature={shown}")
            continue
        overrides.append(item)
    if chosen.keys() & {"num_generations", "generation_batch_size", "temperature"}:
        overrides.append("study.baseline={}")  # the values given here are this trial's; a study baseline may not fit them
    return overrides, chosen


def _pick_params(study: Any, chosen: dict[str, Any]) -> Cell:
    """This trial's cell from the validated study and the values given on the command line."""
    arm = baseline_arm(study, chosen)  # the study's one default-arm rule for every value not given
    g = chosen.get("num_generations")
    if g is not None and arm.num_generations != study.baseline_values(chosen)["num_generations"]:
        raise ValueError(f"num_generations={g} is not feasible for this study; feasible: {list(study.space.generations)}")
    seed = int(chosen.get("seed", study.study.seeds[0] if study.study.seeds else 0))
    return Cell(arm, seed, "run-one")


def print_result(result: TrialResult, console: Any = None) -> None:
    """The headline metrics as a table, with the outcome and the reason when not completed."""
    if console is None and not sys.stdout.isatty():  # piped: one short line per metric, no wrapped table
        m = result.metrics or {}
        print(f"trial {result.outcome.value}" + (f": {result.reason}" if result.reason else ""))
        for name in (*HEADLINE_METRICS, "completions", "startup_seconds", "build_seconds"):
            better = {"maximize": " (higher is better)", "minimize": " (lower is better)"}.get(
                METRICS[name].direction or "" if name in METRICS else "", "")
            print(f"{name}: {fmt(m.get(name), digits=4)}{better}")
        if result.outcome in (Outcome.FAILED, Outcome.OOM) and result.log_tail:
            print("end of log.txt:\n" + "\n".join(result.log_tail.splitlines()[-25:]))
        return
    console = console or Console()
    table = Table(title=f"trial {result.outcome.value}" + (f" - {result.reason}" if result.reason else ""), title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("better", justify="center")
    table.add_column("meaning")
    m = result.metrics or {}
    for name in HEADLINE_METRICS:
        info = METRICS[name]
        arrow = {"maximize": "higher", "minimize": "lower"}.get(info.direction or "", "")
        table.add_row(name, fmt(m.get(name), digits=4), arrow, info.description)
    for name in ("completions", "startup_seconds", "build_seconds"):
        table.add_row(name, fmt(m.get(name), digits=4), "", "")
    console.print(table)
    if result.outcome in (Outcome.FAILED, Outcome.OOM) and result.log_tail:
        console.print("[bold]end of log.txt:[/bold]")
        console.print("\n".join(result.log_tail.splitlines()[-25:]), markup=False, highlight=False)


def run_one(study_path: str, sets: list[str], trial_dir: str | None = None) -> int:
    """Run one trial of a study file without Optuna (holding a host CPU slot); print progress and the metrics table."""
    console = Console(stderr=True)
    try:
        overrides, chosen = _split_sets(sets)
        study = load_study(study_path, overrides)
        params = _pick_params(study, chosen)
    except (StudyError, ValueError) as exc:
        print(f"grpo-ablate: {exc}", file=sys.stderr)  # plain print: rich would wrap a one-line error
        return 2
    folder = Path(trial_dir) if trial_dir else study.output_dir / "run-one" / time.strftime("%Y%m%d-%H%M%S")
    if folder.absolute().is_relative_to(study.output_dir.absolute()):
        try:
            claim_output_dir(study)
        except StudyError as exc:
            print(f"grpo-ablate: {exc}", file=sys.stderr)
            return 2
    with cpu_slot(study.world_size) as threads:
        return _run(study, params, folder, build_spec(study, params, folder.resolve(), threads or None), console)


class _first_interrupt_stops:
    """The first Ctrl-C (SIGINT) writes the trial's STOP file: it stops after its current step and is recorded
    interrupted (exit 130), as a study's first Ctrl-C. Only a second one raises KeyboardInterrupt (the launcher
    then ends the trial now). A KeyboardInterrupt raised at whatever the parent was doing (a fork's at-fork hook
    inside logging, starting the trial) could leave a lock held or the trial unwatched, and hang the exit."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.asked = folder, False
        self.previous: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        if self.asked:
            raise KeyboardInterrupt
        self.asked = True
        try:
            request_stop(self.folder, Outcome.INTERRUPTED.value)
        except OSError:  # no STOP can be written: end it now
            raise KeyboardInterrupt from None

    def __enter__(self) -> "_first_interrupt_stops":
        if threading.current_thread() is threading.main_thread():  # signal handlers live in the main thread only
            self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _run(study: Any, params: Cell, folder: Path, spec: TrialSpec, console: Any) -> int:
    """The trial with a progress bar, then the table; the exit status."""
    steps = spec.max_steps  # the plan's optimizer steps (a completions budget resolved too)
    threads = spec.env.get("OMP_NUM_THREADS")
    console.print(
        f"run-one: {params.arm.words} seed={params.seed}" + (f", {threads} thread(s)" if threads else "") + f" -> {folder}",
        markup=False,
    )
    with Progress(
        TextColumn("[bold]step {task.completed:.0f}/{task.total}"),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("train", total=steps, status="starting the trial process (imports, model)...")
        last_reward: list[float] = []

        def on_progress(row: dict[str, Any]) -> None:
            if row.get("reward") is not None:
                last_reward.append(float(row["reward"]))
            window = last_reward[-5:]
            reward = f"reward {sum(window) / len(window):.3f} (5-step mean)" if window else ""
            progress.update(task, completed=int(row.get("step", 0)), status=f"{reward}  {row.get('train_seconds', 0):.1f}s training")

        try:
            with _first_interrupt_stops(folder):
                result = run_trial(spec, on_progress=on_progress)
        except KeyboardInterrupt:
            console.print("interrupted: the trial was stopped; partial metrics are in " + str(folder), markup=False)
            return 130
    print_result(result, Console() if sys.stdout.isatty() else None)
    console.print(f"files: {folder}/ (metrics.jsonl, groups.jsonl, log.txt, result.json)", markup=False)
    if result.outcome in (Outcome.COMPLETED, Outcome.PRUNED):
        return 0
    return 130 if result.outcome is Outcome.INTERRUPTED else 1


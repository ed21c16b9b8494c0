"""A command trial's process: run the user's own training script for one trial, read back what its Trainer wrote.

    python -m grpo_ablate.trainer.command_worker runs/x/trials/00003/spec.json

The launchers start this module for a spec with a `script` (launch/process.py build_command) exactly as they
start the built-in worker, so stop, grace, timeout, SLURM and the outcome's classification are theirs
unchanged. This process runs in the study's environment; the script runs in its own (script.python), with
the trial's values as its own overrides (contract/command.py), and nothing of its TRL is imported here.

- Resume: the newest verified checkpoint of the trial (contract/checkpoints.py: sealed, hashed, this spec's
  fingerprint) is passed as `--resume_from_checkpoint`; its per-step files and clock are put back first.
- Checkpoints: the script's Trainer saves `<trial>/trainer/checkpoint-N` every `save_every` steps; once
  its log shows a later step (every rank is past the save) or the script has ended, this process seals the
  folder (the manifest, the per-step files, the clock) into `<trial>/checkpoints/`, and keeps hard links
  of the model files of the steps the held-out evaluation scores.
- Metrics: every printed log line of the script is timed as it arrives; the rows of metrics.jsonl come from
  the Trainer's log history (trainer/log_history.py), at each checkpoint and at the end, each row's
  training seconds from its line's arrival (anchored to the Trainer's train_runtime).
- Stop: a STOP file (the parent's pruned/interrupted, or this process's SIGTERM) ends the script (SIGTERM to
  its process group, SIGKILL after TERM_GRACE_S): the work since its last checkpoint is redone on resume.
- Evaluation: once the script has ended (its GPUs free), the base model and the checkpoints at the
  evaluation steps are scored here, with the study's rewards at its fixed decoding (trainer/evaluation.py's
  Evaluator.score_model), into eval.jsonl, as a built-in trial's points.
- result.json as the built-in worker writes it (trainer/worker.py record_result).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from grpo_ablate.core.child_processes import PACKAGE_ROOT, adopt_orphans, die_with_parent
from grpo_ablate.contract.metrics import read_rows
from grpo_ablate.core.vocab import LOG_FILE, METRICS_FILE, STOP_FILE, Outcome

from grpo_ablate.contract import checkpoints
from grpo_ablate.contract.command import command_line, eval_steps, save_every, script_problem
from grpo_ablate.contract.files import trainer_dir
from .log_history import END_KEYS, read_log_history, rows_from_log_history
from .signals import stop_on_sigterm
from grpo_ablate.contract.spec import EvaluationSpec, TrialSpec
from grpo_ablate.contract.env import PARENT_PID_ENV, command_env
from .worker import end_left_processes, record_result, watch_parent

__all__ = ["EVAL_POINTS_DIR", "LogClock", "main", "run_command"]

EVAL_POINTS_DIR = "eval_points"  # <trial>/eval_points/step-N: the model files of a step the evaluation scores
# The script's SIGTERM-to-SIGKILL grace: shorter than the launcher's own (launch/base.py TERM_GRACE_SECONDS, 10 s)
# between SIGTERM and SIGKILL of this process, so a timeout's stop ends the script's whole group (its ranks, which
# no parent-death signal covers) before this process is killed.
TERM_GRACE_S = 5.0
POLL_S = 0.5
_MODEL_FILES = (".safetensors", ".bin", ".json", ".model", ".txt", ".jinja")  # weights, config, tokenizer
_NOT_MODEL = ("trainer_state.json", "optimizer", "scheduler", "rng_state", "training_args", "manifest.json")


def _say(message: str) -> None:
    print(f"[grpo-ablate] {message}", flush=True)


@dataclass
class LogClock:
    """The arrival times of the script's printed log lines: training seconds per step, for throughput.

    `first_step`: the step the first printed step log is (a resumed run's first new step); each later step
    log is the next step (the trial logs every step). `base_seconds`: training seconds before this run
    (a resumed trial's clock). The Trainer's end-of-training line gives train_runtime, whose start anchors
    every step; without it (a killed run) the start is one step's time before the first log.
    """

    first_step: int
    base_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)
    times: list[float] = field(default_factory=list)
    runtime: float | None = None
    ended_at: float | None = None

    def read(self, line: str, now: float | None = None) -> None:
        text = line.strip()
        if not (text.startswith("{") and text.endswith("}")):
            return
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return
        if not isinstance(value, dict):
            return
        at = time.monotonic() if now is None else now
        if END_KEYS & set(value):
            runtime = value.get("train_runtime")
            if isinstance(runtime, (int, float)):
                self.runtime, self.ended_at = float(runtime), at
        elif "loss" in value or "reward" in value or "learning_rate" in value:
            self.times.append(at)

    @property
    def last_step(self) -> int:
        """The last step the script logged (first_step - 1 before any)."""
        return self.first_step + len(self.times) - 1

    def seconds_by_step(self) -> dict[int, float]:
        if not self.times:
            return {}
        if self.runtime is not None and self.ended_at is not None:
            start = self.ended_at - self.runtime
        else:
            step_time = self.times[1] - self.times[0] if len(self.times) > 1 else 0.0
            start = self.times[0] - step_time
        return {self.first_step + i: self.base_seconds + max(0.0, t - start) for i, t in enumerate(self.times)}


class _Run:
    """One run of the script: its process, its timed log, and what has been sealed and written so far."""

    def __init__(self, spec: TrialSpec, *, resumed: checkpoints.Checkpoint | None, fingerprint: str) -> None:
        self.spec = spec
        self.trial = spec.path
        self.fingerprint = fingerprint
        clock = resumed.clock if resumed is not None else {}
        self.written_step = int(resumed.step) if resumed is not None else 0
        self.clock = LogClock(first_step=self.written_step + 1, base_seconds=float(clock.get("train_seconds") or 0.0))
        self.eval_steps = set(eval_steps(spec))
        self.proc: subprocess.Popen[bytes] | None = None
        self.reader: threading.Thread | None = None

    # -- the script's process ------------------------------------------------------------
    def start(self, argv: list[str], env: dict[str, str], cwd: str | None) -> None:
        _say("$ " + " ".join(argv))
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, cwd=cwd or None, start_new_session=True, preexec_fn=die_with_parent())
        self.reader = threading.Thread(target=self._read, name="grpo-ablate-script-log", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        out = sys.stdout.buffer
        for raw in iter(self.proc.stdout.readline, b""):
            now = time.monotonic()
            out.write(raw)
            out.flush()
            for part in raw.decode("utf-8", errors="replace").split("\r"):
                self.clock.read(part, now)

    def stop(self) -> None:
        """End the script's process group: SIGTERM, then SIGKILL after TERM_GRACE_S."""
        proc = self.proc
        if proc is None:
            return
        for sig, wait in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, 10.0)):
            if proc.poll() is not None:
                break
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever of its group outlived it (ranks, reward workers)
        except (ProcessLookupError, PermissionError):
            pass

    def wait_reader(self) -> None:
        if self.reader is not None:
            self.reader.join(timeout=30)

    # -- checkpoints and rows ----------------------------------------------------------------
    def _staged(self) -> list[tuple[int, Path]]:
        found = []
        for path in trainer_dir(self.trial).glob("checkpoint-*"):
            try:
                step = int(path.name.split("-", 1)[1])
            except ValueError:
                continue
            if path.is_dir() and (path / "trainer_state.json").is_file():
                found.append((step, path))
        return sorted(found)

    def append_rows(self, history: list[dict[str, Any]], upto: int | None = None) -> None:
        """Write the rows of `history` after the last written step (up to `upto`) to metrics.jsonl."""
        spec = self.spec
        rows = rows_from_log_history(history, generated_per_step=spec.generated_per_step,
                                     round_steps=spec.rounds.period_steps,
                                     completions_trained=int(round(spec.generated_per_step * spec.rounds.num_iterations)),
                                     num_generations=spec.num_generations if isinstance(spec.num_generations, int) else None,
                                     seconds_by_step=self.clock.seconds_by_step(), last_step=spec.max_steps,
                                     after_step=self.written_step)
        rows = [r for r in rows if upto is None or r["step"] <= upto]
        if not rows:
            return
        with open(self.trial / METRICS_FILE, "a", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
        self.written_step = rows[-1]["step"]

    def seal_ready(self, *, ended: bool) -> None:
        """Seal each staged checkpoint the script is past (or every one, once it has ended)."""
        for step, path in self._staged():
            if not ended and self.clock.last_step <= step:
                continue  # a rank may still be writing its part
            try:
                history = read_log_history(path)
            except (OSError, ValueError) as exc:
                _say(f"checkpoint-{step} not sealed: its trainer_state.json cannot be read ({exc})")
                shutil.rmtree(path, ignore_errors=True)
                continue
            self.append_rows(history, upto=step)
            if step in self.eval_steps or step == self.spec.max_steps:
                _link_model(path, self.trial / EVAL_POINTS_DIR / f"step-{step}")
            seconds = self.clock.seconds_by_step().get(step, self.clock.base_seconds)
            checkpoints.seal(self.trial, path, step=step, fingerprint=self.fingerprint,
                             clock={"step": step, "train_seconds": seconds, "command": True})
            _say(f"checkpoint-{step} sealed")


def _link_model(source: Path, target: Path) -> None:
    """The model's files of a checkpoint (weights, config, tokenizer; not optimizer nor trainer state), hard-linked
    where the file system allows (no copy of the weights), for the held-out evaluation of that step."""
    if target.exists():
        shutil.rmtree(target)
    staging = target.with_name(target.name + ".part")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for path in source.iterdir():
        if path.is_file() and path.name.endswith(_MODEL_FILES) and not path.name.startswith(_NOT_MODEL):
            try:
                os.link(path, staging / path.name)
            except OSError:
                shutil.copy2(path, staging / path.name)
    os.replace(staging, target)


def _versions(python: str | None, env: dict[str, str]) -> dict[str, str]:
    """The script environment's torch / transformers / trl versions (package metadata: nothing is imported)."""
    code = ("import importlib.metadata as m, json\nout = {}\nfor n in ('torch', 'transformers', 'trl'):\n"
            "    try: out[n] = m.version(n)\n    except m.PackageNotFoundError: pass\nprint(json.dumps(out))")
    try:
        done = subprocess.run([python or "python", "-c", code], capture_output=True, text=True, env=env, timeout=60)
        return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return {}


def _resume_point(spec: TrialSpec, fingerprint: str, log: Callable[[str], None]) -> checkpoints.Checkpoint | None:
    """The newest verified checkpoint, its per-step files put back; else a clean start (every per-step file gone)."""
    found, rejected = checkpoints.resumable(spec.trial_dir, fingerprint)
    for why in rejected:
        log(f"checkpoint not resumed: {why}")
    checkpoints.discard(spec.trial_dir, keep=found)
    if found is not None:
        checkpoints.restore_files(found, spec.trial_dir)
        log(f"resuming from {found.path.name} (step {found.step}): the script gets --resume_from_checkpoint {found.path}")
        return found
    for name in checkpoints.CARRIED_FILES:
        (spec.path / name).unlink(missing_ok=True)
    shutil.rmtree(spec.path / EVAL_POINTS_DIR, ignore_errors=True)
    return None


def _stop_reason(trial_dir: Path) -> str | None:
    try:
        text = (trial_dir / STOP_FILE).read_text().strip().lower()
    except FileNotFoundError:
        return None
    return "interrupted" if text.startswith("interrupt") else "pruned"


def _last_error(log_path: Path) -> str:
    """The script's own last words: its traceback's last line, as it printed it."""
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    for line in reversed(lines):
        if not line.startswith("[grpo-ablate]") and ("Error" in line or "Exception" in line):
            return line[:500]
    return lines[-1][:500] if lines else ""


def _evaluate(spec: TrialSpec, run: _Run, log: Callable[[str], None]) -> float:
    """Score the base model, each evaluation step's checkpoint and the final model into eval.jsonl; the seconds spent.

    In this process, now that the script has ended: the study's environment (torch, transformers, the
    study's rewards), the held-out prompts and decoding a built-in trial uses (trainer/evaluation.py)."""
    from .build import load_model_and_tokenizer  # here: torch and transformers load only for the evaluation
    from .evaluation import Evaluator
    from .prompts import load_prompt_sets
    from .rewards import RewardContext, build_rewards

    from transformers import AutoModelForCausalLM  # here: as above, only for the evaluation

    base, tokenizer, _ = load_model_and_tokenizer(spec.model, spec.data, log)
    _, held_out = load_prompt_sets(spec.data, spec.evaluation, tokenizer, log=log)
    max_len = spec.trainer.get("max_completion_length") or 256
    funcs, _, weights = build_rewards(spec.rewards, RewardContext(task=spec.data.task, max_completion_length=max_len))
    given = spec.evaluation or EvaluationSpec()
    settings = replace(given, max_completion_length=given.max_completion_length or max_len)
    rows = read_rows(spec.path / METRICS_FILE)
    counters = types.SimpleNamespace(completions_total=0, tokens_total=0.0, train_seconds=0.0, paused_seconds=0.0)
    evaluator = Evaluator(spec.trial_dir, prompts=held_out, tokenizer=tokenizer, reward_funcs=funcs, reward_weights=weights,
                          settings=settings, unit=spec.eval_budget.unit, total=0, recorder=counters)
    (spec.path / "eval.jsonl").unlink(missing_ok=True)  # every point is scored here, in one pass
    points = [(0, base)] + [(s, None) for s in sorted(run.eval_steps) + [int(spec.max_steps or 0)]
                            if (spec.path / EVAL_POINTS_DIR / f"step-{s}").is_dir()]
    for step, model in points:
        done = [r for r in rows if int(r.get("step") or 0) <= step]
        counters.completions_total = sum(int(r.get("completions") or 0) for r in done)
        counters.tokens_total = sum(float(r.get("completion_tokens") or 0.0) for r in done)
        counters.train_seconds = max((float(r.get("train_seconds") or 0.0) for r in done), default=0.0)
        if model is None:
            model = AutoModelForCausalLM.from_pretrained(spec.path / EVAL_POINTS_DIR / f"step-{step}", dtype=base.dtype)
        row = evaluator.score_model(model, types.SimpleNamespace(global_step=step))
        log(f"evaluation at step {step}: held-out reward {row['reward']:.4f}")
    return evaluator.seconds


def run_command(spec: TrialSpec) -> tuple[Outcome, dict[str, Any]]:
    """Run the trial's script to its end (or its stop); score it; (outcome, result payload)."""
    started = time.monotonic()
    payload: dict[str, Any] = {"trial_dir": spec.trial_dir, "params": spec.params, "rank": 0,
                               "world_size": spec.num_processes, "pid": os.getpid(), "command_trial": True}
    problem = script_problem(spec)
    if problem is not None:
        payload.update(reason=problem, exception_type="ValueError", exception_message=problem)
        return Outcome.FAILED, payload
    fingerprint = checkpoints.spec_fingerprint(json.loads(spec.to_json()))
    resumed = _resume_point(spec, fingerprint, _say)
    run = _Run(spec, resumed=resumed, fingerprint=fingerprint)
    env = command_env(os.environ, spec, PACKAGE_ROOT)
    payload["versions"] = _versions(spec.script.python if spec.script else None, env)
    argv = command_line(spec, resume_from=os.fspath(resumed.path) if resumed is not None else None,
                        transformers=payload["versions"].get("transformers"))
    payload["command"] = argv
    if resumed is not None:
        payload["resumed_from"] = os.fspath(resumed.path)
    _say(f"command trial: the script runs on {payload['versions'] or 'its own environment'}; checkpoints every "
         f"{save_every(spec) or 'never'} steps")
    run.start(argv, env, spec.script.cwd if spec.script else None)
    assert run.proc is not None
    stop = None
    while run.proc.poll() is None:
        time.sleep(POLL_S)
        run.seal_ready(ended=False)
        stop = stop or _stop_reason(spec.path)
        if stop is not None:
            _say(f"stopping the script ({stop})")
            run.stop()
    code = run.proc.wait()
    run.wait_reader()
    stop = stop or _stop_reason(spec.path)
    run.seal_ready(ended=True)
    final = trainer_dir(spec.trial_dir) / "trainer_state.json"
    if final.is_file():  # the script's own save_state at the end: every step's log
        try:
            run.append_rows(read_log_history(final))
        except (OSError, ValueError) as exc:
            _say(f"{final} cannot be read ({exc}); the rows end at the last checkpoint")
    payload["steps"] = run.written_step
    payload["returncode"] = code
    timings = {"train_seconds": max(run.clock.seconds_by_step().values(), default=run.clock.base_seconds)}
    if stop is not None:
        outcome = Outcome(stop)
        payload["reason"] = f"stopped by the parent ({stop}) after step {run.written_step}"
    elif code == 0:
        outcome = Outcome.COMPLETED
        payload["reason"] = None
    else:
        outcome = Outcome.FAILED
        words = _last_error(spec.path / LOG_FILE)
        payload.update(reason=f"the script exited with status {code}: {words}", exception_type="ScriptError",
                       exception_message=words)
    if spec.evaluation and outcome in (Outcome.COMPLETED, Outcome.PRUNED):
        try:
            timings["eval_seconds"] = _evaluate(spec, run, _say)
            shutil.rmtree(spec.path / EVAL_POINTS_DIR, ignore_errors=True)
        except Exception as exc:  # noqa: BLE001 - a failed evaluation fails the trial, with its reason
            outcome = Outcome.FAILED
            payload.update(reason=f"held-out evaluation of the checkpoints failed: {type(exc).__name__}: {exc}",
                           exception_type=type(exc).__name__, exception_message=str(exc)[:4000])
    timings["wall_seconds"] = time.monotonic() - started
    payload["timings"] = {k: round(v, 4) for k, v in timings.items()}
    payload["outcome"] = outcome.value
    return outcome, payload


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m grpo_ablate.trainer.command_worker <trial_dir>/spec.json", file=sys.stderr)
        return 2
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and watch_parent(int(parent)) is None:
        _say(f"the orchestrator (pid {parent}) is gone before the trial started")
        return 1
    spec = TrialSpec.load(argv[0])
    stop_on_sigterm(spec.trial_dir)  # a scheduler's SIGTERM: the script is stopped, the trial recorded interrupted
    adopt_orphans()
    outcome, payload = run_command(spec)
    end_left_processes(payload)
    return record_result(spec, outcome, payload)


if __name__ == "__main__":
    raise SystemExit(main())

"""`grpo-ablate run`: the Optuna study over the feasible space, run by parallel workers.

    grpo-ablate run studies/tiny-cpu.yaml --workers 2

One orchestrating process (no torch, no trl: its memory stays flat however many trials run)
holds `study.workers` worker threads; each thread asks the study for a trial, runs it as its
own process through the trainer core, and tells the result. Several hosts can run the same
command against one PostgreSQL storage: the storage hands out trials, so none runs twice.

The lifecycle of the study:
- create or resume (same name and storage): finished trials are never re-run, and
  `n_trials` counts every finished trial, on every host;
- grid/ablation: the host that creates the study queues the whole plan, the others wait for
  it; workers then only pop queued trials;
- tpe/random/gp: the sampler proposes from the feasible space;
- Ctrl-C / SIGTERM: running trials stop after their current optimizer step, are recorded as
  interrupted and queued again; a second Ctrl-C kills them at once;
- `max_consecutive_failures` failures in a row stop the study with the last reasons.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablate.objective import build_spec, objective_values, record_result, suggest_params
from grpo_ablate.plan import baseline_arm, cell_params, resolved_trial_count, study_plan
from grpo_ablate.storage import is_rdb_url, open_artifact_store, open_storage
from grpo_ablate.vocab import Cell

if TYPE_CHECKING:
    import optuna

    from grpo_ablate.config import Study

__all__ = ["run_study", "open_study", "library_versions"]

PLAN_READY_ATTR = "plan_ready"
WAIT = "wait"
HOST = os.environ.get("GRPO_ABLATE_HOST") or socket.gethostname()  # override where containers share a name
PLAN_WAIT_S = 120.0


def library_versions() -> dict[str, str]:
    """Versions of what trains, read from package metadata (nothing heavy is imported)."""
    out = {"python": platform.python_version()}
    for name in ("grpo-ablate", "torch", "trl", "transformers", "accelerate", "datasets", "optuna", "vllm", "deepspeed"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _sampler(study: "Study") -> "optuna.samplers.BaseSampler":
    import optuna

    seed = study.study.sampler_seed
    kind = study.study.sampler
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if kind == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    if kind in ("grid", "ablation"):
        # Planned studies only pop queued trials; the sampler never proposes on its own.
        return optuna.samplers.RandomSampler(seed=seed)
    n_startup = min(10, max(3, (study.study.n_trials or 20) // 4))
    if len(study.directions) > 1:
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup, multivariate=True)


def _pruner(study: "Study") -> "optuna.pruners.BasePruner":
    import optuna

    kind = study.study.pruner
    if kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=max(1, (study.budget.max_steps or 20) // 5))
    if kind == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=max(1, (study.budget.max_steps or 20) // 8),
                                              max_resource=study.budget.max_steps or "auto")
    return optuna.pruners.NopPruner()


def open_study(study: "Study", *, for_run: bool = False) -> tuple["optuna.Study", bool]:
    """Create the Optuna study or load it; returns (study, created_here)."""
    import optuna

    kwargs: dict[str, Any] = {}
    if for_run:
        kwargs = {"heartbeat_interval": study.study.heartbeat_interval, "grace_period": study.study.grace_period,
                  "max_retry": study.study.max_retry}
    storage = open_storage(study.storage_url, **kwargs)
    try:
        ostudy = optuna.create_study(study_name=study.study.name, storage=storage, directions=study.directions,
                                     sampler=_sampler(study), pruner=_pruner(study), load_if_exists=False)
        return ostudy, True
    except optuna.exceptions.DuplicatedStudyError:
        ostudy = optuna.load_study(study_name=study.study.name, storage=storage, sampler=_sampler(study), pruner=_pruner(study))
        stored = [d.name.lower() for d in ostudy.directions]
        if stored != study.directions:
            from grpo_ablate.config import Problem, StudyError

            raise StudyError([Problem(path="study.objectives", message=(
                f"the stored study {study.study.name!r} has directions {stored}, the file asks for {study.directions}; "
                "use another study.name to start a new study"))]) from None
        return ostudy, False


def _describe_study(ostudy: "optuna.Study", study: "Study") -> None:
    ostudy.set_user_attr("config", study.to_dict())
    ostudy.set_user_attr("versions", library_versions())
    ostudy.set_user_attr("objectives", [{"metric": m, "direction": d} for m, d in zip(study.metric_names, study.directions)])
    ostudy.set_user_attr("baseline", baseline_arm(study).as_dict())
    ostudy.set_user_attr("hardware", study.space.shape.describe())


def _queue_plan(ostudy: "optuna.Study", study: "Study", cells: list[Cell]) -> int:
    """Queue every planned cell not already in the study (finished, running or queued)."""
    before = len(ostudy.get_trials(deepcopy=False))
    for c in cells:
        ostudy.enqueue_trial(cell_params(study, c), user_attrs={"role": c.role, "cell": c.key}, skip_if_exists=True)
    return len(ostudy.get_trials(deepcopy=False)) - before


# ------------------------------------------------------------------------- devices


def _visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def worker_envs(study: "Study", workers: int) -> list[dict[str, str]]:
    """Each worker's share of the machine: a block of GPUs, or a share of the CPU threads."""
    gpus = _visible_gpus()
    if gpus:
        block = study.hardware.gpus or study.world_size
        usable = len(gpus) // block
        if usable < 1:
            raise RuntimeError(f"each trial needs {block} GPU(s) but only {len(gpus)} are visible")
        if workers > usable:
            print(f"grpo-ablate: {workers} workers x {block} GPU(s) do not fit on {len(gpus)} GPU(s); using {usable} workers",
                  file=sys.stderr)
            workers = usable
        return [{"CUDA_VISIBLE_DEVICES": ",".join(gpus[i * block:(i + 1) * block])} for i in range(workers)]
    cores = os.cpu_count() or 1
    threads = max(1, cores // (workers * max(1, study.world_size)))
    return [{"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "CUDA_VISIBLE_DEVICES": ""}
            for _ in range(workers)]


# ------------------------------------------------------------------------- progress


@dataclass
class _Running:
    number: int
    params: Cell
    started: float
    trial_dir: Path
    max_steps: int | None
    step: int = 0
    reward: float | None = None
    train_seconds: float = 0.0

    def eta(self) -> str:
        if not self.max_steps or self.step <= 0 or self.train_seconds <= 0:
            return "?"
        left = self.train_seconds / self.step * (self.max_steps - self.step)
        return f"{left:.0f}s"


@dataclass
class _Counts:
    done: int = 0
    pruned: int = 0
    oom: int = 0
    failed: int = 0
    interrupted: int = 0
    consecutive_failures: int = 0
    last_reasons: list[str] = field(default_factory=list)


class StudyRunner:
    def __init__(self, study: "Study", ostudy: "optuna.Study", workers: int):
        self.study = study
        self.ostudy = ostudy
        self.workers = workers
        self.envs = worker_envs(study, workers)
        self.workers = len(self.envs)
        self.artifacts = open_artifact_store(study.output_dir)
        self.planned = study.study.sampler in ("grid", "ablation")
        self.n_trials = resolved_trial_count(study)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.interrupted = False
        self.interrupt_requests = 0
        self.storage_error = False
        self.stop_reason: str | None = None
        self.running: dict[int, _Running] = {}
        self.counts = _Counts()
        self.deadline = time.monotonic() + study.study.timeout if study.study.timeout else None
        self.heartbeat = is_rdb_url(study.storage_url)
        from rich.console import Console

        self.console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)

    # ---- choosing the next trial

    def _finished_count(self) -> tuple[int, int]:
        from optuna.trial import TrialState

        trials = self.ostudy.get_trials(deepcopy=False)
        done = sum(1 for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
                   or (t.state == TrialState.FAIL and t.user_attrs.get("outcome") == "failed"))
        running = sum(1 for t in trials if t.state == TrialState.RUNNING)
        return done, running

    def _next_trial(self) -> "optuna.Trial | str | None":
        """The next trial to run; WAIT when only other hosts' running trials stand in the way."""
        import optuna
        from optuna.storages import fail_stale_trials

        with self.lock:
            if self.stop.is_set():
                return None
            if self.deadline is not None and time.monotonic() > self.deadline:
                self.stop_reason = self.stop_reason or "the study's timeout was reached"
                return None
            fail_stale_trials(self.ostudy)
            self._reap_dead_local_trials()
            done, running = self._finished_count()
            others_running = running - len(self.running)
            if done + running >= self.n_trials:
                # a dead host's trial is retried once its heartbeat goes stale: wait for that
                return WAIT if (self.heartbeat and others_running > 0 and done < self.n_trials) else None
            if self.planned:
                trial_id = self.ostudy._pop_waiting_trial_id()  # only queued cells; never a fresh proposal
                if trial_id is None:
                    waiting_possible = self.heartbeat and others_running > 0
                    return WAIT if waiting_possible else None
                trial = optuna.Trial(self.ostudy, trial_id)
            else:
                trial = self.ostudy.ask()
            trial.set_user_attr("host", HOST)
            trial.set_user_attr("pid", os.getpid())
            return trial

    def _reap_dead_local_trials(self) -> None:
        """RUNNING trials of a process on this host that no longer exists: queue them again.

        Covers the storages without heartbeats (the journal file) after a kill -9 or a power cut.
        """
        from optuna.trial import TrialState

        for t in self.ostudy.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if t.user_attrs.get("host") != HOST or t.number in self.running:
                continue
            pid = t.user_attrs.get("pid")
            if not isinstance(pid, int) or _pid_alive(pid):
                continue
            storage = self.ostudy._storage
            try:  # attributes first: a finished trial takes no more
                storage.set_trial_user_attr(t._trial_id, "outcome", "interrupted")
                storage.set_trial_user_attr(t._trial_id, "reason", f"its orchestrator (pid {pid} on {HOST}) died")
                if not storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL):
                    continue
            except Exception:
                continue
            self.ostudy.enqueue_trial(t.params, user_attrs={"role": t.user_attrs.get("role", ""), "retry_of": t.number})

    # ---- running one

    def _worker(self, index: int) -> None:
        env = self.envs[index]
        while not self.stop.is_set():
            try:
                trial = self._next_trial()
            except Exception as e:  # storage trouble: stop this worker, say why
                self.stop_reason = f"could not get a trial from the storage: {type(e).__name__}: {e}"
                self.storage_error = True
                self.stop.set()
                return
            if trial is None:
                return
            if trial == WAIT:
                self.stop.wait(max(1, self.study.study.heartbeat_interval))
                continue
            assert not isinstance(trial, str)
            self._run(trial, env)

    def _run(self, trial: "optuna.Trial", env: dict[str, str]) -> None:
        from optuna.trial import TrialState

        from grpo_ablate.metrics import summarize
        from grpo_ablate.trainer.launch import run_trial

        trial_dir = (self.study.output_dir / "trials" / f"{trial.number:05d}").resolve()
        try:
            params = suggest_params(trial, self.study)
            for k, v in params.as_attrs().items():
                trial.set_user_attr(k, v)
            trial.set_user_attr("trial_dir", str(trial_dir))
            spec = build_spec(self.study, params, trial_dir, env)
        except Exception as e:
            trial.set_user_attr("outcome", "failed")
            trial.set_user_attr("reason", f"could not prepare the trial: {type(e).__name__}: {e}")
            self.ostudy.tell(trial, state=TrialState.FAIL)
            self._count("failed", f"trial {trial.number}: {e}")
            return
        run = _Running(trial.number, params, time.monotonic(), trial_dir, spec.budget.get("max_steps"))
        with self.lock:
            self.running[trial.number] = run
        self._say(f"[trial {trial.number}] start {params.role}: {params.arm.label}, seed {params.seed} -> {trial_dir}")

        rows: list[dict[str, Any]] = []
        prune = self.study.study.pruner != "none" and len(self.study.directions) == 1
        metric = self.study.metric_names[0]

        def on_progress(row: dict[str, Any]) -> None:
            rows.append(row)
            run.step = int(row.get("step", run.step))
            run.train_seconds = float(row.get("train_seconds", run.train_seconds) or 0.0)
            if row.get("reward") is not None:
                run.reward = float(row["reward"])
            if prune and not (trial_dir / "STOP").exists():
                value = summarize(rows).get(metric)
                if value is not None:
                    trial.report(float(value), run.step)
                    if trial.should_prune():
                        _write_stop(trial_dir, "pruned")

        stop_hb = threading.Event()
        hb = None
        if self.heartbeat:
            hb = threading.Thread(target=_heartbeat, args=(self.ostudy, trial._trial_id, self.study.study.heartbeat_interval, stop_hb), daemon=True)
            hb.start()
        try:
            result = run_trial(spec, on_progress=on_progress)
            self._upload(trial, trial_dir)
            trial.set_user_attr("orchestrator_rss_mb", _rss_mb())  # benchmarks/workers.py checks it stays flat
            outcome = record_result(self.ostudy, trial, self.study, result)
        except Exception as e:
            outcome = "failed"
            try:
                trial.set_user_attr("outcome", "failed")
                trial.set_user_attr("reason", f"{type(e).__name__}: {e}")
                self.ostudy.tell(trial, state=TrialState.FAIL)
            except Exception:
                pass
            result = None
        finally:
            stop_hb.set()
            with self.lock:
                self.running.pop(trial.number, None)
        reason = (result.reason if result is not None else None) or ""
        metrics = (result.metrics if result is not None else None) or {}
        vals = objective_values(self.study, metrics)
        shown = ", ".join(f"{m}={v:.4g}" for m, v in zip(self.study.metric_names, vals)) if vals else ""
        self._say(f"[trial {trial.number}] {outcome}" + (f": {shown}" if shown else "") + (f" ({reason[:300]})" if reason and outcome != "completed" else ""))
        self._count(outcome, f"trial {trial.number}: {reason[:300]}")

    def _count(self, outcome: str, reason: str) -> None:
        with self.lock:
            c = self.counts
            if outcome == "failed":
                c.failed += 1
                c.consecutive_failures += 1
                c.last_reasons = (c.last_reasons + [reason])[-3:]
                if c.consecutive_failures >= self.study.study.max_consecutive_failures:
                    self.stop_reason = (f"{c.consecutive_failures} trials failed in a row; the last reasons:\n  "
                                        + "\n  ".join(c.last_reasons))
                    self.stop.set()
                return
            if outcome == "interrupted":
                c.interrupted += 1
                return
            c.consecutive_failures = 0
            if outcome == "completed":
                c.done += 1
            elif outcome == "pruned":
                c.pruned += 1
            elif outcome == "oom":
                c.oom += 1

    def _upload(self, trial: "optuna.Trial", trial_dir: Path) -> None:
        """The dashboard shows a trial's metrics table and reward curve from these artifacts."""
        from optuna.artifacts import upload_artifact

        metrics = trial_dir / "metrics.jsonl"
        if metrics.exists() and metrics.stat().st_size:
            upload_artifact(artifact_store=self.artifacts, file_path=str(metrics), study_or_trial=trial,
                            mimetype="application/jsonl")
            png = trial_dir / "reward_curve.png"
            if _reward_plot(metrics, png, f"trial {trial.number}"):
                upload_artifact(artifact_store=self.artifacts, file_path=str(png), study_or_trial=trial, mimetype="image/png")

    # ---- the console

    def _say(self, text: str) -> None:
        with self.lock:
            self.console.print(text, markup=False, soft_wrap=True)

    def _status_line(self) -> str:
        c = self.counts
        with self.lock:
            running = list(self.running.values())
        parts = [f"done {c.done}", f"pruned {c.pruned}", f"oom {c.oom}", f"failed {c.failed}", f"running {len(running)}"]
        line = " | ".join(parts)
        for r in running:
            rw = "-" if r.reward is None else f"{r.reward:.3f}"
            line += f"\n  trial {r.number} {r.params.role} step {r.step}/{r.max_steps or '?'} reward {rw} eta {r.eta()}"
        return line

    def request_interrupt(self, signum: int = signal.SIGINT, frame: Any = None) -> None:
        """Signal handler: only counts. The main loop acts on it (never raise inside a join)."""
        self.interrupt_requests += 1

    def run(self) -> int:
        done = [threading.Event() for _ in range(self.workers)]

        def work(i: int) -> None:
            try:
                self._worker(i)
            finally:
                done[i].set()

        threads = [threading.Thread(target=work, args=(i,), name=f"worker-{i}", daemon=True) for i in range(self.workers)]
        for t in threads:
            t.start()
        last_status = 0.0
        handled = 0
        while not all(d.is_set() for d in done):
            for d in done:
                d.wait(timeout=0.25)
            if self.interrupt_requests > handled:
                handled = self.interrupt_requests
                self._on_interrupt(first=not self.interrupted)
            now = time.monotonic()
            if now - last_status > 30 and self.running:
                last_status = now
                self._say(self._status_line())
        return 0

    def _on_interrupt(self, first: bool) -> None:
        self.interrupted = True
        self.stop.set()
        with self.lock:
            dirs = [r.trial_dir for r in self.running.values()]
        if first:
            self._say("interrupt: running trials stop after their current step and are queued again "
                      "(press Ctrl-C again to kill them now)")
            for d in dirs:
                _write_stop(d, "interrupted")
        else:
            self._say("interrupt: killing running trials")
            _kill_children()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rss_mb() -> float:
    import psutil

    return round(psutil.Process().memory_info().rss / 2**20, 1)


def _write_stop(trial_dir: Path, reason: str) -> None:
    tmp = trial_dir / "STOP.tmp"
    try:
        tmp.write_text(reason)
        os.replace(tmp, trial_dir / "STOP")
    except OSError:
        pass


def _kill_children() -> None:
    try:
        import psutil
    except ImportError:
        return
    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.Error:
            pass


def _heartbeat(ostudy: "optuna.Study", trial_id: int, interval: int, stop: threading.Event) -> None:
    storage = ostudy._storage
    while not stop.is_set():
        try:
            storage.record_heartbeat(trial_id)  # type: ignore[attr-defined]
        except Exception:
            pass
        stop.wait(interval)


def _reward_plot(metrics_path: Path, out: Path, title: str) -> bool:
    from matplotlib.figure import Figure  # no pyplot: its global figure registry grows in a long sweep

    from grpo_ablate.metrics import read_rows

    xs, ys = [], []
    for row in read_rows(metrics_path):
        if row.get("reward") is not None:
            xs.append(row.get("train_seconds", row.get("step")))
            ys.append(row["reward"])
    if len(xs) < 2:
        return False
    fig = Figure(figsize=(5, 3), dpi=90)
    ax = fig.subplots()
    ax.plot(xs, ys, lw=1.2)
    ax.set_xlabel("training seconds")
    ax.set_ylabel("mean reward")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    return True


# ------------------------------------------------------------------------- the command


def _wait_for_plan(ostudy: "optuna.Study") -> bool:
    deadline = time.monotonic() + PLAN_WAIT_S
    while time.monotonic() < deadline:
        if ostudy.user_attrs.get(PLAN_READY_ATTR):
            return True
        time.sleep(1.0)
    return False


def run_study(study: "Study", write_report: bool = True) -> int:
    """Create or resume the study, run it to n_trials, summarise, write the report."""
    warnings.filterwarnings("ignore", message=".*Heartbeat of storage is supposed to be used.*")
    warnings.filterwarnings("ignore", category=FutureWarning, module="optuna")
    import optuna

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    out = study.output_dir
    out.mkdir(parents=True, exist_ok=True)
    ostudy, created = open_study(study, for_run=True)
    if created:
        _describe_study(ostudy, study)
    cells = study_plan(study)
    if cells:
        if created:
            _queue_plan(ostudy, study, cells)
            ostudy.set_user_attr(PLAN_READY_ATTR, True)
        elif not _wait_for_plan(ostudy):
            print("grpo-ablate: the study exists but its trial plan was never queued (did the first host die while "
                  "creating it?); remove the study or run with a new study.name", file=sys.stderr)
            return 1
        elif ostudy.user_attrs.get(PLAN_READY_ATTR):
            added = _queue_plan(ostudy, study, cells)
            if added:
                print(f"grpo-ablate: queued {added} planned trial(s) new since the study was created")

    runner = StudyRunner(study, ostudy, study.study.workers)
    done, _running = runner._finished_count()
    print(f"Study {study.study.name!r}: {'created' if created else 'resumed'} in {study.storage_url} "
          f"({done}/{runner.n_trials} trials finished), {runner.workers} worker(s), sampler {study.study.sampler}, "
          f"objectives {', '.join(f'{m} ({d})' for m, d in zip(study.metric_names, study.directions))}")

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, runner.request_interrupt)
        except ValueError:  # not the main thread (tests drive run_study from threads)
            pass
    try:
        runner.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    _print_summary(study, ostudy, runner)
    if write_report:
        try:
            from grpo_ablate.report import write_report as _write

            paths = _write(study)
            print(f"Report: {paths['html']}")
        except Exception as e:  # the study is safe in storage; the report can be redone with `grpo-ablate report`
            print(f"grpo-ablate: the report could not be written ({type(e).__name__}: {e}); "
                  f"retry with: grpo-ablate report {study.path or '<study.yaml>'}", file=sys.stderr)
    if runner.interrupted:
        print("Interrupted: run the same command again to finish the study (nothing finished is lost or repeated).")
        return 130
    if runner.stop_reason and (runner.storage_error or runner.counts.consecutive_failures >= study.study.max_consecutive_failures):
        print(f"grpo-ablate: the study stopped: {runner.stop_reason}", file=sys.stderr)
        return 1
    if runner.stop_reason:
        print(f"Stopped: {runner.stop_reason}")
    return 0


def _print_summary(study: "Study", ostudy: "optuna.Study", runner: StudyRunner) -> None:
    from optuna.trial import TrialState
    from rich.table import Table

    trials = ostudy.get_trials(deepcopy=False)
    states: dict[str, int] = {}
    for t in trials:
        key = t.user_attrs.get("outcome") or t.state.name.lower()
        states[key] = states.get(key, 0) + 1
    runner.console.print("Trials: " + ", ".join(f"{k} {v}" for k, v in sorted(states.items())), markup=False, soft_wrap=True)
    good = [t for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get("outcome") == "completed"]
    if not good:
        runner.console.print("No trial completed yet.", markup=False)
        return
    table = Table(title="Best trials", show_lines=False, min_width=60)
    for col in ("objective", "trial", "arm", "G", "batch", "T", "seed", "value"):
        table.add_column(col)
    for i, (metric, direction) in enumerate(zip(study.metric_names, study.directions)):
        best = (max if direction == "maximize" else min)(good, key=lambda t: t.values[i])
        u = best.user_attrs
        table.add_row(f"{metric} ({direction})", str(best.number), str(u.get("role", "")), str(u.get("num_generations")),
                      str(u.get("generation_batch_size")), f"{u.get('temperature', 0):.3g}", str(u.get("seed")),
                      f"{best.values[i]:.4g}")
    runner.console.print(table)

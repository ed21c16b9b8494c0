"""One cell of the SLURM fault matrix: a study run by the shipped array script on the test cluster, a fault mid-trial, the study finished.

A cell (process or warm x fault) submits sweeps/slurm/grpo-ablate-array.sbatch (with the resource
header `grpo-ablate slurm-script` writes for the study) as one array task on a real PostgreSQL
study of the tiny built-in model (one arm, 60 steps, a checkpoint every 4), waits on events
(trial 0's checkpoint at step 4 and 6 metrics rows), applies the fault (54 steps before the trial's end: a
fault that lands after the last step tests nothing, and 12 steps left that to chance on a loaded machine), waits for every process
of the job to end, and submits again (a node set DOWN is SLURM's own requeue: the job runs again
once the node is back). What it returns is read from the storage and the job's records, for
tests/test_slurm_faults.py (the cells that prove each mechanism) and benchmarks/slurm_matrix.py
(every cell, with times).

A cell of the slurm launcher (`run_launcher_cell`) runs one orchestrator on this host, the
"login node" (`grpo-ablate run` with GRPO_ABLATE_LAUNCHER=slurm), whose trial is an sbatch job
of its own; the fault hits that job (its id read from the trial folder, launch/slurm.py
JOB_FILE), and the same orchestrator queues the interrupted trial again and submits its retry.
Its own fault is the orchestrator killed (SIGKILL) while the job runs on; the rerun reclaims
the job (cancels it, launch/slurm.py) before it queues the trial again. A time limit is the
job's limit lowered to one minute while it runs (`scontrol update TimeLimit=1`): SLURM's own
timeout then ends it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from helpers import ROOT, cli_inprocess
from slurm_cluster import SlurmCluster

from grpo_ablate.records import trial_record as record

__all__ = ["CONTROLLER_FAULTS", "FAULTS", "LAUNCHER_FAULTS", "ORCHESTRATOR_FAULTS", "Cell", "run_cell", "run_launcher_cell"]

SCRIPT = ROOT / "sweeps" / "slurm" / "grpo-ablate-array.sbatch"
EVENT_WAIT_S = 600
# The shortest job limit is a minute, and slurmctld checks limits every 30 s: the trial must outlast 90 s on an idle
# machine, where this model trains 10 to 17 steps a second (150 and 600 steps both finished inside the limit).
TIME_LIMIT_STEPS = 2000

STUDY = """\
study:
  name: {name}
  output_dir: {out}
  sampler: ablation
  seeds: [0]
  checkpoint_steps: 4
  max_retry: 3
  heartbeat_interval: 2
  grace_period: 6
model: {{name_or_path: builtin:tiny}}
data: {{task: addition, num_prompts: 400}}
trainer: {{learning_rate: 2.0e-4, per_device_train_batch_size: 32, max_completion_length: 6, beta: 0.0}}
search: {{num_generations: [4]}}
budget: {{max_steps: {steps}}}
"""

# name -> (what it does, the client command applied to job {job} on node {node}; None: a special case)
FAULTS: dict[str, str] = {
    "scancel": "scancel: SIGTERM to every process of the job at once, SIGKILL after KillWait (also preemption)",
    "scancel-twice": "scancel twice: a repeated SIGTERM to every process",
    "batch-term": "scancel --batch --signal=TERM: the batch shell only; the script forwards it",
    "signal-kill": "scancel --signal=KILL (SLURM treats it as a cancel of a batch job)",
    "full-kill": "scancel --full --signal=KILL (SLURM 22.05 also begins it with SIGTERM to every process)",
    "hard-kill": "SIGKILL to every process of the job by pid, nothing can run (a crashed node's processes)",
    "node-down": "scontrol update nodename=... state=down: SLURM ends the job and requeues it",
    "time-limit": "the job runs past --time=1 (one minute): SIGTERM to every process, then SIGKILL",
}
# The slurm launcher's own fault: its orchestrator on the login node dies (SIGKILL) while a trial's job runs on.
ORCHESTRATOR_FAULTS = {"orchestrator-kill": "SIGKILL of the orchestrator (grpo-ablate run on the login node), then a rerun"}
# The controller away while the job runs on under slurmd (issue 52): the orchestrator must lose no job and double none.
CONTROLLER_FAULTS = {
    "controller-restart": "slurmctld stopped (SIGTERM) and started again at once",
    "controller-outage": "slurmctld stopped for CONTROLLER_OUTAGE_S (default 300 s), then started again",
}
CONTROLLER_OUTAGE_ENV = "GRPO_ABLATE_CONTROLLER_OUTAGE_S"
LAUNCHER_FAULTS = {"process": sorted(FAULTS), "warm": sorted(FAULTS),
                   "slurm": sorted(FAULTS | ORCHESTRATOR_FAULTS | CONTROLLER_FAULTS)}


@dataclass
class Cell:
    launcher: str
    fault: str
    outcomes: list[str] = field(default_factory=list)  # every trial's recorded outcome, by number
    arms_completed: dict[str, int] = field(default_factory=dict)  # num_generations -> completed trials
    interrupted_steps: int | None = None  # steps the interrupted trial recorded
    resumed_from_step: int | None = None  # where its retry started
    first_exit: str = ""  # the faulted task's own last line ("task 0 done, exit N"), else the job's state
    first_state: str = ""
    final_state: str = ""
    final_exit: str = ""
    seconds_to_end: float = 0.0  # from the fault to the last process of the job gone
    seconds: float = 0.0  # the whole cell
    min_resume: int = 4  # the checkpoint the fault came after: the retry starts there or later
    adopted: bool = False  # the retry trained nothing: the faulted attempt had finished, its result was recorded
    jobs: int = 0  # SLURM jobs the study submitted (the controller's memory of jobs named after its trials)
    trained_twice: int = 0  # optimizer steps trained by more than one trial process of the cell
    outage_s: float = 0.0  # how long the controller was away (controller faults)
    log: str = ""

    @property
    def lost_nothing(self) -> bool:
        resumed = (self.resumed_from_step is not None and self.resumed_from_step >= self.min_resume) \
            or (self.min_resume == 0 and not self.interrupted_steps)  # stopped before its first step: nothing to resume
        return self.arms_completed == {"4": 1} and "failed" not in self.outcomes and self.outcomes[-1] == "completed" \
            and (resumed or self.adopted or self.outcomes == ["completed"])  # never interrupted: nothing to resume

    def row(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "log"} | {"lost_nothing": self.lost_nothing}


def _wait(condition, what: str, timeout: float = EVENT_WAIT_S, log=lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout:g} s\n{log()}")
        time.sleep(0.2)


def _checkpointed_past(trial_dir: Path, step: int, rows: int):
    from grpo_ablate.contract import checkpoints
    from grpo_ablate.core.vocab import METRICS_FILE

    def ready() -> bool:
        found = checkpoints.latest(trial_dir)
        metrics = trial_dir / METRICS_FILE
        return (found is not None and found.step >= step and metrics.exists()
                and len(metrics.read_text().splitlines()) >= rows)
    return ready


def _state(cluster: SlurmCluster, job: str) -> tuple[str, str]:
    """(JobState, ExitCode) of a job (its first array task), from scontrol: this cluster keeps no accounting for sacct."""
    out = cluster.run("scontrol", "-o", "show", "job", job).stdout.split("\n")[0]
    fields = dict(part.split("=", 1) for part in out.split() if "=" in part)
    return fields.get("JobState", "?"), fields.get("ExitCode", "?")


def _script(cluster: SlurmCluster, study: Path, folder: Path, env: dict[str, str]) -> Path:
    """The array script with the study's own resource header (`grpo-ablate slurm-script`), as the README says; the
    command runs in this process with the submit environment (its own process proves nothing here)."""
    submit = {k: v for k, v in env.items() if k.startswith(("GRPO_ABLATE_", "SLURM_")) or k == "CUDA_VISIBLE_DEVICES"}
    out = cli_inprocess("slurm-script", str(study), **submit)
    assert out.returncode == 0, out.stdout + out.stderr
    path = folder / "grpo-ablate.sbatch"
    path.write_text(out.stdout)
    return path


def run_cell(cluster: SlurmCluster, url: str, folder: Path, launcher: str, fault: str, *, steps: int = 60) -> Cell:
    """Run one cell in `folder` on `cluster` with the study on PostgreSQL `url` (a fresh database)."""
    from grpo_ablate.storage.store import normalize_url, open_storage

    started = time.monotonic()
    cell = Cell(launcher, fault)
    url = normalize_url(url)
    name = f"slurm-{launcher}-{fault}"
    out = folder / "runs"
    study = folder / "study.yaml"
    if fault == "time-limit":
        steps = max(steps, TIME_LIMIT_STEPS)
    study.write_text(STUDY.format(name=name, out=out, steps=steps))
    env = dict(cluster.env, GRPO_ABLATE_STORAGE=url, GRPO_ABLATE_VENV=str(Path(sys.executable).parent.parent),
               GRPO_ABLATE_LAUNCHER=launcher, CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1",
               GRPO_ABLATE_STAGGER="0")
    open_storage(url)  # the tables, once, as the README says
    script = _script(cluster, study, folder, env)
    options = ["--time=1"] if fault == "time-limit" else []

    def submit(tag: str) -> str:
        job = subprocess.run(["sbatch", "--parsable", "--array=0", f"--output={folder}/{tag}-%A_%a.out", *options,
                              str(script), str(study)], env=env, cwd=folder, capture_output=True, text=True, timeout=60)
        assert job.returncode == 0, job.stdout + job.stderr
        return job.stdout.strip().split(";")[0]

    def logs() -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(folder.glob("*.out")))

    first = submit("first")
    trial0 = out / "trials" / "00000"
    if fault == "time-limit":  # the clock is the fault: it may come before step 4 (the stop checkpoints its own step)
        _wait(lambda: _state(cluster, f"{first}_0")[0] not in ("PENDING", "CONFIGURING", "RUNNING"),
              "the job's time limit", log=logs)
        cell.min_resume = 0
    else:
        _wait(_checkpointed_past(trial0, 4, 6), "checkpoint at step 4 and 6 metrics rows in trial 0", log=logs)
    fault_at = time.monotonic()
    job_id = f"{first}_0"
    _apply(cluster, fault, first, job_id)
    _wait(lambda: not cluster.job_processes(), "end of the job's processes", log=logs)
    cell.seconds_to_end = time.monotonic() - fault_at
    cell.first_state = _state(cluster, job_id)[0]
    done_lines = [line for line in logs().splitlines() if "done, exit" in line]
    cell.first_exit = done_lines[-1].split("done, ")[-1] if done_lines else f"no exit line ({cell.first_state})"

    if fault == "node-down":  # SLURM requeued the job: it runs again once the node is back
        cluster.resume_node()
        second = first
    else:
        options = []
        second = submit("second")
    _wait(lambda: _state(cluster, f"{second}_0")[0] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")
          and not cluster.job_processes(), "the second run's end", log=logs)
    cell.final_state, cell.final_exit = _state(cluster, f"{second}_0")

    _read_study(cell, name, url)
    cell.seconds = time.monotonic() - started
    cell.log = logs()
    return cell


def _apply(cluster: SlurmCluster, fault: str, job: str, job_id: str) -> None:
    """Apply a fault of FAULTS to job `job` (`job_id`: the task or job the signal commands name)."""
    if fault == "scancel":
        cluster.run("scancel", job)
    elif fault == "scancel-twice":
        cluster.run("scancel", job)
        time.sleep(1.0)
        cluster.run("scancel", "--signal=TERM", "--full", job_id, check=False)  # the job is ending: a TERM to all again
    elif fault == "batch-term":
        cluster.run("scancel", "--batch", "--signal=TERM", job_id)
    elif fault == "signal-kill":
        cluster.run("scancel", "--signal=KILL", job)
    elif fault == "full-kill":
        cluster.run("scancel", "--full", "--signal=KILL", job_id)
    elif fault == "hard-kill":
        for pid in cluster.job_processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    elif fault == "node-down":
        cluster.run("scontrol", "update", f"nodename={cluster.node}", "state=down", "reason=grpo-ablate-test")
    elif fault != "time-limit":
        raise ValueError(f"unknown fault {fault!r}")


def _read_study(cell: Cell, name: str, url: str) -> None:
    import optuna

    from grpo_ablate.storage.store import open_storage
    from grpo_ablate.study import ledger

    trials = optuna.load_study(study_name=name, storage=open_storage(url)).get_trials(deepcopy=False)
    cell.outcomes = [ledger.outcome(t).value for t in trials]  # a trial lost with its worker: its heartbeat's record
    for t, outcome in zip(trials, cell.outcomes):
        if outcome == "completed":
            arm = record.arm_of(t)
            g = str(arm.num_generations if arm is not None else None)
            cell.arms_completed[g] = cell.arms_completed.get(g, 0) + 1
        if outcome == "interrupted" and cell.interrupted_steps is None:
            cell.interrupted_steps = record.recorded_metrics(t, ["steps"])["steps"]
            if cell.interrupted_steps is None:  # requeued for a dead run, not recorded by the trial: what its folder holds
                cell.interrupted_steps = _last_step(record.trial_dir(t))
        if record.retry_of(t) is not None and cell.resumed_from_step is None:
            cell.resumed_from_step = record.resumed_from(t)


def run_launcher_cell(cluster: SlurmCluster, url: str, folder: Path, fault: str, *, steps: int = 60) -> Cell:
    """A cell of the slurm launcher: one orchestrator on this host, the trial an sbatch job, the fault on that job."""
    from grpo_ablate.launch.slurm import read_job
    from grpo_ablate.storage.store import normalize_url, open_storage

    started = time.monotonic()
    cell = Cell("slurm", fault)
    url = normalize_url(url)
    name = f"slurm-slurm-{fault}"
    out = folder / "runs"
    study = folder / "study.yaml"
    if fault == "time-limit":
        steps = max(steps, TIME_LIMIT_STEPS)
    if fault == "orchestrator-kill":  # the job must still run when the rerun comes (60 steps took 20 s here): reclaim's case
        steps = max(steps, 300)
    if fault in CONTROLLER_FAULTS:  # the job trains through the outage's start (the rest of it may end inside)
        steps = max(steps, 300)
    study.write_text(STUDY.format(name=name, out=out, steps=steps))
    env = dict(cluster.env, GRPO_ABLATE_STORAGE=url, GRPO_ABLATE_LAUNCHER="slurm", CUDA_VISIBLE_DEVICES="",
               HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    open_storage(url)
    trial0 = out / "trials" / "00000"
    logs_of: list[Path] = []

    def orchestrate(tag: str) -> subprocess.Popen[bytes]:
        log = folder / f"{tag}.out"
        logs_of.append(log)
        with log.open("wb") as sink:
            return subprocess.Popen([sys.executable, "-m", "grpo_ablate", "run", str(study), "--storage", url,
                                     "--no-report"], cwd=folder,
                                    env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)

    def logs() -> str:
        files = logs_of + sorted(out.glob("trials/*/log.txt"))
        return "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in files if p.exists())

    jobs_before = len(cluster.run("squeue", "-h", "-t", "all", "-o", "%j").stdout.split())
    first = orchestrate("first")
    try:
        _wait(_checkpointed_past(trial0, 4, 6), "checkpoint at step 4 and 6 metrics rows in trial 0", log=logs)
        job = read_job(trial0)
        assert job is not None, f"no {trial0}/slurm-job.json"
        fault_at = time.monotonic()
        if fault in CONTROLLER_FAULTS:  # the controller away; the orchestrator asks on and must conclude nothing
            cluster.stop_controller()
            try:
                time.sleep(float(os.environ.get(CONTROLLER_OUTAGE_ENV, "300")) if fault == "controller-outage" else 0.0)
            finally:
                cluster.start_controller()
            cell.outage_s = time.monotonic() - fault_at
            code = first.wait(timeout=EVENT_WAIT_S * 2)
            cell.first_exit = cell.final_exit = f"exit {code}"
            cell.final_state = "finished" if code == 0 else "not finished"
            cell.seconds_to_end = time.monotonic() - fault_at
        elif fault == "time-limit":  # SLURM's own limit, lowered while it runs: TIMEOUT, SIGTERM, SIGKILL after KillWait
            cluster.run("scontrol", "update", f"jobid={job}", "TimeLimit=1")
            cell.min_resume = 4
        elif fault == "orchestrator-kill":
            first.kill()  # SIGKILL: no handler runs, its job runs on
        else:
            _apply(cluster, fault, job, job)
        if fault in CONTROLLER_FAULTS:
            pass
        elif fault == "orchestrator-kill":
            _wait(lambda: first.poll() is not None, "the faulted job's end", log=logs)
        else:
            _wait(lambda: cluster.job_state(job) not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"),
                  "the faulted job's end", log=logs)
        if fault in CONTROLLER_FAULTS:
            final = first
        elif fault == "orchestrator-kill":  # the job runs on without its orchestrator until the rerun reclaims it
            time.sleep(3.0)
            cell.first_state = cluster.job_state(job)
            cell.first_exit = f"killed ({first.returncode}); job {cell.first_state}"
            rerun = orchestrate("second")
            _wait(lambda: cluster.job_state(job) not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"),
                  "the rerun's reclaim of the job", log=logs)
            cell.seconds_to_end = time.monotonic() - fault_at
            cell.first_exit += f" → {cluster.job_state(job)} by the rerun"
            final = rerun
        else:
            _wait(lambda: read_job(trial0) is not None and not [p for p in cluster.job_processes()
                                                                   if _runs_job(p, job)],
                  "end of the faulted job's processes", log=logs)
            cell.seconds_to_end = time.monotonic() - fault_at
            cell.first_state = cluster.job_state(job)
            if fault == "node-down":  # back up; the orchestrator's retry job (pending meanwhile) takes the node at once
                cluster.run("scontrol", "update", f"nodename={cluster.node}", "state=resume", check=False)  # refused: it is up
            final = first
        code = final.wait(timeout=EVENT_WAIT_S * 2)
        cell.first_exit = cell.first_exit or f"exit {code}"
        cell.final_exit = f"exit {code}"
        cell.final_state = "finished" if code == 0 else "not finished"
    finally:
        for proc in (first, locals().get("rerun")):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    _read_study(cell, name, url)
    cell.jobs = len(cluster.run("squeue", "-h", "-t", "all", "-o", "%j").stdout.split()) - jobs_before
    trained = [step for folder in sorted(out.glob("trials/*")) for step in _trained_steps(folder)]
    cell.trained_twice = len(trained) - len(set(trained))
    retry = out / "trials" / "00001"  # its job file came with the files it adopted, or names a job of its own
    cell.adopted = cell.resumed_from_step is None and read_job(retry) is not None and read_job(retry) == read_job(trial0)
    cell.seconds = time.monotonic() - started
    cell.log = logs()
    return cell


def _last_step(trial_dir: str | None) -> int | None:
    """The last optimizer step in a trial folder's metrics.jsonl (what the trial trained, recorded or not)."""
    import json

    from grpo_ablate.core.vocab import METRICS_FILE

    if trial_dir is None or not (Path(trial_dir) / METRICS_FILE).exists():
        return None
    steps = [json.loads(line).get("step") for line in (Path(trial_dir) / METRICS_FILE).read_text().splitlines() if line.strip()]
    return max((s for s in steps if isinstance(s, int)), default=None)


def _trained_steps(folder: Path) -> list[int]:
    """The optimizer steps a trial folder's own trial process trained (its log echoes each one as it is trained)."""
    import json

    log = folder / "log.txt"
    text = log.read_text(errors="replace") if log.exists() else ""
    return [json.loads(line[len("[grpo-ablate] "):])["step"] for line in text.splitlines()
            if line.startswith('[grpo-ablate] {"step": ')]


def _runs_job(pid: int, job: str) -> bool:
    """Whether process `pid` belongs to SLURM job `job` (its SLURM_JOB_ID)."""
    try:
        return f"SLURM_JOB_ID={job}".encode() + b"\0" in (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return False


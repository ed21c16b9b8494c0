"""Running a study: worker threads, the main loop, and the signals that stop it.

    grpo-ablate run studies/tiny-cpu.yaml --workers 2

One orchestrating process (no torch: its memory stays flat however many trials run) holds
`study.workers` threads; each asks the study for a trial and runs it through the lifecycle.
Several hosts can run the same command on one PostgreSQL storage: the storage hands out
trials, so none runs twice. Ctrl-C or SIGTERM stops the running trials after their current
step and queues them again; a second Ctrl-C kills them at once. SIGTERM never kills: a batch
scheduler sends it to every process of the job (the trials get it too, and stop themselves:
trainer/signals.py), and a batch script that forwards it makes this process see it twice; any
number of SIGTERMs is one graceful stop.

`run_study` returns what happened (`StudyRun`): a refusal (the storage cannot be opened or the
output folder written or belongs to another study, the stored study's directions or feasible
space differ from the file's, a --warm-start source cannot be read, or the GPUs cannot hold one
trial), a study that exists but never got its plan queued, or how the run ended. The command
(commands/run.py) prints it, writes the report and picks the exit status.
Trial state (what finished, what a dead orchestrator left running) is read through study/ledger.py.
"""

from __future__ import annotations

from collections import Counter
import signal
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import psutil

from grpo_ablate.config import StudyError
from grpo_ablate.files.reader import Owner
from grpo_ablate.files.probe_file import load_probe
from grpo_ablate.records.gpu_hours import Budget, budget_of, measured_estimate
from grpo_ablate.plan.run_plan import StudyPlan
from grpo_ablate.storage.store import is_rdb_url, mask_url, open_artifact_store, open_storage, patiently
from grpo_ablate.study.console import Counts, StudyConsole
from grpo_ablate.study.wakeup import Wakeup
from grpo_ablate.launch.devices import worker_envs
from grpo_ablate.study import ledger, limits
from grpo_ablate.study.prefixes import Prefixes
from grpo_ablate.study.retry import requeue_changed, requeue_faulted, superseded
from grpo_ablate.records.trial_record import study_attrs
from grpo_ablate.study.lifecycle import Ended, Registry, StorageUnavailable, TrialLifecycle
from grpo_ablate.study.liveness import Liveness
from grpo_ablate.study.owner import check_output_dir, check_unowned_folder, claim_output_dir
from grpo_ablate.study.setup import (check_warm_source, describe_study, discard_new_study, open_study,
                                     queue_first_plan, queue_plan, queue_ready_branches, race_rule_changed,
                                     space_changed, wait_for_plan)
from grpo_ablate.study.warm import warm_start as warm_start_from
from grpo_ablate.launch import release_thread_launchers
from grpo_ablate.launch.registry import launcher_problems
from grpo_ablate.core.vocab import PREFIX_ROLE, Outcome

if TYPE_CHECKING:
    import optuna
    from optuna.artifacts import FileSystemArtifactStore as ArtifactStore
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import StudyConfig

__all__ = ["run_study", "StudyRun", "StudyRunner", "kills", "queued_cells", "queued_beyond_budget", "all_oom_message",
           "all_failed_reasons", "blocked_branches"]

WAIT = "wait"
RACE_WAIT = "race-wait"  # a racing round's last trials are still running
BRANCH_WAIT = "branch-wait"  # a branching study's queue is empty while a prefix (or a branch) still runs
BUDGET_WAIT = "budget-wait"  # the GPU-hour budget cannot take one more trial until a running one has ended
# How long a run waits for a retry another run is about to queue: the two writes of ledger.requeue are
# milliseconds apart (an outage between them is waited out by storage.patiently, up to the grace period)
RETRY_DUE_S = 30.0
STATUS_EVERY_S = 30.0


class StudyRunner:
    def __init__(self, study: "StudyConfig", ostudy: "optuna.Study", storage: "optuna.storages.BaseStorage",
                 artifacts: "ArtifactStore", envs: list[dict[str, str]], plan: StudyPlan):
        """`artifacts`: the study's artifact store; `envs`: each worker's environment (launch/devices.py worker_envs);
        `plan`: the run's, resolved once by the command."""
        self.study = study
        self.ostudy = ostudy
        self.storage = storage
        self.envs = envs
        self.workers = len(self.envs)
        self.plan = plan
        self.n_trials = plan.trial_count
        self.branches = plan.branch_step is not None
        self.heartbeat = is_rdb_url(study.storage_url)
        self.registry = Registry()
        self.console = StudyConsole()
        self.counts = Counts()
        self.lifecycle = TrialLifecycle(study, ostudy, storage, artifacts, self.registry,
                                        workers=self.workers, heartbeat=self.heartbeat, say=self.console.say, plan=plan)
        self.liveness = Liveness(self.lifecycle.run_identity, self.lifecycle.storage_wait_s)
        self.wakeup = Wakeup()
        self.interrupt_requests = 0  # SIGINTs (Ctrl-C): the second one kills the running trials
        self.term_requests = 0  # SIGTERMs: each one a graceful stop, never a kill
        self.interrupted = False
        self.storage_error = False
        self.failures_stop = False
        self.stop_reason: str | None = None
        self.deadline = time.monotonic() + study.study.timeout if study.study.timeout else None
        self.planned = plan.planned  # before the study's own trials: the probe, else assumptions
        self.timeout_words: str | None = None
        self.budget: Budget | None = None
        self.budget_stop = False
        self.retry_due_since: dict[int, float] = {}  # trial number -> when this run first saw its retry due

    # ---- choosing the next trial

    def finished_count(self) -> tuple[int, int]:
        """(finished, running) trials of the study over every host; requeued ones are not finished.

        A warm start's copies of another study's trials, and the out-of-memory pairs earlier
        versions recorded from a probe (role "probe"), teach the sampler but ran no trial here.
        """
        from optuna.trial import TrialState  # lazy: Optuna only while a study runs; every command imports study/

        trials = [t for t in self.ostudy.get_trials(deepcopy=False) if ledger.ran_here(t)]
        retried = superseded(trials)  # failed cells queued again for a changed study file (study/retry.py)
        done = sum(1 for t in trials if ledger.is_finished(t) and t.number not in retried)
        running = sum(1 for t in trials if t.state == TrialState.RUNNING)
        return done, running

    def _next_trial(self) -> "optuna.Trial | str | None":
        """The next trial, registered; WAIT when only other hosts' running trials stand in the way."""
        with self.registry.lock:
            if self.registry.stop.is_set():
                return None
            if self.deadline is not None and time.monotonic() > self.deadline:
                self.stop_reason = self.stop_reason or "the study's timeout was reached"
                return None
            # one liveness rule on every storage: a trial is queued again only once its run is known dead
            self.liveness.reap(self.ostudy, self.storage, own=set(self.registry.running),
                               max_retry=self.study.study.max_retry, say=self.console.say)
            if not self._within_limits():
                return BUDGET_WAIT if self.budget is not None and self.budget.running else None
            done, running = self.finished_count()
            others_running = running - len(self.registry.running)
            may_wait = self.heartbeat and others_running > 0 and done < self.n_trials
            if done + running >= self.n_trials:
                if self.study.study.racing is not None and running == 0:
                    self._next_round(0, close_only=True)  # record the last round's drops and the decision
                return WAIT if may_wait else None  # a dead host's trial comes back once its heartbeat is stale
            trial = self.lifecycle.ask_and_register()
            if trial is None and self.study.study.racing is not None:
                return self._next_round(running)
            if trial is None and running > 0 and self.branches:
                return BRANCH_WAIT  # a prefix still running queues its seed's branches when it completes
            if trial is None:
                return WAIT if may_wait or self._more_to_come() else None
            return trial

    def _more_to_come(self) -> bool:
        """The queue was found empty: whether the study, read again, may still give this run a trial. One was queued
        since the ask looked (another run's retry can land between this run's reads), or another run took one
        meanwhile (waited for, as a running trial is: its host may die), or another run has just ended a trial and
        is about to queue its retry (ledger.retries_due): waited for up to RETRY_DUE_S on this run's clock, after
        which the run that ended it died between its two writes and nothing will queue it."""
        from optuna.trial import TrialState  # lazy: Optuna only while a study runs; every command imports study/

        trials = self.ostudy.get_trials(deepcopy=False)
        if any(t.state == TrialState.WAITING for t in trials):
            return True  # the next look asks for it (or finds another run took it)
        if self.heartbeat and any(t.state == TrialState.RUNNING and t.number not in self.registry.running for t in trials):
            return True  # another run took it meanwhile: waited for, as `may_wait` does (its host may die)
        now = time.monotonic()
        due = ledger.retries_due(trials)
        self.retry_due_since = {n: self.retry_due_since.get(n, now) for n in due}
        return any(now - since < RETRY_DUE_S for since in self.retry_due_since.values())

    def spending(self) -> Budget:
        """The GPU-hour budget now (study.budget_gpu_hours is set)."""
        budget = budget_of(self.study.study.budget_gpu_hours, self.study.hardware.gpus,
                                  self.ostudy.get_trials(deepcopy=False), self.planned)
        assert budget is not None
        return budget

    def _within_limits(self) -> bool:
        """Set the next trial's timeout (auto: from the slowest finished trial once there is one) and check
        the GPU-hour budget: False, with the reason, when one more trial would cross it. Call with the lock held."""
        trials = self.ostudy.get_trials(deepcopy=False)
        estimate = measured_estimate(trials) or self.planned
        seconds, words = limits.resolve_timeout(self.study.study.trial_timeout, estimate)
        self.lifecycle.trial_timeout_s = seconds
        if words != self.timeout_words:
            self.timeout_words = words
            self.console.say(f"trial timeout: {words}")
        self.budget = budget_of(self.study.study.budget_gpu_hours, self.study.hardware.gpus, trials, self.planned)
        if self.budget is None or self.budget.may_start:
            return True
        if not self.budget.running:  # nothing running will free any: the study stops here
            self.budget_stop = True
            self.stop_reason = self.stop_reason or self.budget.refusal()
        return False

    def _next_round(self, running: int, close_only: bool = False) -> "optuna.Trial | str | None":
        """Racing: the round's queue is empty. Wait for its last trials, then decide and queue the next round."""
        from grpo_ablate.study.racing import advance, describe  # here: its statistics load numpy, which no other run needs

        if running > 0:
            return RACE_WAIT
        state = advance(self.ostudy, self.study, self.plan, queue_next=not close_only)
        if state.decided:
            self.stop_reason = self.stop_reason or describe(state)
            return None
        for d in state.dropped:
            if d.round == state.round:
                self.console.say(f"racing round {d.round}: dropped {d.arm}: {d.reason}")
        return None if close_only else self.lifecycle.ask_and_register()

    def ended_here(self, ft: "FrozenTrial") -> str | None:
        """Once the run is over: why a trial the storage still calls RUNNING is not running (its end could not be
        recorded by this run, or its run is dead); None when another live run may be running it. A trial this run
        asked is this run's even where its owner record never reached the storage."""
        host, pid = ledger.owner(ft)
        if ft.number in self.registry.taken or ledger.owner_run(ft).get("run_id") == self.lifecycle.run_identity.run_id:
            return "this run ended without recording it" + (f": {self.stop_reason}"[:160] if self.storage_error else "")
        return self.liveness.dead(ft, heartbeat_stale=False) if host == self.lifecycle.run_identity.host else None

    # ---- the workers

    def _worker(self, index: int) -> None:
        env = self.envs[index]
        while not self.registry.stop.is_set():
            try:  # an outage up to the grace period is waited out (storage.patiently); then the run stops, saying why
                trial = patiently(self._next_trial, seconds=self.lifecycle.storage_wait_s, what="asking for a trial",
                                  say=self.console.say)
            except Exception as e:  # noqa: BLE001 - storage trouble: stop, say why
                self.stop_reason = f"could not get a trial from the storage: {type(e).__name__}: {e}"
                self.storage_error = True
                self.registry.stop.set()
                return
            if trial is None:
                return
            if trial == WAIT:
                self.registry.stop.wait(max(1, self.study.study.heartbeat_interval))
                continue
            if trial in (RACE_WAIT, BUDGET_WAIT, BRANCH_WAIT):
                self.registry.stop.wait(1.0)
                continue
            assert not isinstance(trial, str)
            try:
                ended = self.lifecycle.run(trial, env)
            except Exception as e:  # noqa: BLE001 - the storage refused the record: stop, say why
                self.registry.unregister(trial.number)
                self.stop_reason = (str(e) if isinstance(e, StorageUnavailable)  # one paragraph: what is kept, what to do
                                    else f"could not record trial {trial.number}: {type(e).__name__}: {e}")
                self.storage_error = True
                self.registry.stop.set()
                return
            self.console.ended(self.study, ended)
            self._count(ended)
            if self.study.study.budget_gpu_hours is not None:
                self.console.say(self.spending().words())

    def _count(self, ended: Ended) -> None:
        with self.registry.lock:
            self.counts.add(ended)
            c = self.counts
            if c.consecutive_failures >= self.study.study.max_consecutive_failures and not self.failures_stop:
                self.failures_stop = True
                self.stop_reason = (f"{c.consecutive_failures} trials failed in a row; the last reasons:\n  "
                                    + "\n  ".join(c.last_reasons))
                self.registry.stop.set()

    # ---- the main loop and its signals

    def request_interrupt(self, signum: int = signal.SIGINT, frame: Any = None) -> None:
        """Signal handler: counts only (the wakeup fd has already woken the main loop)."""
        if signum == signal.SIGTERM:
            self.term_requests += 1
        else:
            self.interrupt_requests += 1

    def run(self) -> None:
        done = [threading.Event() for _ in range(self.workers)]

        def work(i: int) -> None:
            try:
                self._worker(i)
            finally:
                release_thread_launchers()  # this worker's warm session ends with it
                done[i].set()
                self.wakeup.notify()

        threads = [threading.Thread(target=work, args=(i,), name=f"worker-{i}", daemon=True) for i in range(self.workers)]
        for t in threads:
            t.start()
        last_status = time.monotonic()
        handled_int = handled_term = 0
        while not all(d.is_set() for d in done):
            self.wakeup.wait(timeout=last_status + STATUS_EVERY_S - time.monotonic())
            new_int, new_term = self.interrupt_requests - handled_int, self.term_requests - handled_term
            if new_int or new_term:
                handled_int, handled_term = self.interrupt_requests, self.term_requests
                first = not self.interrupted
                self._on_interrupt(first=first, kill=kills(first, new_int), term=new_int == 0)
            if time.monotonic() - last_status >= STATUS_EVERY_S:
                last_status = time.monotonic()
                running = self.registry.snapshot()
                if running:
                    self.console.status(self.counts, running)
        for t in threads:  # each has set its event; what is left of it is the wake-up it sends as it ends
            t.join()

    def _on_interrupt(self, first: bool, kill: bool = False, term: bool = False) -> None:
        self.interrupted = True
        if first:
            self.console.say(("SIGTERM" if term else "interrupt") + ": running trials stop after their current step "
                             "and are queued again (press Ctrl-C again to kill them now)")
            self.registry.request_stop(Outcome.INTERRUPTED.value)
        if kill:
            self.console.say("interrupt: killing running trials")
            _kill_children()
        elif not first:
            self.console.say(("SIGTERM" if term else "interrupt") + " again: the running trials are already stopping "
                             "after their current step")


def kills(first: bool, new_interrupts: int) -> bool:
    """Whether the signals just received kill the running trials: a Ctrl-C after a stop was asked for
    (or two at once); never a SIGTERM, however many (they are not counted here)."""
    return new_interrupts > (1 if first else 0)


def _kill_children() -> None:
    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.Error:
            pass


# ------------------------------------------------------------------ running a study


@dataclass
class StudyRun:
    """What `run_study` did; the command (commands/run.py) prints it and picks the exit status.

    `refused`: why the study cannot start here (nothing ran). `unplanned`: the study exists but
    its plan (or first racing round) was never queued. Otherwise it ran: `interrupted`,
    `stopped` (storage trouble or failures in a row, and why: the study did not finish),
    `stop_reason` (why it ended early by design: a timeout, a settled race), and what the study
    holds at the end: `failed_reasons` (every finished trial failed), `nothing_fit` (every
    finished trial ran out of memory, and what to do), `queued` (cells still waiting).
    """

    refused: str | None = None
    unplanned: str | None = None
    interrupted: bool = False
    stopped: str | None = None
    stop_reason: str | None = None
    failed_reasons: list[str] = field(default_factory=list)
    nothing_fit: str | None = None
    queued: list[str] = field(default_factory=list)

    @property
    def ran(self) -> bool:
        return self.refused is None and self.unplanned is None


def run_study(study: "StudyConfig", plan: StudyPlan, *, say: Callable[[str], None], warn: Callable[[str], None],
              warm_start: str | None = None, warm_start_storage: str | None = None) -> StudyRun:
    """Create or resume the study and run it to n_trials; what happened, for the command to report.

    `plan`: the study resolved once by the command (plan/run_plan.py resolve_plan); nothing in the run resolves it again.
    `say` and `warn` take the lines said while it starts (where the study is, a warm start's
    message, cells queued since the study was created); the runner's console shows the trials.
    `warm_start`: a finished study (its file, or its name in `warm_start_storage`, default this
    study's storage) whose best arms are queued first (study/warm.py).
    """
    warnings.filterwarnings("ignore", message=".*Heartbeat of storage is supposed to be used.*")
    warnings.filterwarnings("ignore", category=FutureWarning, module="optuna")
    import optuna  # here: after the warning filters above; only a run loads Optuna

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    url = mask_url(study.storage_url)
    try:
        if problems := launcher_problems(study):  # a caller of the Python API skipped the command's check
            raise StudyError(problems, str(study.path or ""))
        try:
            envs = worker_envs(study, study.study.workers)
        except RuntimeError as e:  # GPUs that cannot hold one trial: refused before anything is created
            return StudyRun(refused=str(e))
        check_output_dir(study)  # checks first: nothing is created for a run that is refused
        if warm_start:
            check_warm_source(study, warm_start, warm_start_storage)
        study.output_dir.mkdir(parents=True, exist_ok=True)
        storage = open_storage(study.storage_url, heartbeat_interval=study.study.heartbeat_interval,
                               grace_period=study.study.grace_period,
                               stale_trial_callback=ledger.StaleTrialRequeue(study.study.max_retry))
        artifacts = open_artifact_store(study.output_dir)  # beside the storage: the trials' files
        check_unowned_folder(study, optuna.study.get_all_study_names(storage))
        claim_output_dir(study)
        ostudy, created = open_study(study, plan.completions, for_run=True, storage=storage)
    except StudyError as e:
        return StudyRun(refused=str(e))
    except OSError as e:
        return StudyRun(refused=f"cannot write the study's output folder {study.output_dir}: {e}")
    if created:
        describe_study(ostudy, study, plan.baseline)
    elif (changed := space_changed(stored := study_attrs(ostudy), study) or race_rule_changed(stored, study)) is not None:
        return StudyRun(refused=changed)
    if warm_start and not created:
        say(f"grpo-ablate: the study was already started; --warm-start {warm_start} applies only to a new study")
    elif warm_start:
        try:
            say(warm_start_from(ostudy, study, warm_start, warm_start_storage))
        except (ValueError, KeyError, OSError, StudyError) as e:
            discard_new_study(ostudy, storage)  # a rerun with the source fixed creates it afresh, rather than waiting for a plan
            return StudyRun(refused=f"cannot warm-start from {warm_start}: {e}")
    cells = list(plan.cells)
    if created:
        queue_first_plan(ostudy, study, plan)
    elif cells and not wait_for_plan(ostudy):
        if study.study.racing is not None:
            return StudyRun(unplanned="the study exists but its first racing round was never queued")
        return StudyRun(unplanned="the study exists but its trial plan was never queued (did the first host die "
                                  "while creating it?); remove the study or run with a new study.name")
    elif cells and study.study.racing is None:  # a resumed race queues its next round itself once the queue runs dry
        added = queue_plan(ostudy, study, plan, cells)
        if added:
            say(f"grpo-ablate: queued {added} planned trial(s) new since the study was created")
            if (note := queued_beyond_budget(ostudy, plan.trial_count)) is not None:
                warn(f"grpo-ablate: {note}")
    elif cells and plan.branch_step is not None:  # a resumed race: the branches of prefixes that completed
        if added := queue_ready_branches(ostudy, study, plan):
            say(f"grpo-ablate: queued {added} branch(es) of prefixes that completed before the last run ended")

    if not created and (retried_note := requeue_changed(ostudy, study, plan)) is not None:
        say(f"grpo-ablate: {retried_note}")
    if not created and (faulted_note := requeue_faulted(ostudy, study, plan)) is not None:
        say(f"grpo-ablate: {faulted_note}")
    if not created and plan.branch_step is not None:
        for seed in Prefixes(study, plan, plan.cells).retrain_stale(ostudy, plan.cells):
            say(f"grpo-ablate: seed {seed}'s prefix ran under an earlier version of the study file: queued to train "
                "again, and its branches start from the new one")
    try:
        runner = StudyRunner(study, ostudy, storage, artifacts, envs, plan)
    except (OSError, StudyError) as e:  # an unwritable folder; a bad probe.json
        return StudyRun(refused=str(e))
    done, _ = runner.finished_count()
    say(f"Study {study.study.name!r}: {'created' if created else 'resumed'} in {url} "
        f"({done}/{runner.n_trials} trials finished), {runner.workers} worker(s), sampler {study.sampler_kind}, "
        f"objectives {', '.join(f'{m} ({d})' for m, d in zip(study.metric_names, study.directions))}")

    warning = limits.timeout_warning(
        study.study.trial_timeout, measured_estimate(ostudy.get_trials(deepcopy=False)) or runner.planned)
    if warning:
        warn(f"grpo-ablate: warning: {warning}")
    if study.study.budget_gpu_hours is not None:
        say(runner.spending().words() + ("" if study.hardware.gpus else
            " (a CPU study spends no GPU-hours: set hardware.gpus for the budget to count)"))

    previous: dict[signal.Signals, Any] = {}
    wakeup_fd: int | None = None
    if threading.current_thread() is threading.main_thread():  # tests drive run_study from threads too
        wakeup_fd = signal.set_wakeup_fd(runner.wakeup.w, warn_on_full_buffer=False)
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, runner.request_interrupt)
    try:
        runner.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if wakeup_fd is not None:
            signal.set_wakeup_fd(wakeup_fd)
        runner.wakeup.close()

    runner.console.summary(study, ostudy, runner.ended_here)
    for line in blocked_branches(ostudy, plan):
        warn(f"grpo-ablate: {line}")
    if study.study.budget_gpu_hours is not None:
        runner.console.say(runner.spending().words())
    return StudyRun(interrupted=runner.interrupted,
                    stopped=runner.stop_reason if runner.storage_error or runner.failures_stop else None,
                    stop_reason=runner.stop_reason, failed_reasons=all_failed_reasons(ostudy),
                    nothing_fit=all_oom_message(ostudy, study), queued=queued_cells(ostudy))


def blocked_branches(ostudy: "optuna.Study", plan: StudyPlan) -> list[str]:
    """A branching study: each seed whose prefix failed for good, and why its branches never ran (nothing else
    queues them: a rerun trains the prefix again only once its failed record is removed)."""
    if plan.branch_step is None:
        return []
    trials = ostudy.get_trials(deepcopy=False)
    ready = ledger.completed_prefixes(trials)
    branches = Counter(c.seed for c in plan.cells if c.role != PREFIX_ROLE)  # each seed's
    out = []
    for t in trials:
        seed = ledger.seed_of(t)
        if not ledger.is_prefix(t) or seed is None or seed in ready or ledger.outcome(t) not in ledger.FINISHED:
            continue
        if any(ledger.is_prefix(o) and ledger.seed_of(o) == seed and ledger.outcome(o) in (Outcome.RUNNING, Outcome.QUEUED)
               for o in trials):
            continue  # a retry of it is queued or running
        out.append(f"seed {seed}: its prefix (trial {t.number}) {ledger.outcome(t).value}"
                   f" ({ledger.reason(t) or 'no reason recorded'}), so its {branches[seed]} branch(es) did not run")
    return out


def queued_cells(ostudy: "optuna.Study") -> list[str]:
    """What is still queued (WAITING) in the study: each trial's cell, else its number."""
    from optuna.trial import TrialState  # lazy: Optuna only while a study runs; every command imports study/

    return [ledger.cell_key(t) or f"trial {t.number}"
            for t in ostudy.get_trials(deepcopy=False, states=(TrialState.WAITING,)) if ledger.ran_here(t)]


def queued_beyond_budget(ostudy: "optuna.Study", target: int) -> str | None:
    """Why the queued cells will not all run in the study's budget (`target`: plan.resolved_trial_count, its
    n_trials), None when they will."""
    from optuna.trial import TrialState  # lazy: Optuna only while a study runs; every command imports study/

    trials = [t for t in ostudy.get_trials(deepcopy=False) if ledger.ran_here(t)]
    waiting = sum(1 for t in trials if t.state == TrialState.WAITING)
    # what ran or runs: finished for good, or running now (a requeued trial's retry is among the waiting)
    others = sum(1 for t in trials if t.state != TrialState.WAITING
                 and (ledger.is_finished(t) or ledger.outcome(t) is Outcome.RUNNING))
    if waiting == 0 or others + waiting <= target:
        return None
    return (f"only {max(0, target - others)} of the {waiting} queued trial(s) can run within study.n_trials={target} "
            f"({others} already ran or are running); raise study.n_trials to {others + waiting} to run them all")


def all_oom_message(ostudy: "optuna.Study", study: "StudyConfig") -> str | None:
    """When no finished trial fit in memory (every one ran out, or ran out or failed): why, and what did fit."""
    finished = [t for t in ostudy.get_trials(deepcopy=False) if ledger.is_finished(t)]
    ooms = [t for t in finished if ledger.outcome(t) is Outcome.OOM]
    if not ooms or any(ledger.outcome(t) in (Outcome.COMPLETED, Outcome.PRUNED) for t in finished):
        return None
    arms = sorted({a for t in ooms if (a := ledger.arm_of(t)) is not None},
                  key=lambda a: (a.generation_batch_size, int(a.num_generations)))
    reason = str(ledger.reason(ooms[-1]) or "out of memory")[:200]
    ran_out = "; ".join(a.label for a in arms[:5]) + (f"; and {len(arms) - 5} more" if len(arms) > 5 else "")
    return (f"no trial fit in memory: {len(ooms)} of {len(finished)} finished trial(s) ran out of memory "
            f"(at {ran_out or 'configurations not recorded'}; the last reason: {reason}); {_largest_fit(study)}")


def _largest_fit(study: "StudyConfig") -> str:
    """The largest configuration known to fit (the probe's), or what to do when none is known."""
    probe = load_probe(study.output_dir, Owner.of(study))
    best = probe.best() if probe is not None else {}
    if best:
        top = max(best.values(), key=lambda p: (p.generation_batch_size, p.num_generations))
        return (f"the largest configuration that fit in the probe is G={top.num_generations}, generation batch "
                f"{top.generation_batch_size}: search at or below it (search.generation_batch_size: probed)")
    return ("no configuration is known to fit: run `grpo-ablate probe` to find each G's largest generation batch, "
            "or lower search.generation_batch_size / trainer.max_completion_length")


def all_failed_reasons(ostudy: "optuna.Study") -> list[str]:
    """The distinct reasons when trials finished and every one of them failed; else empty."""
    finished = [t for t in ostudy.get_trials(deepcopy=False) if ledger.is_finished(t)]
    if not finished or any(ledger.outcome(t) is not Outcome.FAILED for t in finished):
        return []
    reasons: dict[str, list[int]] = {}
    for t in finished:
        reasons.setdefault((ledger.reason(t) or "no reason recorded")[:300], []).append(t.number)
    return [f"trial(s) {', '.join(map(str, nums))}: {reason}" for reason, nums in reasons.items()]

"""What `run` prints: one line per trial start and end, a status block, and the closing summary."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grpo_ablate.study import ledger
from grpo_ablate.core.vocab import LOG_FILE, Outcome

if TYPE_CHECKING:
    from typing import Callable

    import optuna
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import StudyConfig
    from grpo_ablate.study.lifecycle import Ended, Running

__all__ = ["StudyConsole", "Counts"]


@dataclass
class Counts:
    """This process's trials by outcome, and the run of failures that stops a study."""

    done: int = 0
    pruned: int = 0
    oom: int = 0
    failed: int = 0
    interrupted: int = 0
    consecutive_failures: int = 0
    last_reasons: list[str] = field(default_factory=list)

    def add(self, ended: "Ended") -> None:
        if ended.outcome == Outcome.FAILED.value or ended.fault:
            if ended.outcome == Outcome.FAILED.value:
                self.failed += 1
            else:
                self.interrupted += 1
            self.consecutive_failures += 1
            self.last_reasons = (self.last_reasons + [f"trial {ended.number}: {ended.reason[:300]}"])[-3:]
            return
        if ended.outcome == Outcome.INTERRUPTED.value:
            self.interrupted += 1
            return
        self.consecutive_failures = 0
        if ended.outcome == Outcome.COMPLETED.value:
            self.done += 1
        elif ended.outcome == Outcome.PRUNED.value:
            self.pruned += 1
        elif ended.outcome == Outcome.OOM.value:
            self.oom += 1


def _doing(trial_dir: Path) -> str | None:
    """The trial's last "[grpo-ablate] ..." line in its log.txt (the end of it only), or None."""
    try:
        with open(trial_dir / LOG_FILE, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - 4096))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    said = [line[len(_SAID):].strip() for line in tail.splitlines() if line.startswith(_SAID)]
    return said[-1][:160] if said else None


_SAID = "[grpo-ablate] "


class StudyConsole:
    def __init__(self) -> None:
        from rich.console import Console  # only a run that prints pays rich's import, not every importer of study/

        self.console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._lock:
            self.console.print(text, markup=False, soft_wrap=True)

    def ended(self, study: "StudyConfig", ended: "Ended") -> None:
        shown = ", ".join(f"{m}={v:.4g}" for m, v in zip(study.metric_names, ended.values or []))
        line = f"[trial {ended.number}] {ended.outcome}" + (f": {shown}" if shown else "")
        if ended.reason and ended.outcome != Outcome.COMPLETED.value:
            line += f" ({ended.reason[:300]})"
        self.say(line)

    def status(self, counts: Counts, running: list["Running"]) -> None:
        c = counts
        line = f"done {c.done} | pruned {c.pruned} | oom {c.oom} | failed {c.failed} | running {len(running)}"
        for r in running:
            rw = "-" if r.reward is None else f"{r.reward:.3f}"
            role = r.cell.role if r.cell else "starting"
            line += f"\n  trial {r.number} {role} step {r.step}/{r.max_steps or '?'} reward {rw} eta {r.eta()}"
            doing = _doing(r.trial_dir) if r.step == 0 else None
            if doing:  # before the first step: what the trial is doing (building or waiting for a model ...)
                line += f" ({doing})"
        self.say(line)

    def summary(self, study: "StudyConfig", ostudy: "optuna.Study", ended: "Callable[[FrozenTrial], str | None]") -> None:
        """Trials by outcome (the answer follows from the report); a warm start's copies are counted apart. A trial
        still RUNNING in the storage is "running" only while a run may run it: `ended(trial)` says why not (this
        run, which has ended, could not record it; its run is dead), and it is counted as "not recorded"."""
        every = ostudy.get_trials(deepcopy=False)
        trials = [t for t in every if ledger.ran_here(t)]
        imported = sum(1 for t in every if ledger.is_copy(t))
        states: dict[str, int] = {}
        unrecorded = []
        for t in trials:
            key = ledger.outcome(t).value
            if key == Outcome.RUNNING.value and (why := ended(t)) is not None:
                key = "not recorded"
                unrecorded.append(f"trial {t.number} ({why})")
            states[key] = states.get(key, 0) + 1
        self.say("Trials: " + ", ".join(f"{k} {v}" for k, v in sorted(states.items()))
                 + (f" (and {imported} imported by a warm start, not run here)" if imported else ""))
        if unrecorded:
            self.say("Not recorded: " + "; ".join(unrecorded[:5]) + ("; ..." if len(unrecorded) > 5 else "")
                     + ". Nothing runs them now; run the same command again to record their results or run them again.")
        # the best configuration is the report's answer (report.publish.say_answer), an arm's mean over
        # seeds: a per-trial "best" here would name one lucky seed

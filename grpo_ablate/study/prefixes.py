"""A branch start is a resume: a branch starts from its seed's prefix only once that prefix's checkpoint passes the
checks a resume makes, matched to today's study file; a prefix that fails them is trained again.

    budget: {branch_from: warmup}      # grpo-ablate run study.yaml: each seed's prefix, then its arms from it

A branching study (study/branching.py) trains one prefix per seed and starts every arm of that seed from the
prefix's sealed checkpoint at the branch step. What a branch starts from is checked as a resume checks its own
checkpoint (contract/checkpoints.verify: the manifest, every file's size and SHA-256, the spec fingerprint), against
the fingerprint of the prefix spec *today's* study file builds for that seed:
- a checkpoint whose tensors were changed in place (same size) fails its hashes;
- another seed's prefix copied over this one's names another spec (the seed is in the spec);
- a prefix trained under an earlier study file (`data.task`, `learning_rate` edited since) names the old spec, and
  a prefix trial records the fingerprint of the spec it ran (SPEC_FINGERPRINT), so `completed_prefixes` does not
  take it for this seed's even before any file is read;
- a checkpoint that is gone has nothing to check.
In each case the branch is set aside (interrupted, not counted against its cell, queued again once the prefix is
there: ledger.set_aside / ledger.queue) and the prefix is queued again (ledger.retrain_prefix): its spec is known,
so a prefix is never lost for good. The trial process checks the same again before it loads the checkpoint
(trainer/build.py `_start_from`), with the fingerprint the branch's spec carries (StartFrom.fingerprint).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from grpo_ablate.study import ledger
from grpo_ablate.study.retry import cell_fingerprint
from grpo_ablate.contract import checkpoints
from grpo_ablate.contract.spec import StartFrom
from grpo_ablate.core.vocab import PREFIX_ROLE, TRIALS_DIR, Cell

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import StudyConfig
    from grpo_ablate.plan.run_plan import StudyPlan

__all__ = ["Prefixes", "BranchSetAside"]


class BranchSetAside(Exception):
    """A branch cannot start from its seed's prefix now; the message says why and what was queued."""


class Prefixes:
    """Today's prefix of each seed of a branching study, and the checks a branch start makes (one per run)."""

    def __init__(self, study: "StudyConfig", plan: StudyPlan, cells: Sequence[Cell]) -> None:
        """`cells`: the plan's, or the part of them being queued (a racing round): their seeds' prefixes."""
        self.study = study
        self.plan = plan
        self.cells = {c.seed: c for c in cells if c.role == PREFIX_ROLE}
        self._fingerprints: dict[int, str | None] = {}

    def fingerprint(self, seed: int) -> str | None:
        """The fingerprint of the prefix spec today's study file builds for `seed` (None: it cannot be built)."""
        if seed not in self._fingerprints:
            cell = self.cells.get(seed)
            self._fingerprints[seed] = cell_fingerprint(self.study, self.plan, cell) if cell is not None else None
        return self._fingerprints[seed]

    def fingerprints(self) -> dict[int, str]:
        return {seed: fp for seed in self.cells if (fp := self.fingerprint(seed)) is not None}

    def _folder(self, prefix: "FrozenTrial") -> Path | None:
        recorded = ledger.trial_dir(prefix)
        if recorded is None:
            return None
        folder = Path(recorded)
        own = self.study.output_dir / TRIALS_DIR / folder.name
        return own if not folder.is_dir() and own.is_dir() else folder  # a copied run folder: this study's own copy

    def branch_point(self, ostudy: "optuna.Study", seed: int, step: int) -> tuple["FrozenTrial", StartFrom] | str:
        """The verified start of `seed`'s branches (the prefix trial, the branch point), or why there is none."""
        today = self.fingerprint(seed)
        prefix = ledger.completed_prefixes(ostudy.get_trials(deepcopy=False),
                                           {seed: today} if today else None).get(seed)
        if prefix is None:
            return f"seed {seed}'s prefix has not completed under today's study file"
        folder = self._folder(prefix)
        point = checkpoints.checkpoints_dir(folder) / f"checkpoint-{step}" if folder is not None else None
        why: str | None
        if point is None or not point.is_dir():
            why = f"its checkpoint at step {step} is gone ({point or 'no trial folder'})"
        elif today is None:
            why = "today's study file cannot build its spec"
        else:
            why = checkpoints.verify(checkpoints.Checkpoint(point, step), today)
        if why is not None or point is None:
            return f"seed {seed}'s prefix (trial {prefix.number}) cannot be started from: {why}"
        return prefix, StartFrom(os.fspath(point), step, today)

    def retrain(self, ostudy: "optuna.Study", seed: int) -> bool:
        """Queue `seed`'s prefix again unless an attempt of it is queued or running; True when queued now."""
        cell = self.cells.get(seed)
        return cell is not None and ledger.retrain_prefix(ostudy, self.study, cell)

    def retrain_stale(self, ostudy: "optuna.Study", plan: Sequence[Cell]) -> list[int]:
        """A resumed run: the seeds whose completed prefix ran under an earlier study file (another recorded
        fingerprint) while some of their branches have not run yet; their prefixes are queued again."""
        trials = ostudy.get_trials(deepcopy=False)
        ready = ledger.completed_prefixes(trials, self.fingerprints())
        settled = {key for t in trials if ledger.is_finished(t) and (key := ledger.cell_key(t)) is not None}
        queued = []
        for seed in sorted(self.cells):
            if seed in ready or not any(ledger.is_prefix(t) and ledger.seed_of(t) == seed for t in trials):
                continue
            if any(c.seed == seed and c.role != PREFIX_ROLE and c.key not in settled for c in plan) \
                    and self.retrain(ostudy, seed):
                queued.append(seed)
        return queued

"""Stop when settled: a racing ablation adds seeds only to undecided arms and stops once all are settled.

A real Optuna journal file (no training): results told by hand through the ledger's attributes,
rounds closed by racing.advance() as the runner closes them.
"""

from __future__ import annotations

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from grpo_ablate.config import load_study
from grpo_ablate.plan.cells import baseline_arm, racing_round, study_plan
from grpo_ablate.plan.run_plan import resolve_plan
from grpo_ablate.study.racing import advance
from grpo_ablate.study.ledger import queue as queue_cells
from grpo_ablate.study import ledger
from grpo_ablate.study.ledger import ask, suggest_cell
from grpo_ablate.core.vocab import Outcome
from grpo_ablate.records import trial_record as record
from helpers import ROOT

optuna.logging.set_verbosity(optuna.logging.ERROR)
TINY = str(ROOT / "studies/tiny-cpu.yaml")
SEEDS = list(range(12))


def _study(tmp_path):
    return load_study(TINY, ["num_generations=[8, 2, 4]", "temperature=[1.0, 0.3]", f"study.seeds={SEEDS}",
                             "study.racing={design: anytime, confidence: 0.95, first_round_seeds: 2}", "study.min_effect=0.02",
                             f"study.output_dir={tmp_path}", "study.objectives=[{metric: final_reward}]"])


def _value(arm, seed: int) -> float:
    """baseline 0.6 + seed noise (shared by every arm on a seed, as a seed's data order is); G=2 better
    by 0.05, G=4 within 0.01 of G=2 (a tie with the leader that no drop ever separates), T=0.3 worse."""
    noise = 0.03 * ((seed * 7) % 5 - 2) / 2
    if arm.temperature < 0.5:
        return 0.35 + noise + 0.004 * (seed % 3)
    return {8: 0.6, 2: 0.65 + 0.002 * (seed % 2), 4: 0.65 + 0.003 * ((seed % 3) - 1)}[arm.num_generations] + noise


def _drain(ostudy, study) -> int:
    n = 0
    while (trial := ask(ostudy, planned=True)) is not None:
        cell = suggest_cell(trial, study)
        for k, v in cell.as_attrs().items():
            trial.set_user_attr(k, v)
        trial.set_user_attr(ledger.OUTCOME, Outcome.COMPLETED.value)
        ledger.record_metrics(trial, {"final_reward": _value(cell.arm, cell.seed)})
        ostudy.tell(trial, _value(cell.arm, cell.seed))
        n += 1
    return n


def test_a_settled_study_stops_early_leaves_no_queued_cells_and_reruns_as_finished(tmp_path):
    study = _study(tmp_path)
    journal = tmp_path / "journal.log"
    ostudy = optuna.create_study(study_name="s", direction="maximize",
                                 storage=JournalStorage(JournalFileBackend(str(journal))))
    queue_cells(ostudy, study, racing_round(study, 1))
    spent = [_drain(ostudy, study)]
    while not (state := advance(ostudy, study, resolve_plan(study))).decided:
        spent.append(_drain(ostudy, study))
    planned = len(study_plan(study))
    assert sum(spent) < planned / 2, spent  # 4 arms x 12 seeds = 48 planned; settled after 5 seeds
    assert state.round == 4 and state.calls  # five shared seeds: the first look at which the t-CS is finite
    base = baseline_arm(study).key
    calls = {k: v for k, v in state.calls.items()}
    by_g = {study_plan(study)[i].arm: None for i in range(4)}
    words = {a.label: calls.get(a.key) for a in by_g if a.key != base}
    assert words == {"G=2, batch 32, T=1": "better", "G=4, batch 32, T=1": "better",
                     "G=8, batch 32, T=0.3": "worse"}, words
    assert ostudy.get_trials(states=(TrialState.WAITING,)) == []
    assert {record.seed_of(t) for t in ostudy.get_trials()} == {0, 1, 2, 3, 4}

    # the rerun: a fresh reader of the same journal sees a decided race. Cells queued behind its back
    # (a second host, or a plan queued by an older version) are cancelled through the ledger, not run
    again = optuna.load_study(study_name="s", storage=JournalStorage(JournalFileBackend(str(journal))))
    assert record.study_attrs(again).racing["decided"]
    queue_cells(again, study, [c for c in study_plan(study) if c.seed == 11])
    assert advance(again, study, resolve_plan(study)).decided
    assert again.get_trials(states=(TrialState.WAITING,)) == []
    assert ask(again, planned=True) is None
    cancelled = [t for t in again.get_trials() if ledger.is_cancelled(t)]
    assert len(cancelled) == 4 and all(ledger.outcome(t) is Outcome.INTERRUPTED for t in cancelled)
    assert not any(ledger.is_result(t) or ledger.is_finished(t) for t in cancelled)

def test_without_stop_when_settled_the_race_spends_every_seed_on_undropped_arms(tmp_path):
    study = load_study(TINY, ["num_generations=[8, 2, 4]", "temperature=[1.0, 0.3]", f"study.seeds={SEEDS}",
                              "study.racing={design: anytime, confidence: 0.95, first_round_seeds: 2, stop_when_settled: false}",
                              f"study.output_dir={tmp_path}", "study.objectives=[{metric: final_reward}]"])
    ostudy = optuna.create_study(direction="maximize")
    queue_cells(ostudy, study, racing_round(study, 1))
    spent = [_drain(ostudy, study)]
    while not advance(ostudy, study, resolve_plan(study)).decided:
        spent.append(_drain(ostudy, study))
    assert sum(spent) == 4 * 5 + 2 * 7  # all four to seed 5 (the first finite look), then G=2 and its tie G=4 to seed 12


def test_the_report_shows_the_settled_point_the_path_and_the_calls(tmp_path):
    from grpo_ablate.report.data import build_report_data
    from grpo_ablate.report.html import racing_view, render_html

    study = _study(tmp_path)
    ostudy = optuna.create_study(direction="maximize")
    ostudy.set_user_attr(ledger.BASELINE, baseline_arm(study).as_dict())
    queue_cells(ostudy, study, racing_round(study, 1))
    _drain(ostudy, study)
    while not advance(ostudy, study, resolve_plan(study)).decided:
        _drain(ostudy, study)
    config = {"study": {"seeds": SEEDS, "min_effect": 0.02, "racing": {"confidence": 0.95, "first_round_seeds": 2}}}
    data = build_report_data("s", record.study_attrs(ostudy), ostudy.get_trials(), (("final_reward", "maximize"),), config)
    view = racing_view(data)
    # 4 arms x 5 seeds of 4 x 12 planned
    assert view["settled"] == "settled after 5 of 12 seeds, 42% of the planned completions (20 of 48 trials)"
    assert [r["round"] for r in view["path"]] == [1, 2, 3, 4]
    assert "G=2, batch 32, T=1 undecided" in view["path"][0]["calls"]  # two seeds: nothing is known yet
    assert "G=2, batch 32, T=1 better" in view["path"][-1]["calls"]
    html = render_html(data, figures=[])
    assert "The race settled after 5 of 12 seeds" in html and "The verdict after each round" in html
    # the answer's words are the same rule's: the study raced, so its calls rest on the sequence
    words = data.verdict.words
    assert "anytime-valid" in words and "G=2, batch 32, T=1 better" in words and "G=8, batch 32, T=0.3 worse" in words
    assert {a.call for a in data.verdict.arms} == {"better", "worse"}


def test_min_effect_and_the_betting_method_are_validated(tmp_path):
    import pytest

    from grpo_ablate.config import StudyError

    with pytest.raises(StudyError, match="study.min_effect"):
        load_study(TINY, ["study.min_effect=-0.1", f"study.output_dir={tmp_path}"])
    with pytest.raises(StudyError, match="betting sequence needs an objective with a known range"):
        load_study(TINY, ["study.racing={method: betting}", "study.objectives=[{metric: reward_per_hour}]",
                          f"study.output_dir={tmp_path}"])
    ok = load_study(TINY, ["study.racing={}", f"study.output_dir={tmp_path}"])
    assert ok.study.racing.stop_when_settled and ok.study.racing.method == "t" and ok.study.min_effect is None


def test_the_baseline_keeps_running_while_an_arm_still_needs_it_even_when_worse_than_the_leader():
    from grpo_ablate.records.race_record import RaceState
    from grpo_ablate.study.racing import Rule, decide

    seeds = range(6)
    results = {"base": {s: 0.5 + 0.01 * (s % 2) for s in seeds},
               "lead": {s: 0.8 + 0.01 * (s % 3) for s in seeds},             # clearly better than the baseline
               "noisy": {s: 0.5 + (0.2 if s % 2 else -0.2) for s in seeds}}  # undecided against the baseline
    state = decide(RaceState(5, ["base", "lead", "noisy"]), results, maximize=True, seeds_left=True,
                   rule=Rule(stop_when_settled=True, design="anytime"), baseline="base")
    assert state.calls["lead"] == "better" and state.calls["noisy"] == "undecided"
    assert "base" in state.live and "base" not in {d.arm for d in state.dropped} and not state.decided
    plain = decide(RaceState(5, ["base", "lead", "noisy"]), results, maximize=True, seeds_left=True,
                   rule=Rule(stop_when_settled=False, design="anytime"), baseline="base")
    assert "base" in {d.arm for d in plain.dropped}  # without stopping, racing drops it as before

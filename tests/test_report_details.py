"""Report details that must not mislead: effects-table colours, the importance plot in planned
studies, the held-out prompts actually scored.

    pytest tests/test_report_details.py
"""

from __future__ import annotations

import pytest

from _report_fixtures import SeedRun, load_custom, make_custom_study
from grpo_ablate.report.html import delta_cell, held_out_used, render_html
from grpo_ablate.report.plots import plot_importances
from grpo_ablate.core.vocab import Arm


def test_effects_cells_are_coloured_only_beyond_the_seeds_spread():
    assert delta_cell(0.25, True, True, "w") == {"text": "+25%", "cls": "better clear", "title": "w"}
    assert delta_cell(-0.25, False, True, "w")["cls"] == "worse clear"
    assert delta_cell(0.25, True, False, "w")["cls"] == "noise"
    single = delta_cell(0.25, True, None, "w")  # one seed: plain, as the legend says
    assert single["cls"] == "single" and "better" not in single["cls"]
    tiny = delta_cell(-0.002, True, None, "w")  # "-0%" in green was the bug
    assert tiny["text"] == "−<1%" and tiny["cls"] == "single"
    assert delta_cell(-0.002, False, True, "w")["text"] == "−<1%"
    assert delta_cell(0.0, None, None, "w") == {"text": "0%", "cls": "same", "title": "w"}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    arms = {"baseline": (Arm(8, 32, 1.0), {s: SeedRun(eval_curve=(0.2, 0.4 + 0.1 * s)) for s in (0, 1)}),
            "num_generations=2": (Arm(2, 32, 1.0), {s: SeedRun(eval_curve=(0.2, 0.5 + 0.1 * s)) for s in (0, 1)})}
    storage, _ = make_custom_study(tmp_path_factory.mktemp("details"), arms, evaluation={"num_prompts": 48})
    return load_custom(storage)


def test_the_held_out_prompts_actually_scored_are_on_the_page(study):
    study.config = {"evaluation": {"num_prompts": 48}, "study": {"sampler": "ablation"}}
    words = held_out_used(study)
    assert words is not None and "4 of the 48 requested" in words  # the fixture's trials scored 4
    page = render_html(study, [])
    assert "4 of the 48 requested" in page


def test_a_planned_study_answers_with_its_effects_table_not_an_importance_plot(study):
    study.config = {"study": {"sampler": "ablation"}}
    fig = plot_importances(study)
    assert fig.uri is None and fig.note.startswith("left out for a planned study (ablation)")
    study.config = {"study": {"sampler": "tpe"}}
    assert plot_importances(study).note is None or not plot_importances(study).note.startswith("left out")


def test_each_arm_has_one_colour_on_every_figure(study):
    from matplotlib.colors import to_rgba

    from grpo_ablate.report.curves import _curve_groups
    from grpo_ablate.report.figure import arm_colors, new_axes
    from grpo_ablate.report.plots import _draw_by_g

    colors = arm_colors(study)
    assert len(set(colors.values())) == len(study.arms) == 2
    groups, pooled = _curve_groups(study)  # the reward and held-out curves
    assert not pooled and {label: c for label, _, _, c in groups} == {a.title: colors[a.config] for a in study.arms}
    for lines in (True, False):  # the by-G plots (reward/hour, stability) and the zero-spread plot
        fig, (ax,) = new_axes()
        _draw_by_g(fig, ax, study.arms, "eval_final_reward", lines=lines, colors=colors)
        drawn = {c.get_label(): to_rgba(c.lines[0].get_color()) for c in ax.containers}
        assert drawn == {a.title: to_rgba(colors[a.config]) for a in study.arms}
        # lines joining a series are grey: no other meaning for a colour
        assert all(to_rgba(line.get_color())[:3] == to_rgba("#8a8a8a")[:3] for line in ax.get_lines()
                   if line.get_label() and not line.get_label().startswith("_") and line.get_label() not in drawn)


def test_run_one_piped_prints_short_lines_not_a_wrapped_table(capsys):
    from grpo_ablate.commands.run_one import print_result
    from grpo_ablate.contract.result import TrialResult
    from grpo_ablate.core.vocab import HEADLINE_METRICS, Outcome

    print_result(TrialResult(Outcome.COMPLETED, metrics={"reward_per_hour": 12.5}))  # pytest's stdout is no terminal
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "trial completed" and len(lines) == 1 + len(HEADLINE_METRICS) + 3
    assert "reward_per_hour: 12.50 (higher is better)" in lines and all(len(x) < 100 for x in lines)


def test_the_importance_evaluators_caveats_become_a_note_not_a_stray_warning():
    import warnings

    import optuna

    from grpo_ablate.report.importance import param_importances

    dist = {"num_generations": optuna.distributions.CategoricalDistribution([2, 4, 8])}
    frozen = [optuna.trial.create_trial(params={"num_generations": g}, distributions=dist, value=0.0769)
              for g in (2, 4, 8, 2, 4, 8)]
    for i, t in enumerate(frozen):
        t.number = i
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, note = param_importances(frozen, set(range(6)), [("eval_final_reward", "maximize")])
    assert not [w for w in caught if issubclass(w.category, UserWarning)]
    assert note is not None and "eval_final_reward: " in note

"""advise's prediction in the report: the zero-spread figure overlays it on what the trials measured.

    pytest tests/test_report_advice.py
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from matplotlib.figure import Figure as MplFigure

from _report_fixtures import STUDY_NAME, make_study
from grpo_ablate.stats.zero_spread import zero_spread_beta
from grpo_ablate.core.errors import StudyError
from grpo_ablate.files.owned import Owner
from grpo_ablate.report.data import build_report_data, read_advice
from grpo_ablate.report.plots import _draw_advice, plot_zero_spread
from grpo_ablate.report.records import load_trials

OWNER = Owner("advised", "builtin:tiny", "defaults (one CPU process)")
ADVICE = {  # the shape run_advise writes (Advice.to_dict), two temperatures of a binary reward
    "owner": vars(OWNER),
    "temperatures": [0.3, 1.0],
    "fits": {"0.3": {"a": 0.2, "b": 16.5, "mean": 0.012}, "1.0": {"a": 0.5, "b": 0.6, "mean": 0.45}},
    "predictions": [{"num_generations": g, "generation_batch_size": 16, "temperature": t,
                     "zero_spread": zero_spread_beta(g, *((0.2, 16.5) if t == 0.3 else (0.5, 0.6)))}
                    for g in (4, 8, 16) for t in (0.3, 1.0)],
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("report-advice")
    storage, _ = make_study(root)
    attrs, frozen = load_trials(storage, STUDY_NAME)
    return build_report_data(STUDY_NAME, attrs, frozen)


def test_read_advice_takes_a_written_advise_json_and_nothing_else(tmp_path):
    assert read_advice(tmp_path, OWNER) is None
    (tmp_path / "advise.json").write_text(json.dumps({"owner": vars(OWNER)}))  # arms only: no prediction to draw
    assert read_advice(tmp_path, OWNER) is None
    (tmp_path / "advise.json").write_text(json.dumps(ADVICE))
    assert read_advice(tmp_path, OWNER)["fits"]["1.0"]["a"] == 0.5
    (tmp_path / "advise.json").write_text("{not json")
    with pytest.raises(StudyError, match="advise.json.*not valid JSON.*delete it"):
        read_advice(tmp_path, OWNER)


def test_the_prediction_is_drawn_per_temperature_from_the_fitted_difficulty():
    ax = MplFigure().add_subplot()
    gs = _draw_advice(ax, ADVICE)
    assert gs == [4, 8, 16]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"advise, T=0.3", "advise, T=1"}
    x, y = lines["advise, T=1"].get_data()
    i = min(range(len(x)), key=lambda j: abs(x[j] - 8))  # the smooth curve passes through the prediction at G=8
    assert abs(y[i] - zero_spread_beta(x[i], 0.5, 0.6)) < 1e-9
    non_binary = {**ADVICE, "fits": {}}  # no Beta: the predicted points themselves
    ax = MplFigure().add_subplot()
    _draw_advice(ax, non_binary)
    x, y = ax.get_lines()[0].get_data()
    assert list(x) == [4, 8, 16] and y[1] == pytest.approx(zero_spread_beta(8, 0.2, 16.5))


def test_the_report_figure_says_when_advise_is_overlaid(data):
    plain = plot_zero_spread(data)
    assert plain.uri and "advise" not in plain.caption
    overlaid = plot_zero_spread(dataclasses.replace(data, advice=ADVICE))
    assert overlaid.uri and "grpo-ablate advise" in overlaid.caption and overlaid.uri != plain.uri

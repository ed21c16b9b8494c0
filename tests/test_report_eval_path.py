"""The report's verdict at each evaluation point: hand-built study files (tests/_report_fixtures.py)."""

from __future__ import annotations

from _report_fixtures import SeedRun, load_custom, make_custom_study
from grpo_ablate.report.html import eval_path, render_html
from grpo_ablate.core.vocab import Arm

BASE, G4 = Arm(8, 32, 1.0), Arm(4, 32, 1.0)


def _runs(curves: dict[int, tuple[float, ...]]) -> dict[int, SeedRun]:
    return {s: SeedRun(eval_curve=c) for s, c in curves.items()}


def test_the_calls_at_each_point_show_a_late_crossing(tmp_path):
    # G=4 trails the baseline by 0.10 at the first two points on every seed, then passes it by 0.10
    base = {s: (0.2, 0.4 + o, 0.5 + o, 0.6 + o, 0.6 + o) for s, o in ((0, 0.0), (1, 0.05), (2, -0.05))}
    g4 = {s: (0.2, c[1] - 0.10 - 0.005 * s, c[2] - 0.10 + 0.004 * s, c[3] + 0.1 + 0.003 * s, c[4] + 0.1 - 0.002 * s)
          for s, c in base.items()}
    storage, _ = make_custom_study(tmp_path, {"baseline": (BASE, _runs(base)), "num_generations=4": (G4, _runs(g4))},
                                   evaluation={"num_prompts": 4})
    data = load_custom(storage)
    rows = eval_path(data)
    assert [r["point"] for r in rows] == [1, 2, 3, 4]  # point 0 (before training) is the same model everywhere
    calls = [r["calls"] for r in rows]
    assert calls[0] == "G=4, batch 32, T=1 worse" and calls[1] == "G=4, batch 32, T=1 worse"
    assert calls[-1] == "G=4, batch 32, T=1 better"
    assert {a.call for a in data.verdict.arms} == {"better"}  # the answer's call is the last point's
    assert "The verdict at each evaluation point" in render_html(data, figures=[])

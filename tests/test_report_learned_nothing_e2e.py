"""A study the tiny model cannot learn, end to end: advise says G will not help, and `run` answers
that the study cannot rank G, on the console, on the page and in the dashboard's study note.

The task: the built-in addition prompts, scored by a reward beside the study file that wants seven
times the sum, which the warm-started tiny model never writes in a 3-step budget. Two arms x two
seeds (4 real trials) and one advise sampling process.

    pytest -m slow tests/test_report_learned_nothing_e2e.py
"""

from __future__ import annotations

import json
import textwrap

import optuna
import pytest

from helpers import cli_inprocess
from grpo_ablate.storage.store import open_storage

pytestmark = pytest.mark.slow

SEVEN_TIMES = '''\
def seven_times(prompts, completions, completion_ids=None, *, answer, **kwargs):
    """1 when the completion is 7 x the sum: a skill the addition-trained tiny model does not have."""
    return [float(c.split("<eos>")[0].strip() == str(7 * int(a))) for c, a in zip(completions, answer)]
'''


def test_a_study_that_cannot_learn_says_it_cannot_rank_g(study_here, tmp_path):
    (tmp_path / "never.py").write_text(SEVEN_TIMES)
    study = tmp_path / "study.yaml"
    study.write_text(textwrap.dedent(f"""\
        study:
          name: stuck
          output_dir: {tmp_path / 'run'}
          sampler: ablation
          baseline: {{num_generations: 4}}
          seeds: [0, 1]
          workers: 1
        model: {{name_or_path: builtin:tiny}}
        data: {{task: addition, num_prompts: 64}}
        rewards: [{{name: 'never:seven_times'}}]
        trainer: {{per_device_train_batch_size: 8, max_completion_length: 6, beta: 0.0, learning_rate: 2.0e-4}}
        search: {{num_generations: [2, 4], temperature: 1.0}}
        budget: {{max_steps: 3}}
        evaluation: {{num_prompts: 16, points: 1}}
        """))
    # run from elsewhere: the reward module resolves from the study file's folder
    advise = cli_inprocess("advise", str(study), "--k", "4", "--prompts", "16")  # its sampler: a process of its own
    assert advise.returncode == 0, advise.stdout + advise.stderr
    assert "G will not help here" in advise.stdout and "shortlist" not in advise.stdout
    assert "16 of 16 prompts were never solved" in advise.stdout
    sampled = [json.loads(x) for x in (tmp_path / "run" / "advise" / "completions.jsonl").read_text().splitlines()]
    assert len(sampled) == 16 and all(c["reward"] == 0.0 for r in sampled for c in r["completions"])

    res = study_here("run", str(study))
    assert res.returncode == 0, res.stdout + res.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    verdict = summary["verdict"]
    assert verdict["kind"] == "cannot_rank" and verdict["recommended"] is None
    assert "Keep the baseline" not in verdict["words"]
    assert "advise found 16 of 16 prompts never solved" in verdict["words"]
    # the console prints the report's words and its path; no seed is named "best"
    assert "Answer:\n" + "".join(f"  {line}\n" for line in verdict["lines"]) in res.stdout
    assert f"Report: {tmp_path / 'run' / 'report.html'}" in res.stdout and "Best trials" not in res.stdout
    assert "This study cannot rank G" in (tmp_path / "run" / "report.html").read_text()
    # the dashboard's note is the same answer, and the page is attached to the study
    ostudy = optuna.load_study(study_name="stuck", storage=open_storage(str(tmp_path / "run" / "study.journal")))
    from optuna_dashboard._note import get_note_from_system_attrs  # the dashboard's own reader of its notes

    note = get_note_from_system_attrs(ostudy._storage.get_study_system_attrs(ostudy._study_id), None)
    assert all(f"**{line}**" in note["body"] for line in verdict["lines"])
    assert [m.filename for m in optuna.artifacts.get_all_artifact_meta(ostudy)] == ["report.html"]
